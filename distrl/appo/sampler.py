"""APPO's sampling role in process: one EnvRunner (ppo/env_runner.py) stepping in a
thread beside the learner, so that sampling and learning overlap without Ray. Torch
releases the GIL in its kernels; env stepping and the learner's Python take turns.
appo/remote.py is the twin on Ray actors.
"""

from __future__ import annotations

import queue
import threading
from typing import Protocol

from distrl.core.types import Fragment
from distrl.ppo.env_runner import EnvRunner, InProcessGroup, Weights


class Sampler(Protocol):
    """What train_appo asks of its sampler, in process (ThreadSampler) or on Ray
    (appo.remote.RaySampler)."""

    def publish(self, weights: Weights, version: int) -> None:
        """Act with these weights from the next fragment on."""

    def take(self, n: int) -> list[Fragment]:
        """The next ``n`` fragments, waiting for them."""

    def pause(self) -> list[Fragment]:
        """Stop sampling; the fragments sampled and not yet taken."""

    def resume(self, pending: list[Fragment]) -> None:
        """Hand out ``pending`` first, then sample on."""

    def metrics(self) -> dict[str, float]: ...

    def get_states(self) -> list: ...

    def set_states(self, states: list) -> None: ...

    def close(self) -> None: ...


class ThreadSampler(InProcessGroup):
    """One EnvRunner sampling fragments continuously, in a thread, with the newest
    weights published."""

    def __init__(self, runner: EnvRunner, steps_per_env: int, max_queued: int):
        self.runner = runner
        self.steps_per_env = steps_per_env
        self.max_queued = max_queued
        self.ready: queue.Queue[Fragment] = queue.Queue()
        self._lock = threading.Lock()
        self._weights: tuple[Weights, int] | None = None
        self._error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def publish(self, weights: Weights, version: int) -> None:
        """Act with these weights from the next fragment on; copied, since the learner
        goes on updating its own arrays in place."""
        with self._lock:
            self._weights = ({k: v.copy() for k, v in weights.items()}, version)
        if self._thread is None:
            self._start()

    def take(self, n: int) -> list[Fragment]:
        """The next ``n`` fragments, in the order sampled; raises the runner's error."""
        out = []
        while len(out) < n:
            try:
                out.append(self.ready.get(timeout=0.1))
            except queue.Empty:
                self._check()
        return out

    def pause(self) -> list[Fragment]:
        """Stop after the fragment in progress; returns the fragments not yet taken (a
        checkpoint keeps them: they are env steps already taken)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._check()
        pending = []
        while not self.ready.empty():
            pending.append(self.ready.get_nowait())
        return pending

    def resume(self, pending: list[Fragment]) -> None:
        """Take ``pending`` first, then sample on."""
        for frag in pending:
            self.ready.put(frag)
        if self._weights is not None:
            self._start()

    def _start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True, name="appo-sampler")
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                if self.ready.qsize() >= self.max_queued:  # the learner is behind: wait
                    self._stop.wait(0.005)
                    continue
                with self._lock:
                    weights, version = self._weights
                self.ready.put(self.runner.fragment(self.steps_per_env, weights, version))
        except BaseException as err:  # raised in the driver by take()
            self._error = err

    def _check(self) -> None:
        if self._error is not None:
            err, self._error = self._error, None
            raise err

    def close(self) -> None:
        self.pause()
        self.runner.close()
