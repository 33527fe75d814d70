"""What the time-to-threshold benches share: each trial is a fresh subprocess of the
bench script (``--one SYSTEM --seed S``), interleaved by seed so that machine noise hits
every system alike."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path


def run_trials(script: str, systems: tuple[str, ...], seeds: list[int],
               extra: list[str]) -> list[dict]:
    """Every (seed, system) trial's JSON (its last stdout line), printed without curves
    as it completes."""
    trials = []
    for seed in seeds:
        for system in systems:
            out = subprocess.run([sys.executable, script, "--one", system, "--seed", str(seed),
                                  *extra], capture_output=True, text=True, check=True)
            trial = json.loads(out.stdout.strip().splitlines()[-1])
            trials.append(trial)
            print(json.dumps({k: v for k, v in trial.items() if k != "curve"}), flush=True)
    return trials


def cli(script: str, systems: tuple[str, ...], curves: str, one: Callable[..., dict],
        summary: Callable[[list[dict]], dict], **options: float | int) -> None:
    """A time-to-threshold bench's command line. ``--one SYSTEM --seed S`` prints one
    trial's JSON (``one(system, seed, **options)``); otherwise every (seed, system) trial
    runs in a subprocess, their curves go to bench/out/``curves`` and ``summary(trials)``
    is the last line. ``options``: name -> default, flags of their own (``--cap-s``)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    for name, default in options.items():
        ap.add_argument(_flag(name), type=type(default), default=default)
    ap.add_argument("--one", choices=systems)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    chosen = {name: getattr(args, name) for name in options}
    if args.one:
        print(json.dumps(one(args.one, args.seed, **chosen)))
        return
    out = Path(script).parent / "out"
    out.mkdir(exist_ok=True)
    flags = [x for name, value in chosen.items() for x in (_flag(name), str(value))]
    trials = run_trials(script, systems, args.seeds, flags)
    (out / curves).write_text(json.dumps(trials))
    print(json.dumps(summary(trials)))


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def column(trials: list[dict], system: str, key: str) -> list:
    """``key`` of each of ``system``'s trials, in seed order."""
    return [t[key] for t in trials if t["system"] == system]


def per_seed(trials: list[dict], systems: tuple[str, ...]) -> dict:
    """Each system's seeds, times, env steps and whether it reached the threshold."""
    return {s: {k: column(trials, s, k) for k in ("seed", "train_s", "env_steps", "reached")}
            for s in systems}


def sb3_stop_at(target: float, full_window: bool = False):
    """An SB3 callback that records (seconds since training began, env steps, mean episode
    return of the last 100) after each rollout and stops once that mean reaches ``target`` (with
    ``full_window``, only once 100 episodes are in it)."""
    import time

    import numpy as np
    from stable_baselines3.common.callbacks import BaseCallback

    class StopAt(BaseCallback):
        curve: list

        def _on_training_start(self) -> None:
            self.t0, self.curve, self.hit = time.perf_counter(), [], False

        def _on_rollout_end(self) -> None:
            buf = self.model.ep_info_buffer
            mean = float(np.mean([e["r"] for e in buf])) if buf else float("nan")
            self.curve.append((time.perf_counter() - self.t0, self.num_timesteps, mean))
            full = len(buf) == buf.maxlen or not full_window
            self.hit = self.hit or (full and mean >= target)

        def _on_step(self) -> bool:
            return not self.hit

    return StopAt()
