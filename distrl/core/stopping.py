"""When a run stops: stop_return, its step and time budgets. The loop asks after every
iteration; a resumed run asks first, with its checkpoint's counters, so that a finished
run is refused in one line instead of training one iteration more (and before any
worker, or Ray, starts)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from distrl.core.config import RunConfig

MAX_ENV_STEPS_VAR = "DISTRL_MAX_ENV_STEPS"
"""Environment variable that caps every run's max_env_steps: smoke-runs a user's
training script (or the documented examples, in CI) with a tiny budget, unchanged."""


class Counters(Protocol):
    """What the stop conditions read of a run's progress (loop.Progress)."""

    env_steps: int
    time_s: float

    def return_mean(self) -> float: ...


class RunFinished(ValueError):
    """A resumed run whose stop condition already holds: nothing to train."""


def max_env_steps(run: RunConfig) -> int:
    """run.max_env_steps, capped by $DISTRL_MAX_ENV_STEPS when set."""
    cap = os.environ.get(MAX_ENV_STEPS_VAR)
    return min(run.max_env_steps, int(cap)) if cap else run.max_env_steps


def reached(run: RunConfig, progress: Counters, evaluation: dict[str, Any] | None) -> bool:
    """stop_return met by the training window, or (stop_on="eval") by this evaluation."""
    if run.stop_return is None:
        return False
    if run.stop_on == "eval":
        return evaluation is not None and evaluation["eval/episode_return_mean"] >= run.stop_return
    return progress.return_mean() >= run.stop_return


def stop_reason(run: RunConfig, progress: Counters, evaluation: dict[str, Any] | None,
                should_stop: Callable[[], str | None] = lambda: None,
                capped: bool = True) -> str | None:
    """Why a run with these counters stops now (None: it goes on), in this order:
    stop_return, the algorithm's own reason (``should_stop``), max_env_steps (``capped``
    by $DISTRL_MAX_ENV_STEPS), max_time_s."""
    if reached(run, progress, evaluation):
        return "stop_return"
    if (reason := should_stop()) is not None:
        return reason
    if progress.env_steps >= (max_env_steps(run) if capped else run.max_env_steps):
        return "max_env_steps"
    if run.max_time_s is not None and progress.time_s >= run.max_time_s:
        return "max_time_s"
    return None


def refuse_finished(run: RunConfig, progress: Counters, iteration: int, logdir: Path) -> None:
    """RunFinished when a resumed run (its configs merged, its checkpoint's counters)
    would stop before training: one line saying what to raise to continue. Only the
    run's own budget counts: a run cut short by $DISTRL_MAX_ENV_STEPS (a smoke test of a
    script that trains, then resumes) resumes as before."""
    evaluation = _logged_evaluation(logdir / "metrics.jsonl", iteration)
    reason = stop_reason(run, progress, evaluation, capped=False)
    if reason is None:
        return
    if reason == "max_env_steps":
        when = f"at {progress.env_steps:,} env steps (max_env_steps {run.max_env_steps:,})"
        change = "raise --max-env-steps (max_env_steps=)"
    elif reason == "max_time_s":
        when = f"after {progress.time_s:,.0f} s of training (max_time_s {run.max_time_s:g})"
        change = "raise --max-time-s (max_time_s=)"
    else:
        score = (progress.return_mean() if evaluation is None
                 else evaluation["eval/episode_return_mean"])
        when = f"with mean {run.stop_on} return {score:.1f} (stop_return {run.stop_return:g})"
        change = ("raise --stop-return (stop_return=), or turn it off with --resume-reset "
                  "stop_return")
    raise RunFinished(f"run {str(logdir)!r} finished {when}; {change} to continue.")


def _logged_evaluation(path: Path, iteration: int) -> dict[str, Any] | None:
    """The evaluation logged at ``iteration`` in metrics.jsonl, if any (stop_on="eval")."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        try:
            row = json.loads(line)
        except ValueError:
            continue  # a row torn by a kill
        if isinstance(row, dict) and row.get("iteration") == iteration:
            return row if "eval/episode_return_mean" in row else None
    return None
