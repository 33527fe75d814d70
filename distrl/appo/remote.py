"""APPO's env runners as Ray actors: each always has fragments requested (up to
max_queued_fragments ahead), so runners sample while the driver's learner trains. New
weights go out with the next request, one ray.put per version. A runner that dies or
hangs is replaced by the Supervisor; only its fragment in progress is lost (sampled
again), never one the learner was given.
"""

from __future__ import annotations

import time
from collections import deque

import ray

from distrl.core.config import RunConfig
from distrl.core.types import Fragment
from distrl.ppo.env_runner import Weights
from distrl.ppo.remote import RayRunnerGroup
from distrl.runtime.supervisor import Fault, MakeKwargs, cause, last_line


class RaySampler(RayRunnerGroup):
    """PPO's runner group (N remote EnvRunners under one Supervisor) kept busy;
    fragments handed out in arrival order."""

    def __init__(self, make_kwargs: MakeKwargs, num_runners: int, num_cpus: float,
                 run: RunConfig, steps_per_env: int, max_queued: int):
        super().__init__(make_kwargs, num_runners, num_cpus, run)
        self.steps_per_env, self.max_queued = steps_per_env, max_queued
        self.timeout_s = run.actor_timeout_s
        self.inflight: dict[ray.ObjectRef, tuple[int, float]] = {}  # ref: (slot, started)
        self.ready: deque[Fragment] = deque()
        self.weights: tuple[ray.ObjectRef, int] | None = None
        self.sent = [-1] * num_runners  # the weights version each runner was sent

    def publish(self, weights: Weights, version: int) -> None:
        self.weights = (ray.put(weights), version)
        self._launch()

    def take(self, n: int) -> list[Fragment]:
        """The next ``n`` fragments to arrive (waiting for them)."""
        while len(self.ready) < n:
            done, _ = ray.wait(list(self.inflight), num_returns=1, timeout=0.1)
            for ref in done:
                self._handle(ref)
            self._check_hung()
            self._launch(want=n)
        out = [self.ready.popleft() for _ in range(n)]
        self._launch()
        return out

    def pause(self) -> list[Fragment]:
        """Every fragment requested, once it arrived, and those not yet taken: the
        runners are then idle (their states can be saved)."""
        while self.inflight:
            done, _ = ray.wait(list(self.inflight), num_returns=1, timeout=0.1)
            for ref in done:
                self._handle(ref)
            self._check_hung()
        pending = list(self.ready)
        self.ready.clear()
        return pending

    def resume(self, pending: list[Fragment]) -> None:
        self.ready.extendleft(reversed(pending))
        self._launch()

    def _launch(self, want: int = 0) -> None:
        """Requests up to max_queued per runner in flight, and fragments waiting or in
        flight up to max_queued x runners (or ``want``, what a caller waits for)."""
        if self.weights is None:
            return
        ref, version = self.weights
        per_slot = [0] * len(self.sup.actors)
        for slot, _ in self.inflight.values():
            per_slot[slot] += 1
        room = (max(self.max_queued * len(self.sup.actors), want) - len(self.ready)
                - len(self.inflight))
        for slot in sorted(range(len(per_slot)), key=per_slot.__getitem__):
            while room > 0 and per_slot[slot] < self.max_queued:
                weights = ref if self.sent[slot] != version else None
                self.sent[slot] = version
                call = self.sup.actors[slot].fragment.remote(self.steps_per_env, weights,
                                                             version)
                self.inflight[call] = (slot, time.monotonic())
                per_slot[slot] += 1
                room -= 1

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
        """A new actor for ``slot``; the calls queued on the old one go with it."""
        for ref, (s, _) in list(self.inflight.items()):
            if s == slot:
                del self.inflight[ref]
        self.sup.replace(slot, fault)
        self.sent[slot] = -1
