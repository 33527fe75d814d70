"""The run wiring every train_* shares: resume (configs read from the checkpoint),
seeding, logdir, progress counters, the outer loop (log, checkpoint, stop, Ctrl-C
between iterations) and the checkpoint's common components."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import sys
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
import torch

from distrl.core.callbacks import Callbacks
from distrl.core.checkpoint import Checkpoint, save_checkpoint, space_to_json
from distrl.core.config import RunConfig, to_json
from distrl.core.display import Budget, write_configs
from distrl.core.evaluation import evaluation_metrics, missed_last
from distrl.core.interrupts import Deadline, interrupt_between_iterations
from distrl.core.learner import NonFiniteError
from distrl.core.metrics import MetricsLogger
from distrl.core.resume import resumed_configs
from distrl.core.stopping import max_env_steps, refuse_finished, stop_reason
from distrl.core.wandb_logger import check_wandb, open_wandb
from distrl.envs.envpool_vec import is_envpool
from distrl.envs.make import check_env_id, env_name, episode_limit

WINDOW = 100  # episodes in env/episode_return_mean


@dataclasses.dataclass
class Progress:
    """Counters that a checkpoint carries across a resume."""

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

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "returns": list(self.returns),
                "lengths": list(self.lengths)}

    @staticmethod
    def from_json(d: dict[str, Any]) -> Progress:
        return Progress(d["iteration"], d["env_steps"], d["episodes"], d["time_s"],
                        deque(d["returns"], maxlen=WINDOW), deque(d["lengths"], maxlen=WINDOW))


@dataclasses.dataclass
class Start:
    """What start_run hands a driver: the configs in force, where to log, and the
    checkpoint it resumes from (None for a fresh run)."""

    algo: str
    config: Any
    run: RunConfig
    logdir: Path
    ckpt: Checkpoint | None

    def progress(self) -> Progress:
        if self.ckpt is None:
            return Progress()
        return Progress.from_json(self.ckpt.progress())

    def algo_state(self) -> dict[str, Any]:
        """The algorithm's own saved state (PPO: the KL coefficient); {} when fresh."""
        if self.ckpt is None:
            return {}
        return self.ckpt.algo_state()


def start_run(algo: str, config: Any, run: RunConfig,
              check_env: Callable[[Any], None] = check_env_id) -> Start:
    """Read the checkpoint to resume from (its configs win over defaults), check the env
    (``check_env``: gymnasium ids by default), seed torch, set threads and pick the
    logdir."""
    ckpt = None
    if run.resume:
        ckpt = Checkpoint(run.resume)
        if ckpt.algo != algo:
            raise ValueError(
                f"{str(ckpt.path)!r} is a checkpoint of a {ckpt.algo!r} run, not {algo!r}: "
                f"resume it with `distrl train {ckpt.algo} --resume {run.resume}`."
            )
        config, run = resumed_configs(ckpt, config, run)
        saved = Progress.from_json(ckpt.progress())
        refuse_finished(run, saved, saved.iteration, _logdir(algo, run))
    check_env(run.env)
    if check_env is check_env_id:  # a gymnasium env; games end by their own rules
        run = dataclasses.replace(run, max_episode_steps=episode_limit(
            run.env, run.env_config, run.max_episode_steps))
    elif run.max_episode_steps is not None:
        raise ValueError("`max_episode_steps` applies to gymnasium envs; a game's episodes "
                         "end by its rules. Drop --max-episode-steps.")
    elif run.vector_mode != "auto":
        raise ValueError("`vector_mode` applies to single-agent gymnasium envs; a game's "
                         "matches are stepped by its runners. Drop --vector-mode.")
    check_halves(config, run)
    check_wandb(run.wandb_project)
    logdir = _logdir(algo, run)
    if ckpt is None:
        refuse_occupied(logdir)
    torch.set_num_threads(run.num_torch_threads)
    torch.manual_seed(run.seed)
    return Start(algo, config, run, logdir, ckpt)


RUN_FILES = ("config.json", "metrics.jsonl", "checkpoint")
"""What a run writes into its logdir: one of them there means a run is."""


def refuse_occupied(logdir: Path) -> None:
    """A new run never writes into another's logdir: its metrics.jsonl would repeat the
    iterations, TensorBoard would draw both runs as one zig-zag, its checkpoint would go."""
    if any((logdir / name).exists() for name in RUN_FILES):
        raise ValueError(f"{str(logdir)!r} already holds a run: continue it with --resume "
                         f"{logdir} (resume=), or give a new --logdir (logdir=).")


def check_halves(config: Any, run: RunConfig) -> None:
    """``vector_mode="async"`` on an EnvPool env steps two halves of each runner's envs
    in turns (sampling.DoubleBuffered): refuse an odd count before any runner starts."""
    if run.vector_mode != "async" or not is_envpool(run.env):
        return
    for name in ("num_envs_per_env_runner", "num_envs_per_worker"):
        count = getattr(config, name, 2)
        if count % 2:
            raise ValueError(f"`vector_mode='async'` on {run.env!r} steps two halves of each "
                             f"runner's envs in turns: {name} ({count}) must be even.")


def learner_device(name: str) -> torch.device:
    """RunConfig.device as a torch device ("auto": CUDA when torch sees one)."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' but torch sees no CUDA device; use device='cpu' or 'auto'.")
    return torch.device(name)


def _logdir(algo: str, run: RunConfig) -> Path:
    """run.logdir (a resumed run's is its --resume directory), else a new runs/ name."""
    if run.logdir is not None:
        return Path(run.logdir)
    name = env_name(run.env).replace("/", "_").replace(":", "_")
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    base = Path("runs") / f"{algo}_{name}_{stamp}"
    # Two runs started within a second get names of their own.
    taken = (base.with_name(f"{base.name}_{i}") for i in itertools.count(1))
    return base if not base.exists() else next(p for p in taken if not p.exists())


class Driven(Protocol):
    """One algorithm's run as drive() runs it: a class of its own (LeagueRun,
    AlphaZeroRun) or Closures over a driver's local state (PPO, DD-PPO, Ape-X)."""

    progress: Progress
    ray_start_s: float  # how long Ray took to start (0 without Ray)

    def iterate(self) -> dict[str, Any]:
        """One iteration; its metrics (progress.add counted it)."""

    def save(self) -> Path:
        """Checkpoint the completed iterations; the checkpoint's path."""

    def close(self) -> None:
        """Stop the workers."""

    def policy(self) -> Any:
        """The current network, for evaluation episodes."""

    def should_stop(self, metrics: dict[str, Any]) -> str | None:
        """A reason of the algorithm's own to stop now (None: go on)."""

    def final_evaluation(self) -> dict[str, Any]:
        """The algorithm's own evaluation (a league's matches, AlphaZero's games) when
        its last iteration had none, so that a run shorter than its evaluation interval
        ends with a verdict too; {} when it had one or the run evaluates nothing."""


@dataclasses.dataclass
class Closures:
    """A Driven made of a driver's functions."""

    progress: Progress
    iterate: Callable[[], dict[str, Any]]
    save: Callable[[], Path]
    close: Callable[[], None]
    policy: Callable[[], Any]
    ray_start_s: float = 0.0
    should_stop: Callable[[dict[str, Any]], str | None] = lambda metrics: None
    final_evaluation: Callable[[], dict[str, Any]] = lambda: {}


def drive(start: Start, run: Driven, callbacks: Callbacks | None = None) -> dict[str, Any]:
    """Iterate until a stop condition holds (the run's, or a reason from the algorithm's
    ``should_stop(metrics)``), checkpoint, close the workers and the logger;
    returns the last metrics with the checkpoint path and why the run stopped.

    Every run.evaluation_interval iterations, ``policy()`` (the current network) plays
    run.evaluation_duration episodes on envs of its own in this process (eval/ metrics).
    A run whose last iteration was not evaluated is evaluated once more at its end (the
    algorithm's own evaluation too, ``final_evaluation()``), logged as the last row, so
    every run ends with a verdict; not after Ctrl-C, which asks to stop now.

    Ctrl-C ends the loop after the iteration in progress, then checkpoints, so the
    checkpoint always holds a completed iteration; a second Ctrl-C aborts at once. A run
    that fails with an error first saves its last completed iteration, if not saved yet,
    so that --resume is always possible.

    ``callbacks`` hear of every iteration and checkpoint, and may stop the run.
    """
    logger = None
    hooks = callbacks or Callbacks()
    progress = run.progress
    saved_at = [progress.iteration]  # a resumed run's checkpoint holds this iteration

    def save_once() -> Path:
        path = run.save()
        saved_at[0] = progress.iteration
        return path

    try:
        logger = MetricsLogger(start.logdir, start.run.progress,
                               resumed_at=saved_at[0] if start.ckpt is not None else None,
                               budget=Budget(max_env_steps(start.run), start.run.max_time_s,
                                             start.run.stop_return),
                               wandb=open_wandb(start.algo, start.config, start.run,
                                                start.logdir))
        write_configs(start.logdir, start.algo, start.config, start.run)
        metrics, stopped_by = _loop(start.run, progress, logger,
                                    _named(start, progress, run.iterate), save_once,
                                    run.policy, run.should_stop, hooks)
        metrics = _end_evaluated(start.run, progress, logger, metrics, stopped_by, run)
        checkpoint = hooks.checkpoint(save_once())
    except Exception:
        if progress.iteration > saved_at[0]:
            _save_after_error(save_once, progress, start.logdir)
        raise
    finally:
        run.close()
        if logger is not None:
            logger.close()
    return {**metrics, "checkpoint": str(checkpoint), "logdir": str(start.logdir),
            "stopped_by": stopped_by, "ray_start_s": run.ray_start_s}


def _save_after_error(save: Callable[[], Path], progress: Progress, logdir: Path) -> None:
    """Checkpoint a failed run's last completed iteration, saying where (on stderr, so
    the error stays the last line)."""
    try:
        path = save()
    except Exception as err:  # the workers may be gone with the error
        print(f"distrl: saving iteration {progress.iteration} after the error failed too "
              f"({type(err).__name__}: {err})", file=sys.stderr, flush=True)
        return
    print(f"distrl: saved iteration {progress.iteration} to {path} before stopping; "
          f"continue with --resume {logdir}", file=sys.stderr, flush=True)


def _named(start: Start, progress: Progress, iterate: Callable[[], dict[str, Any]]
           ) -> Callable[[], dict[str, Any]]:
    """``iterate`` whose NonFiniteError names the algorithm and the iteration."""
    def named() -> dict[str, Any]:
        try:
            return iterate()
        except NonFiniteError as err:
            raise NonFiniteError(f"{start.algo}, iteration {progress.iteration + 1}: "
                                 f"{err}") from None
    return named


def _loop(run: RunConfig, progress: Progress, logger: MetricsLogger,
          iterate: Callable[[], dict[str, Any]], save: Callable[[], Path],
          policy: Callable[[], Any], should_stop: Callable[[dict[str, Any]], str | None],
          hooks: Callbacks) -> tuple[dict[str, Any], str]:
    stopped_by = "max_env_steps"
    metrics: dict[str, Any] = {}
    tick = time.perf_counter()
    deadline = None if run.max_time_s is None else Deadline(run.max_time_s, progress.time_s)
    with interrupt_between_iterations(logger.info, deadline) as interrupted:
        while True:
            metrics = iterate()
            every = run.evaluation_interval
            evaluated = bool(every) and progress.iteration % every == 0
            if evaluated:
                metrics.update(evaluation_metrics(policy(), run))
            # Wall time of the loop, logging and checkpoints included (not Ray's start-up).
            now = time.perf_counter()
            if deadline is not None:
                deadline.passed(progress.time_s + now - tick, now - tick)
            progress.time_s, tick = progress.time_s + now - tick, now
            metrics["time/total_s"] = progress.time_s
            logger.log(metrics)
            if run.checkpoint_every and progress.iteration % run.checkpoint_every == 0:
                hooks.checkpoint(save())
            asked = hooks.iteration(metrics)
            if interrupted.is_set():
                stopped_by = "interrupted"
                break
            if asked:
                stopped_by = "callback"
                break
            reason = stop_reason(run, progress, metrics if evaluated else None,
                                 functools.partial(should_stop, metrics))
            if reason is not None:
                stopped_by = reason
                break
    return metrics, stopped_by


def _end_evaluated(run: RunConfig, progress: Progress, logger: MetricsLogger,
                   metrics: dict[str, Any], stopped_by: str, driven: Driven
                   ) -> dict[str, Any]:
    """The last metrics with the run's final evaluation, logged as a row of its own at
    the last iteration: episodes of ``policy()`` when evaluation is on and the last
    iteration had none, and the algorithm's ``final_evaluation()``."""
    if stopped_by == "interrupted":
        return metrics
    final = (evaluation_metrics(driven.policy(), run)
             if missed_last(run.evaluation_interval, progress.iteration) else {})
    final.update(driven.final_evaluation())
    if not final:
        return metrics
    logger.log({"iteration": progress.iteration, "env/steps_total": progress.env_steps,
                "time/total_s": progress.time_s, **final, "final_evaluation": True}, last=True)
    return {**metrics, **final}


def save_run(start: Start, progress: Progress, policy: dict[str, Any],
             learner: dict[str, Any], runner_states: list[Any],
             algo_state: dict[str, Any] | None = None,
             more: dict[str, dict[str, Any]] | None = None) -> Path:
    """The checkpoint components every algorithm writes; ``policy`` from policy_files();
    ``more``: an algorithm's own components (Ape-X's replay)."""
    run = start.run
    factory = None if isinstance(run.env, str) else run.env
    # A factory is no JSON: the run's JSON says env=None, the trusted pickle holds it.
    run_json = {**to_json(dataclasses.replace(run, env=None if factory else run.env)),
                "env_name": env_name(run.env)}
    return save_checkpoint(
        start.logdir / "checkpoint", start.algo,
        {"iteration": progress.iteration, "env_steps": progress.env_steps,
         # A game run's learner state holds its policies by id (Checkpoint.policy_ids).
         "policy_ids": sorted(learner.get("weights", {}))},
        {
            "run": {"config.json": {"run": run_json, "config": to_json(start.config)}},
            "policy": policy,
            "learner": {"state.pt": learner},
            "progress": {"progress.json": {"progress": progress.to_json(),
                                           "algo": algo_state or {}}},
            "runners": {"state.pkl": {"runner_states": runner_states, "env_factory": factory}},
            **(more or {}),
        },
    )


def policy_files(state_dict: dict[str, torch.Tensor], obs_space: gym.Space,
                 act_space: gym.Space, model: Any, builder: str | None = None
                 ) -> dict[str, Any]:
    """The weights-only policy component: tensors plus a JSON description; the builder
    is PPO's network (recurrent with use_lstm) unless named."""
    builder = builder or ("recurrent_actor_critic" if getattr(model, "use_lstm", False)
                          else "actor_critic")
    return {
        "weights.pt": {k: v.detach().cpu() for k, v in state_dict.items()},
        "policy.json": {"builder": builder, "obs_space": space_to_json(obs_space),
                        "act_space": space_to_json(act_space), "model": to_json(model)},
    }

