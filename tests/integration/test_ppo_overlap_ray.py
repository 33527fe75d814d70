
"""PPO with overlap on Ray runners: the next round is requested before the learner
trains, and a runner killed while its request is in flight is replaced."""

import json
import time

import gymnasium as gym
import numpy as np
import pytest

from distrl import PPOConfig, RunConfig, train_ppo
from distrl.core.checkpoint import Checkpoint
from distrl.models.actor_critic import ActorCritic
from distrl.models.config import ModelConfig
from tests.fakes import counting
from tests.integration.test_ray_runners import group, weights_of

pytestmark = [pytest.mark.ray, pytest.mark.slow]


def test_a_runner_killed_with_its_request_in_flight_is_replaced(ray_local):
    # Each env step sleeps 2 ms, so a request (4 envs x 400 steps, stepped in turn) takes
    # over 3 s on any machine: the kill, sent 0.2 s in, lands while it is in flight.
    # On CartPole a fast machine could finish the request before the kill landed.
    g = group(env=counting(end=10_000, sleep_s=0.002), n=2)
    model = ActorCritic(gym.spaces.Box(-np.inf, np.inf, (1,)), gym.spaces.Discrete(2),
                        ModelConfig())
    try:
        g.launch(weights_of(model), 3, steps_per_env=400)
        assert g.in_flight
        time.sleep(0.2)  # the request is being sampled
        ray_local.kill(g.sup.actors[0])
        rollouts = g.collect()
        assert not g.in_flight
        assert [r.size for r in rollouts] == [1600, 1600]
        assert [r.weights_version for r in rollouts] == [3, 3]
        assert g.sup.restarts == [1, 0]
    finally:
        g.close()


def test_overlap_trains_each_batch_one_update_after_its_weights(ray_local, tmp_path):
    cfg = PPOConfig(train_batch_size=64, minibatch_size=32, num_epochs=1, num_env_runners=2,
                    num_envs_per_env_runner=2, overlap=True)
    out = train_ppo(cfg, RunConfig(max_env_steps=256, logdir=str(tmp_path), progress=False))
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["learner/policy_lag"] for r in rows] == [0, 1, 1, 1]
    pending = Checkpoint(out["checkpoint"]).trusted("ppo", "pending.pkl")["rollouts"]
    assert [p.weights_version for p in pending] == [3, 3]  # one per runner, kept
