"""Wall-clock seconds from the start of training to a mean-100 return of 475 on
CartPole-v1: distrl in-process, distrl with 2 Ray env runners, Stable-Baselines3 PPO.

Every trial runs in a fresh subprocess (same torch threads for all), interleaved by seed
so that machine noise hits all three alike. Ray's start-up and actor creation are
reported apart from the training time. Prints one JSON line per trial, then the summary
as the last line; curves for bench/plot_ppo_cartpole.py go to bench/out/.

    python bench/ppo_cartpole.py [--seeds 0 1 2] [--threads 1]
"""

from __future__ import annotations

import shutil
import statistics
import time
from pathlib import Path

from _extra import need
from _trials import cli, column, per_seed, sb3_stop_at

OUT = Path(__file__).parent / "out"
TARGET = 475.0
SYSTEMS = ("sb3", "distrl", "distrl_ray2")


def run_distrl(seed: int, runners: int, logdir: Path) -> dict:
    from distrl import RunConfig, train_ppo
    from distrl.core.metrics import read_jsonl
    from distrl.tuned import tuned

    shutil.rmtree(logdir, ignore_errors=True)  # metrics.jsonl appends: start clean
    t = tuned("cartpole")
    t0 = time.perf_counter()  # 32 sub-envs in total either way
    r = train_ppo(t.for_runners(runners), RunConfig(env=t.env, seed=seed, stop_return=TARGET,
                                                max_env_steps=300_000, logdir=str(logdir),
                                                progress=False))
    wall = time.perf_counter() - t0
    rows = read_jsonl(logdir / "metrics.jsonl")
    return {
        "reached": r["stopped_by"] == "stop_return", "train_s": r["time/total_s"],
        "env_steps": r["env/steps_total"], "ray_start_s": r["ray_start_s"],
        "setup_s": wall - r["time/total_s"] - r["ray_start_s"],
        "sample_s": sum(x["time/sample_s"] for x in rows),
        "learn_s": sum(x["time/learn_s"] for x in rows),
        "curve": [(x["time/total_s"], x["env/steps_total"], x["env/episode_return_mean"])
                      for x in rows],
    }


def run_sb3(seed: int) -> dict:
    """rl-zoo3's hyperparameters for CartPole-v1 (hyperparams/ppo.yml)."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.utils import LinearSchedule

    env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
    model = PPO("MlpPolicy", env, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98,
                n_epochs=20, ent_coef=0.0, learning_rate=LinearSchedule(1e-3, 0.0, 1.0),
                clip_range=LinearSchedule(0.2, 0.0, 1.0), seed=seed, device="cpu")
    cb = sb3_stop_at(TARGET)
    model.learn(total_timesteps=100_000, callback=cb)  # rl-zoo's n_timesteps
    train_s = cb.curve[-1][0]
    return {"reached": cb.hit, "train_s": train_s, "env_steps": model.num_timesteps,
            "curve": cb.curve}


def one(system: str, seed: int, threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    logdir = OUT / f"runs/{system}_{seed}"
    if system == "sb3":
        result = run_sb3(seed)
    else:
        result = run_distrl(seed, 2 if system == "distrl_ray2" else 0, logdir)
    return {"system": system, "seed": seed, "threads": threads, **result}


def summary(trials: list[dict]) -> dict:
    def of(system: str, key: str) -> list:
        return column(trials, system, key)

    med = {s: statistics.median(of(s, "train_s")) for s in SYSTEMS}
    rate = {s: sum(of(s, "env_steps")) / sum(of(s, "train_s")) for s in SYSTEMS}
    return {
        "distrl_median_s": med["distrl"], "distrl_ray2_median_s": med["distrl_ray2"],
        "sb3_median_s": med["sb3"],
        "ratio": med["distrl"] / med["sb3"], "ratio_ray2": med["distrl_ray2"] / med["sb3"],
        "distrl_steps_per_s": rate["distrl"], "distrl_ray2_steps_per_s": rate["distrl_ray2"],
        "sb3_steps_per_s": rate["sb3"],
        "all_reached": all(t["reached"] for t in trials),
        "ray_start_s": of("distrl_ray2", "ray_start_s"),
        "per_seed": per_seed(trials, SYSTEMS),
        "threads": trials[0]["threads"],
    }


if __name__ == "__main__":
    need("stable_baselines3")
    cli(__file__, SYSTEMS, "ppo_cartpole_curves.json", one, summary, threads=1)
