"""What a person reads of a run: the live table's rows (the last evaluation's win rates
and NashConv kept until the next one), the progress against the run's budget with an
ETA, the final line's headline, and the configs in force as JSON."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

from distrl.core.config import RunConfig, to_json
from distrl.envs.make import env_name

TRAINING = ("env/episode_return_mean", "env/steps_per_s", "learner/policy_loss",
            "learner/vf_loss", "learner/kl", "time/total_s")
"""Rows of every iteration after the counters and the progress, when present."""
BAR = 20


@dataclasses.dataclass(frozen=True)
class Budget:
    """What stops a run whatever it learns: its env steps and, when set, its seconds."""

    max_env_steps: int
    """The env steps of the run (resumes included)."""
    max_time_s: float | None = None
    """Its seconds of training (time/total_s), or None: no limit."""
    stop_return: float | None = None
    """A mean return that ends the run sooner (the ETA cannot foresee it), or None."""


def is_kept(key: str) -> bool:
    """An evaluation's metric: logged every few iterations, shown until the next one.
    Win rates against the random player or an outside opponent (a league's against its
    own members change names with every snapshot), NashConv, evaluation returns."""
    return (key.startswith("eval/win_rate_vs_") or key == "eval/episode_return_mean"
            or (key.startswith("league/win_rate/") and key.endswith("_vs_random"))
            or key.startswith(("league/nash_conv/", "league/nash_conv_avg/")))


def is_game_metric(key: str) -> bool:
    """A win rate or NashConv: where a run logs them, its training return (a self-play
    game's, near 0) is not what it achieved."""
    return is_kept(key) and key != "eval/episode_return_mean"


class Shown:
    """The rows of the live table and the plain line, from each iteration's metrics and
    the evaluations before it."""

    def __init__(self, budget: Budget | None = None):
        self.budget = budget
        self.kept: dict[str, tuple[float, int]] = {}  # key -> (value, its iteration)

    def rows(self, metrics: dict[str, Any], bar: bool = True) -> list[tuple[str, str]]:
        iteration = int(metrics.get("iteration", 0))
        self.kept.update({k: (v, iteration) for k, v in metrics.items() if is_kept(k)})
        out = [(k, fmt(metrics[k])) for k in ("iteration", "env/steps_total") if k in metrics]
        if self.budget is not None and (line := progress_text(metrics, self.budget, bar)):
            out.append(("progress", line))
        for key, (value, at) in sorted(self.kept.items()):
            out.append((key, fmt(value) + ("" if at == iteration else f" (iteration {at})")))
        games = any(is_game_metric(k) for k in self.kept)
        out += [(k, fmt(metrics[k])) for k in TRAINING
                if k in metrics and not (games and k == "env/episode_return_mean")]
        return out


def progress_text(metrics: dict[str, Any], budget: Budget, bar: bool = True) -> str | None:
    """``[bar] 25% 25,000 / 100,000 env steps, ETA 0:00:30 to max_env_steps``: the share
    of the budget spent, by env steps or, when max_time_s will stop the run first, by
    seconds; the ETA to that limit at the run's mean rate so far (a stop_return may end
    the run sooner: said too). None before the counters are logged."""
    steps, seconds = metrics.get("env/steps_total"), metrics.get("time/total_s")
    if steps is None or seconds is None:
        return None
    by_steps = steps / budget.max_env_steps
    by_time = seconds / budget.max_time_s if budget.max_time_s else 0.0
    if by_time > by_steps:  # the clock runs out first at the present rate
        done, eta, limit = by_time, budget.max_time_s - seconds, "max_time_s"
        what = f"{duration(seconds)} / {duration(budget.max_time_s)}"
    else:
        done, limit = by_steps, "max_env_steps"
        eta = (budget.max_env_steps - steps) * seconds / steps if steps else math.nan
        what = f"{steps:,} / {budget.max_env_steps:,} env steps"
    done = min(done, 1.0)
    full = round(done * BAR)
    shown = f"{'█' * full}{'░' * (BAR - full)} " if bar else ""
    sooner = "" if budget.stop_return is None else f" (sooner at return {budget.stop_return:g})"
    return f"{shown}{done:.0%} {what}, ETA {duration(max(eta, 0.0))} to {limit}{sooner}"


def duration(seconds: float) -> str:
    """H:MM:SS; ? when unknown."""
    if not math.isfinite(seconds):
        return "?"
    s = round(seconds)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}"


def headline(result: dict[str, Any], game: bool) -> str:
    """What a run achieved, for its final line: a game run's win rates (and NashConv)
    from its last evaluation, anything else's last evaluation return (when evaluation
    is on) and mean training return."""
    rates = [f"{_label(k)} {v:.3f}" for k, v in sorted(result.items())
             if is_game_metric(k) and "win_rate" in k]
    nash = [f"{_label(k)} {v:.4f}" for k, v in sorted(result.items())
            if is_game_metric(k) and "nash_conv" in k]
    parts = ([f"win rate {', '.join(rates)}"] if rates else []) + (
        [f"NashConv {', '.join(nash)}"] if nash else [])
    if parts:
        return "; ".join(parts)
    if game:
        return "no evaluation (it was interrupted, or evaluation is off)"
    training = f"mean return {result.get('env/episode_return_mean', math.nan):.1f}"
    if "eval/episode_return_mean" not in result:
        return training
    return (f"eval return {result['eval/episode_return_mean']:.1f} over "
            f"{result['eval/episodes']} episodes (training's {training})")


def _label(key: str) -> str:
    """eval/win_rate_vs_random -> vs random; league/win_rate/main_0_vs_random -> main_0
    vs random; league/nash_conv_avg/main_0 -> main_0 (average)."""
    if key.startswith("eval/win_rate_vs_"):
        return "vs " + key.removeprefix("eval/win_rate_vs_")
    name = key.rsplit("/", 1)[1].replace("_vs_", " vs ")
    return f"{name} (average)" if "nash_conv_avg" in key else name


def fmt(value: Any) -> str:
    if isinstance(value, int) or (isinstance(value, float) and abs(value) >= 1000):
        return f"{value:,.0f}"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def configs_json(algo: str, config: Any, run: RunConfig) -> dict[str, Any]:
    """The configs in force, as the checkpoint's run/config.json holds them (a factory
    env by its name), with the algorithm."""
    run_json = to_json(dataclasses.replace(run, env=None) if not isinstance(run.env, str)
                       else run)
    return {"algo": algo, "run": {**run_json, "env_name": env_name(run.env)},
            "config": to_json(config)}


def write_configs(logdir: Path, algo: str, config: Any, run: RunConfig) -> Path:
    """``logdir/config.json``: the configs a run starts with, readable before its first
    checkpoint (a resumed run's, merged with the new flags, replace them)."""
    path = Path(logdir) / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(configs_json(algo, config, run), indent=1) + "\n")
    return path
