
"""Ape-X's actors never wait on the learner: while a learner update holds the weights
(a slow step) and a newer version is due to the actors, the driver keeps relaunching
them (with the newest weights it has) instead of waiting for the update to end."""

import threading
import time

import pytest

from tests.integration.test_apex import runtime

# alone: a timing bound
pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.alone]

HOLD_S = 6.0


def test_actors_keep_sampling_and_syncing_while_an_update_holds_the_learner(ray_local):
    engine, learner = runtime(max_weight_sync_delay=1)  # a sync due before every fragment
    hold, holding = threading.Event(), threading.Event()
    update = learner.update

    def slow_update(batch, is_weights):
        out = update(batch, is_weights)  # a new version, not yet sent to any actor
        if hold.is_set():
            hold.clear()
            with learner.lock:  # the next update, begun at once, holds the weights
                holding.set()
                time.sleep(HOLD_S)
        return out

    learner.update = slow_update
    try:
        engine.iterate(min_time_s=0.5, min_env_steps=600)
        assert learner.updates > 0  # weights newer than the actors' are due to them
        hold.set()  # the next update holds the learner for HOLD_S
        t0 = time.monotonic()
        engine.iterate(min_time_s=1.0, min_env_steps=0)
        assert holding.is_set() and time.monotonic() - t0 < HOLD_S / 2
        # Steps, not a rate (a loaded machine slows actors): four fragments collected
        # while the update still holds the learner; an actor waiting on it would collect
        # them only after the hold.
        engine.iterate(min_time_s=0.0, min_env_steps=4 * 25)
        assert learner.lock.locked()
    finally:
        time.sleep(max(0.0, HOLD_S - 1.0))
        engine.close()
