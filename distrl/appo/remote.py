"""APPO's env runners as Ray actors: each always has fragments requested (up to
max_queued_fragments ahead), so runners sample while the driver's learner trains.

Weights go through the per-node policy store (distrl.store): the driver publishes each
version once to a store of the run's own, which keeps one copy per node; a runner pulls
the newest version from its node's store as it starts a fragment, so a request queued
before a publish still acts with the newest weights. A runner that dies or hangs is
replaced by the Supervisor; only its fragment in progress is lost (sampled again), never
one the learner was given. A store that dies is rebuilt with the newest weights (RunStore)
while the runners wait for it.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import ray

from distrl.core.config import RunConfig
from distrl.core.types import Fragment
from distrl.ppo.env_runner import EnvRunner, Weights
from distrl.runtime.supervisor import (
    Fault,
    MakeKwargs,
    Restarts,
    SupervisedGroup,
    Supervisor,
    cause,
    last_line,
)
from distrl.store.policy_cache import FlatLayout, PolicySpec, flatten_arrays
from distrl.store.remote import PolicyReader, RunStore

POLICY_ID = "appo"


class StoreRunner:
    """PPO's EnvRunner acting with the newest weights of its node's policy store."""

    def __init__(self, head: str, **runner_kwargs: Any):
        self.runner = EnvRunner(**runner_kwargs)  # first: a user env's error is the one shown
        self.model_config = runner_kwargs["model"]
        self.layout = FlatLayout.of(self.runner.model)
        self.reader = PolicyReader(head, max_cached_policies=1)

    def spec(self) -> PolicySpec:
        return PolicySpec(*self.runner.spaces(), self.model_config)

    def fragment(self, steps_per_env: int) -> Fragment:
        """One fragment, with the store's newest weights (one version check when they
        are those already loaded)."""
        newer = self.reader.newer(POLICY_ID, self.runner.version)
        if newer is not None:
            version, flat = newer
            self.runner.set_weights(self.layout.arrays(flat), version)  # copied in
        return self.runner.fragment(steps_per_env)

    def get_state(self) -> tuple:
        return self.runner.get_state()

    def set_state(self, state: tuple) -> None:
        self.runner.set_state(state)


class RaySampler(SupervisedGroup):
    """N StoreRunners under one Supervisor, kept busy; fragments handed out in arrival
    order. The Ray twin of appo.sampler.ThreadSampler."""

    def __init__(self, make_kwargs: MakeKwargs, num_runners: int, num_cpus: float,
                 run: RunConfig, steps_per_env: int, max_queued: int):
        self.store = RunStore(Restarts("policy_store", run.max_restarts))
        try:
            self.sup = Supervisor("env_runners", StoreRunner,
                                  lambda i, restart: {**make_kwargs(i, restart),
                                                      "head": self.store.name},
                                  num_runners, max_restarts=run.max_restarts,
                                  call_timeout_s=run.actor_timeout_s,
                                  resources={"num_cpus": num_cpus},
                                  placement_strategy=run.placement_strategy)
            self.spec = self.sup.call_all(lambda i, a: a.spec.remote(), [0])[0]
        except BaseException:
            self.store.close()
            raise
        self.steps_per_env, self.max_queued = steps_per_env, max_queued
        self.timeout_s = run.actor_timeout_s
        self.inflight: dict[ray.ObjectRef, tuple[int, float]] = {}  # ref: (slot, started)
        self.ready: deque[Fragment] = deque()
        self.version: int | None = None  # the newest published

    def publish(self, weights: Weights, version: int) -> None:
        """Hand ``version`` to the store without waiting for it. The first is waited
        for: every request then finds weights."""
        self.store.publish(POLICY_ID, flatten_arrays(weights), self.spec, version,
                           block=self.version is None)
        self.version = version
        self._launch()

    def take(self, n: int) -> list[Fragment]:
        """The next ``n`` fragments to arrive (waiting for them)."""
        while len(self.ready) < n:
            self._wait_one()
            self._launch(want=n)
        out = [self.ready.popleft() for _ in range(n)]
        self._launch()
        return out

    def pause(self) -> list[Fragment]:
        """Every fragment requested, once it arrived, and those not yet taken: the
        runners are then idle (their states can be saved)."""
        while self.inflight:
            self._wait_one()
        pending = list(self.ready)
        self.ready.clear()
        return pending

    def resume(self, pending: list[Fragment]) -> None:
        self.ready.extendleft(reversed(pending))
        self._launch()

    def metrics(self) -> dict[str, float]:
        return {**self.sup.metrics(), **self.store.metrics()}

    def close(self) -> None:
        try:
            self.store.close()
        finally:
            super().close()

    def _launch(self, want: int = 0) -> None:
        """Requests up to max_queued per runner in flight, and fragments waiting or in
        flight up to max_queued x runners (or ``want``, what a caller waits for)."""
        if self.version is None:
            return
        per_slot = [0] * len(self.sup.actors)
        for slot, _ in self.inflight.values():
            per_slot[slot] += 1
        room = (max(self.max_queued * len(self.sup.actors), want) - len(self.ready)
                - len(self.inflight))
        for slot in sorted(range(len(per_slot)), key=per_slot.__getitem__):
            while room > 0 and per_slot[slot] < self.max_queued:
                call = self.sup.actors[slot].fragment.remote(self.steps_per_env)
                self.inflight[call] = (slot, time.monotonic())
                per_slot[slot] += 1
                room -= 1

    def _wait_one(self) -> None:
        done, _ = ray.wait(list(self.inflight), num_returns=1, timeout=0.1)
        for ref in done:
            self._handle(ref)
        self.store.check()  # runners wait for a lost store while this rebuilds it
        self._check_hung()

    def _handle(self, ref: ray.ObjectRef) -> None:
        slot, _ = self.inflight.pop(ref)
        try:
            self.ready.append(ray.get(ref))
        except ray.exceptions.RayActorError as err:
            self._replace(slot, Fault(f"died: {last_line(err)}", True))
        except Exception as err:
            raise cause(err) from None

    def _check_hung(self) -> None:
        now = time.monotonic()
        for ref, (slot, started) in list(self.inflight.items()):
            if now - started > self.timeout_s and ref in self.inflight:
                self._replace(slot, Fault(f"hung: no answer within {self.timeout_s:g} s", True))

    def _replace(self, slot: int, fault: Fault) -> None:
        """A new actor for ``slot``; the calls queued on the old one go with it. The
        store is rebuilt first if it died too: the new actor starts by reading it."""
        for ref, (s, _) in list(self.inflight.items()):
            if s == slot:
                del self.inflight[ref]
        self.store.ensure()
        self.sup.replace(slot, fault)
