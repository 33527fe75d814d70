"""What every train_* loop shares: progress counters, the outer loop (log, checkpoint,
stop, Ctrl-C), logdirs and checkpoint payloads."""

from __future__ import annotations

import dataclasses
import os
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import cloudpickle
import numpy as np

from distrl.checkpoint import save_checkpoint
from distrl.config import RunConfig
from distrl.metrics import MetricsLogger

WINDOW = 100  # episodes in env/episode_return_mean
MAX_ENV_STEPS_VAR = "DISTRL_MAX_ENV_STEPS"
"""Environment variable that caps every run's max_env_steps: smoke-runs a user's
training script (or the documented examples, in CI) with a tiny budget, unchanged."""


@dataclasses.dataclass
class Progress:
    """Counters that a checkpoint carries across a resume."""

    kl_coeff: float
    iteration: int = 0
    env_steps: int = 0
    episodes: int = 0
    time_s: float = 0.0
    returns: deque = dataclasses.field(default_factory=lambda: deque(maxlen=WINDOW))
    lengths: deque = dataclasses.field(default_factory=lambda: deque(maxlen=WINDOW))

    def return_mean(self) -> float:
        return float(np.mean(self.returns)) if self.returns else float("nan")

    def add(self, env_steps: int, returns: np.ndarray, lengths: np.ndarray) -> dict[str, float]:
        """Count one iteration's env steps and finished episodes; returns the env/ metrics."""
        self.iteration += 1
        self.env_steps += env_steps
        self.episodes += len(returns)
        self.returns.extend(returns.tolist())
        self.lengths.extend(lengths.tolist())
        return {
            "iteration": self.iteration,
            "env/steps_total": self.env_steps,
            "env/episodes_total": self.episodes,
            "env/episode_return_mean": self.return_mean(),
            "env/episode_len_mean": float(np.mean(self.lengths)) if self.lengths else float("nan"),
        }


def drive(run: RunConfig, logdir: Path, progress: Progress, logger: MetricsLogger,
          iterate: Callable[[], dict[str, Any]], save: Callable[[], Path],
          close: Callable[[], None], ray_start_s: float) -> dict[str, Any]:
    """Iterate until a stop condition holds, checkpoint, close the workers and the logger;
    returns the last metrics with the checkpoint path and why the run stopped.

    Ctrl-C ends the loop after a checkpoint, so what was learned is kept.
    """
    try:
        metrics, stopped_by = _loop(run, progress, logger, iterate, save)
        checkpoint = save()
    finally:
        close()
        logger.close()
    return {**metrics, "checkpoint": str(checkpoint), "logdir": str(logdir),
            "stopped_by": stopped_by, "ray_start_s": ray_start_s}


def _loop(run: RunConfig, progress: Progress, logger: MetricsLogger,
          iterate: Callable[[], dict[str, Any]],
          save: Callable[[], Path]) -> tuple[dict[str, Any], str]:
    stopped_by = "max_env_steps"
    metrics: dict[str, Any] = {}
    tick = time.perf_counter()
    while True:
        try:
            metrics = iterate()
        except KeyboardInterrupt:
            stopped_by = "interrupted"
            break
        # Wall time of the loop, logging and checkpoints included (not Ray's start-up).
        now = time.perf_counter()
        progress.time_s, tick = progress.time_s + now - tick, now
        metrics["time/total_s"] = progress.time_s
        logger.log(metrics)
        if run.checkpoint_every and progress.iteration % run.checkpoint_every == 0:
            save()
        if run.stop_return is not None and progress.return_mean() >= run.stop_return:
            stopped_by = "stop_return"
            break
        if progress.env_steps >= max_env_steps(run):
            break
    return metrics, stopped_by


def max_env_steps(run: RunConfig) -> int:
    """run.max_env_steps, capped by $DISTRL_MAX_ENV_STEPS when set."""
    cap = os.environ.get(MAX_ENV_STEPS_VAR)
    return min(run.max_env_steps, int(cap)) if cap else run.max_env_steps


def make_logdir(algo: str, run: RunConfig, ckpt: dict[str, Any] | None) -> Path:
    if run.logdir is not None:
        return Path(run.logdir)
    if ckpt is not None:
        return Path(ckpt["logdir"])
    name = run.env if isinstance(run.env, str) else "custom"
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{algo}_{name.replace('/', '_')}_{stamp}"


def save_run(logdir: Path, algo: str, config: Any, run: RunConfig,
             **state: Any) -> Path:
    """Checkpoint ``state`` with what evaluate() and a resume need to rebuild the run."""
    env_factory = None if isinstance(run.env, str) else cloudpickle.dumps(run.env)
    payload = {
        "algo": algo,
        "config": config,
        "run_config": dataclasses.replace(run, env="<factory>") if env_factory else run,
        "env_factory": env_factory,
        "logdir": str(logdir),
        **state,
    }
    return save_checkpoint(logdir / "checkpoint", payload)
