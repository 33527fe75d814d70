"""PPO on ALE/Breakout-v5 for a fixed wall time: env frames/s and learner samples/s of
distrl (tuned `atari` entry: CleanRL's ppo_atari, 8 envs, in-process and 2 Ray env
runners) next to Stable-Baselines3 PPO (`make_atari_env`, 8 envs, 4 stacked frames, rl-zoo's
Atari settings, which are the same: 128 steps per env, 4 epochs of 256-sample minibatches).
A record, not a race: there is no bar. Every trial is a fresh subprocess, same torch threads.

    python bench/ppo_atari.py [--seconds 300] [--threads 1]

Frames are env frames (4 per env step: ALE's frame skip). Learner samples/s counts every
sample of every epoch over the time spent in updates.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

from _extra import need
from _trials import run_trials

OUT = Path(__file__).parent / "out"
ENV = "ALE/Breakout-v5"
FRAME_SKIP = 4
SYSTEMS = ("sb3", "distrl", "distrl_ray2")


def run_distrl(seconds: float, runners: int) -> dict:
    from distrl import RunConfig, train_ppo
    from distrl.core.metrics import read_jsonl
    from distrl.tuned import tuned

    logdir = OUT / f"runs/ppo_atari_{runners}"
    shutil.rmtree(logdir, ignore_errors=True)
    t = tuned("atari")
    config = t.for_runners(runners)
    r = train_ppo(config, RunConfig(env=ENV, max_time_s=seconds, max_env_steps=10**9,
                                    logdir=str(logdir), progress=False))
    rows = read_jsonl(logdir / "metrics.jsonl")
    learn_s = sum(row["time/learn_s"] for row in rows)
    steps, wall = r["env/steps_total"], r["time/total_s"]
    return {"env_frames_per_s": FRAME_SKIP * steps / wall, "env_steps": steps, "wall_s": wall,
            "learner_samples_per_s": steps * config.num_epochs / learn_s,
            "learn_share": learn_s / wall, "return_mean": r["env/episode_return_mean"]}


def run_sb3(seconds: float) -> dict:
    import ale_py
    import gymnasium as gym
    import numpy as np
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_atari_env
    from stable_baselines3.common.vec_env import VecFrameStack

    class Timed(PPO):
        """PPO that adds up the time of its updates (train())."""

        learn_s = 0.0

        def train(self) -> None:
            t0 = time.perf_counter()
            super().train()
            self.learn_s += time.perf_counter() - t0

    class StopAfter(BaseCallback):
        def _on_step(self) -> bool:
            return time.perf_counter() - t0 < seconds

    gym.register_envs(ale_py)  # ALE/ ids for SB3's gym.make
    venv = VecFrameStack(make_atari_env(ENV, n_envs=8, seed=0), n_stack=4)
    model = Timed("CnnPolicy", venv, n_steps=128, n_epochs=4, batch_size=256,
                  learning_rate=2.5e-4, clip_range=0.1, ent_coef=0.01, vf_coef=0.5,
                  device="cpu", seed=0)
    t0 = time.perf_counter()
    model.learn(total_timesteps=10**9, callback=StopAfter())
    wall = time.perf_counter() - t0
    steps = model.num_timesteps
    returns = [e["r"] for e in model.ep_info_buffer]
    # Updates that ran: every full 1,024-sample rollout was trained on (the stop comes
    # inside a rollout, which is then dropped).
    trained = (steps // 1024) * 1024
    return {"env_frames_per_s": FRAME_SKIP * steps / wall, "env_steps": steps, "wall_s": wall,
            "learner_samples_per_s": trained * 4 / model.learn_s,
            "learn_share": model.learn_s / wall,
            "return_mean": float(np.mean(returns)) if returns else float("nan")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=300.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    ap.add_argument("--one", choices=SYSTEMS)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.one:
        import torch

        torch.set_num_threads(args.threads)
        result = (run_sb3(args.seconds) if args.one == "sb3"
                  else run_distrl(args.seconds, 2 if args.one == "distrl_ray2" else 0))
        print(json.dumps({"system": args.one, "threads": args.threads, **result}))
        return
    OUT.mkdir(exist_ok=True)
    trials = run_trials(__file__, tuple(args.systems), [0],
                        ["--seconds", str(args.seconds), "--threads", str(args.threads)])
    by = {t["system"]: t for t in trials}
    summary = {"env": ENV, "seconds": args.seconds}
    for system, t in by.items():
        summary[f"{system}_env_frames_per_s"] = t["env_frames_per_s"]
        summary[f"{system}_learner_samples_per_s"] = t["learner_samples_per_s"]
    if "sb3" in by:
        for system in set(by) - {"sb3"}:
            summary[f"frames_ratio_{system}"] = (by[system]["env_frames_per_s"]
                                                 / by["sb3"]["env_frames_per_s"])
    print(json.dumps(summary))


if __name__ == "__main__":
    need("stable_baselines3")
    main()
