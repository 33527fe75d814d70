"""Callbacks: your functions, called by every train_* in its driver process between
iterations, to watch a run, stop it early or copy its checkpoints (as Stable-Baselines3's
BaseCallback and RLlib's callbacks do)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Callbacks:
    """``train_ppo(config, run, callbacks=Callbacks(on_iteration=..., on_checkpoint=...))``;
    an error a callback raises stops the run (after the usual save of its last completed
    iteration) and names the callback."""

    on_iteration: Callable[[dict[str, Any]], bool | None] | None = None
    """Called after each iteration (logged, and checkpointed when due) with a copy of its
    metrics; returning True stops the run after this iteration as a stop condition
    does: it is checkpointed and its result says stopped_by "callback"."""
    on_checkpoint: Callable[[Path], None] | None = None
    """Called with the checkpoint's directory after each checkpoint the run writes:
    every checkpoint_every iterations and the final one."""

    def iteration(self, metrics: dict[str, Any]) -> bool:
        """on_iteration's answer: whether the run stops now."""
        if self.on_iteration is None:
            return False
        stop = _call("on_iteration", self.on_iteration, dict(metrics))
        if stop is not None and not isinstance(stop, bool | np.bool_):
            # A truthy value by accident (a lambda returning what it wrote) must not stop runs.
            raise TypeError(f"the on_iteration callback {_name(self.on_iteration)} returned "
                            f"{stop!r}: return True to stop the run, None or False to go on.")
        return bool(stop)

    def checkpoint(self, path: Path) -> Path:
        """Tell on_checkpoint about ``path``; returns it."""
        if self.on_checkpoint is not None:
            _call("on_checkpoint", self.on_checkpoint, path)
        return path


def _call(hook: str, fn: Callable[[Any], Any], arg: Any) -> Any:
    try:
        return fn(arg)
    except Exception as err:
        err.add_note(f"distrl: raised by the {hook} callback {_name(fn)}")
        raise


def _name(fn: Callable[..., Any]) -> str:
    """module.qualname of a function; the repr of another callable (a partial, an object)."""
    if hasattr(fn, "__qualname__"):
        return f"{getattr(fn, '__module__', None) or '?'}.{fn.__qualname__}"
    return repr(fn)
