"""Supervisor: one group of actors of one class (env runners, DD-PPO workers, Ape-X
actors and replay shards, league match runners). It starts them, waits on every call
with a timeout, and replaces an actor that died or hung, up to ``max_restarts`` per
slot; ``faults/restarts/<group>`` counts the replacements. ``call_all`` is the one loop
that calls every actor, replaces the faulty and calls their replacements again. Groups
restarted by other code (the league's learners, store and replays) count with the same
Restarts.

An actor's own error (a NaN from its env, a bad config) is raised at once in the
driver: restarting would only repeat it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

import ray

from distrl.envs.errors import EnvError
from distrl.runtime.cluster import actor_class, release_ray
from distrl.runtime.placement import Placement

MakeKwargs = Callable[[int, int], dict[str, Any]]  # (slot, restart count) -> constructor kwargs
SAME_CAUSE_LIMIT = 3
"""Constructor failures of one slot, for one cause in a row, that stop the run whatever
max_restarts says: a new actor would raise it again (a dead store, a missing file)."""


@dataclass(frozen=True)
class Fault:
    """Why a call got no result."""

    reason: str  # one line for a person: "died: ...", "hung: ...", or the error's last line
    replace: bool  # the actor is dead or hung; False: it is alive and raised
    detail: str = ""  # the actor's own traceback, when it raised
    # The actor is alive, but an actor it called died (a replay, the policy store): a
    # caller that can replace that one retries this actor instead of replacing it.
    peer: bool = False
    # The actor's constructor raised (Ray reports it as a death): no resource problem.
    in_constructor: bool = False


class Restarts:
    """Restarts of one group's members (slots, policy ids), each up to max_restarts: the
    one counter behind every ``faults/restarts/<group>``, so each group gives up, logs
    and reports alike."""

    def __init__(self, name: str, max_restarts: int):
        self.name, self.max_restarts = name, max_restarts
        self.counts: dict[Hashable, int] = {}

    def count(self, key: Hashable, what: str, verb: str = "replaced") -> int:
        """One more restart of ``key``, for ``what`` (e.g. "env_runners 0 died: ...");
        a RuntimeError instead once it was already restarted max_restarts times."""
        done = self.counts.get(key, 0)
        if done >= self.max_restarts:
            raise RuntimeError(f"{what}; it was already {verb} {done} times "
                               f"(max_restarts={self.max_restarts}), giving up: find why "
                               "(`ray status`, the node's logs), then continue with --resume.")
        self.counts[key] = done + 1
        return done + 1

    def report(self, key: Hashable, what: str, how: str) -> None:
        """One line for a person once the restart counted for ``key`` is done."""
        print(f"distrl: {what}; {how} (restart {self.counts[key]}/{self.max_restarts})",
              flush=True)

    def metrics(self) -> dict[str, int]:
        return {f"faults/restarts/{self.name}": sum(self.counts.values())}


class Supervisor:
    """Actors of one class, one per slot, each replaced when it dies or hangs."""

    def __init__(self, name: str, cls: type, make_kwargs: MakeKwargs, size: int, *,
                 max_restarts: int, call_timeout_s: float, resources: dict[str, float],
                 start_timeout_s: float = 120.0, placement_strategy: str | None = None,
                 group_failure: Callable[[Exception], bool] | None = None):
        self.name = name
        self.call_timeout_s = call_timeout_s
        self.start_timeout_s = start_timeout_s
        self.resources = resources
        # An error that is the group's, not the actor's own (DD-PPO: a failed collective).
        self._group_failure = group_failure or (lambda err: False)
        self._remote = ray.remote(**resources)(actor_class(cls))
        self._make_kwargs = make_kwargs
        self.counter = Restarts(name, max_restarts)
        self._failed_starts: dict[int, tuple[str, int]] = {}  # slot: (cause, times in a row)
        # One bundle per slot; None: wherever Ray's default scheduling puts each actor.
        self.placement = (Placement(name, resources, size, placement_strategy)
                          if placement_strategy and size else None)
        self.actors = [self._start(i, 0) for i in range(size)]
        try:
            self.wait_all("start", {i: a.ready.remote() for i, a in enumerate(self.actors)},
                          start_timeout_s)
        except BaseException:
            self.close()
            raise

    @property
    def restarts(self) -> list[int]:
        """Replacements so far, per slot."""
        return [self.counter.counts.get(i, 0) for i in range(len(self.actors))]

    def call_all(self, call: Callable[[int, Any], ray.ObjectRef],
                 slots: Iterable[int] | None = None,
                 heal: Callable[[], bool] | None = None) -> dict[int, Any]:
        """``call(slot, actor)`` on each slot's actor (every slot, or ``slots``), all at
        once; a slot whose actor died or hung gets a replacement (replace_all) and is
        called again. On any fault ``heal()`` first replaces the actors they call (a
        store, a replay) that died too: a replacement starts by reading them. One that
        lost an actor it called (Fault.peer) is called again as it is if ``heal()``
        replaced that actor (True), else replaced too. Returns {slot: result} in slot
        order."""
        pending = list(range(len(self.actors)) if slots is None else slots)
        results: dict[int, Any] = {}
        while pending:
            done, faults = self.settle({i: call(i, self.actors[i]) for i in pending})
            results.update(done)
            healed = heal is not None and bool(faults) and heal()
            retry = [i for i, f in faults.items() if f.peer and healed]
            pending = retry + list(self.replace_all(
                {i: f for i, f in faults.items() if i not in retry}))
        return dict(sorted(results.items()))

    def wait_all(self, what: str, futures: dict[int, ray.ObjectRef],
                 timeout_s: float | None = None) -> list[Any]:
        """Every result, or at once the first error or timeout, naming the actor: an actor
        that fails to set up must not leave the others waiting for it."""
        results, faults = self.settle(futures, timeout_s, raise_own=False, fail_fast=True)
        if faults:
            i, fault = min(faults.items())
            detail = f"\n\n{fault.detail}" if fault.detail else "" if fault.in_constructor else (
                f" Each asks for {self.resources}; the cluster has "
                f"{ray.cluster_resources()}. Lower the count or the per-actor resources.")
            raise RuntimeError(f"{self.name} {i} failed to {what}: {fault.reason}{detail}")
        return [results[i] for i in sorted(results)]

    def get_states(self) -> list[Any]:
        """Each actor's get_state(), in slot order (for a checkpoint)."""
        return self.wait_all("save its state",
                             {i: a.get_state.remote() for i, a in enumerate(self.actors)})

    def set_states(self, states: list[Any]) -> None:
        """Each actor's set_state(state), one state per slot (from a checkpoint)."""
        pairs = enumerate(zip(self.actors, states, strict=True))
        self.wait_all("load its state", {i: a.set_state.remote(s) for i, (a, s) in pairs})

    def settle(self, futures: dict[int, ray.ObjectRef], timeout_s: float | None = None,
               raise_own: bool = True, fail_fast: bool = False
               ) -> tuple[dict[int, Any], dict[int, Fault]]:
        """Results, and a Fault for each actor that died, hung past the timeout, or
        reported a group failure. An actor's own error is raised at once (raise_own)
        or reported as a Fault, a user env's (EnvError) always at once; fail_fast
        returns at the first Fault."""
        timeout_s = self.call_timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        slot = {f: i for i, f in futures.items()}
        pending, results, faults = list(futures.values()), {}, {}
        while pending and not (fail_fast and faults):
            done, pending = ray.wait(pending, num_returns=1,
                                     timeout=max(0.0, deadline - time.monotonic()))
            if not done:
                for f in pending:
                    faults[slot[f]] = Fault(f"hung: no answer within {timeout_s:g} s", True)
                break
            i = slot[done[0]]
            try:
                results[i] = ray.get(done[0])
            except Exception as err:
                own = cause(err)
                if isinstance(own, EnvError):  # the user's env: a new actor would fail again
                    raise own from err  # its cause holds the env's traceback (--debug)
                if (raised := constructor_error(err)) is not None:
                    faults[i] = Fault(f"its constructor raised {raised}", True,
                                      in_constructor=True)
                elif died(err):
                    faults[i] = Fault(f"died: {last_line(err)}", True)
                elif died(own):
                    faults[i] = Fault(f"lost an actor it called: {last_line(own)}", True,
                                      peer=True)
                elif raise_own and not self._group_failure(own):
                    raise own from None
                else:
                    faults[i] = Fault(last_line(own), False, str(own).strip())
        return results, faults

    def replace(self, i: int, fault: Fault) -> Any:
        """Slot ``i``'s new actor (see replace_all)."""
        return self.replace_all({i: fault})[i]

    def replace_all(self, faults: dict[int, Fault]) -> dict[int, Any]:
        """Kill each faulty slot's actor and start a new one (fresh seed), then wait for
        them to start: a new process (torch, envs) may take longer to start than one
        call may take, and its first call must not be charged for it. A replacement
        that dies or hangs while starting is replaced again; raises after max_restarts
        replacements of a slot."""
        pending = dict(faults)
        while pending:
            for i, fault in pending.items():
                self._restart(i, fault)
            started, pending = self.settle({i: self.actors[i].ready.remote() for i in pending},
                                           self.start_timeout_s)
            for i in started:
                self._failed_starts.pop(i, None)
            for i, fault in pending.items():
                self._count_failed_start(i, fault)
        return {i: self.actors[i] for i in faults}

    def _count_failed_start(self, i: int, fault: Fault) -> None:
        """Stop the run once slot ``i``'s constructor raised the same error
        SAME_CAUSE_LIMIT times in a row (numbers and ids aside): restarts cannot help."""
        if not fault.in_constructor:
            self._failed_starts.pop(i, None)
            return
        key = re.sub(r"[0-9a-fA-F]{8,}|\d+", "#", fault.reason)
        last, times = self._failed_starts.get(i, ("", 0))
        times = times + 1 if key == last else 1
        self._failed_starts[i] = (key, times)
        if times >= SAME_CAUSE_LIMIT:
            raise RuntimeError(f"{self.name} {i} {fault.reason}, {times} times in a row: a new "
                               "actor would fail alike, so the run stops (whatever "
                               "max_restarts says); fix that cause, then --resume.")

    def _restart(self, i: int, fault: Fault) -> None:
        what = f"{self.name} {i} {fault.reason}"
        restart = self.counter.count(i, what)
        ray.kill(self.actors[i])
        self.actors[i] = self._start(i, restart)
        self.counter.report(i, what, "replaced")

    def _start(self, i: int, restart: int) -> Any:
        """Slot i's actor; a replacement takes the dead one's bundle."""
        where = self.placement.options(i) if self.placement else {}
        return self._remote.options(**where).remote(**self._make_kwargs(i, restart))

    def metrics(self) -> dict[str, float]:
        return self.counter.metrics()

    def close(self) -> None:
        for a in self.actors:
            ray.kill(a)
        if self.placement:
            self.placement.remove()


class SupervisedGroup:
    """A driver-side group of actors that one Supervisor (``sup``) keeps: its restart
    counts, its actors' checkpoint states and its shutdown are the supervisor's, and
    closing it ends the Ray this run started."""

    sup: Supervisor

    def metrics(self) -> dict[str, float]:
        return self.sup.metrics()

    def get_states(self) -> list[Any]:
        return self.sup.get_states()

    def set_states(self, states: list[Any]) -> None:
        self.sup.set_states(states)

    def close(self) -> None:
        try:
            self.sup.close()
        finally:
            release_ray()


def kill_and_wait(actors: Iterable[Any], timeout_s: float = 30.0) -> list[Any]:
    """ray.kill each actor, then wait until each death is known; returns those still
    answering after ``timeout_s`` (none, normally). The kill is asynchronous: a killed
    actor can serve a call sent right after it, and keeps its resources until it dies."""
    actors = list(actors)
    for actor in actors:
        ray.kill(actor)
    deadline = time.monotonic() + timeout_s
    alive = []
    for actor in actors:
        while True:
            try:  # __ray_ready__ does nothing: polling it runs no step twice
                ray.get(actor.__ray_ready__.remote(), timeout=10)
            except ray.exceptions.RayActorError:
                break
            except ray.exceptions.GetTimeoutError:
                pass
            if time.monotonic() >= deadline:
                alive.append(actor)
                break
            time.sleep(0.05)
    return alive


def died(err: Any) -> bool:
    """The actor called is dead. A task error that wraps a death (Ray makes it an
    instance of both) is not: that actor is alive, one it called died."""
    return (isinstance(err, ray.exceptions.RayActorError)
            and not isinstance(err, ray.exceptions.RayTaskError))


def constructor_error(err: Any) -> str | None:
    """The last line ("module.Type: message") of what a dead actor's constructor
    raised, or None when it died otherwise; Ray keeps only the text."""
    if died(err) and getattr(err, "actor_init_failed", False):
        return last_line(err)
    return None


def cause(err: Any) -> Any:
    """The actor's own exception inside Ray's wrapper."""
    return getattr(err, "cause", None) or err


def last_line(err: Any) -> str:
    lines = str(err).strip().splitlines()
    return lines[-1] if lines else type(err).__name__
