"""PPO on MuJoCo: the mean return of the last 100 episodes after a fixed env-step budget,
and the wall time to spend it, for distrl (tuned entry, in-process and 2 Ray env
runners) next to Stable-Baselines3 PPO with rl-zoo3's hyperparameters (VecNormalize on),
same torch threads, every trial a fresh subprocess interleaved by seed.

    python bench/ppo_mujoco.py [--envs Hopper-v5 HalfCheetah-v5] [--seeds 0 1 2]
                               [--steps 300000]

One JSON line per trial, the summary last: per env the medians of final return and wall
time of each system, return_ratio_<env> and time_ratio_<env> (distrl in-process / SB3).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
from pathlib import Path

from _trials import run_trials

OUT = Path(__file__).parent / "out"
SYSTEMS = ("sb3", "distrl", "distrl_ray2")
TUNED = {"Hopper-v5": "hopper", "HalfCheetah-v5": "halfcheetah"}
# rl-zoo3 hyperparams/ppo.yml (Hopper-v3 / HalfCheetah-v3 entries, on the v5 envs).
ZOO = {
    "Hopper-v5": dict(batch_size=32, n_steps=512, gamma=0.999, learning_rate=9.80828e-05,
                      ent_coef=0.00229519, clip_range=0.2, n_epochs=5, gae_lambda=0.99,
                      max_grad_norm=0.7, vf_coef=0.835671),
    "HalfCheetah-v5": dict(batch_size=64, n_steps=512, gamma=0.98, learning_rate=2.0633e-05,
                           ent_coef=0.000401762, clip_range=0.1, n_epochs=20,
                           gae_lambda=0.92, max_grad_norm=0.8, vf_coef=0.58096),
}


def run_distrl(env: str, seed: int, steps: int, runners: int) -> dict:
    from distrl import RunConfig, train_ppo
    from distrl.tuned import tuned

    logdir = OUT / f"runs/ppo_{env}_{runners}_{seed}"
    shutil.rmtree(logdir, ignore_errors=True)
    t = tuned(TUNED[env])
    t0 = time.perf_counter()
    r = train_ppo(t.for_runners(runners), RunConfig(env=env, seed=seed, max_env_steps=steps,
                                                    logdir=str(logdir), progress=False))
    return {"final_return": r["env/episode_return_mean"], "wall_s": time.perf_counter() - t0,
            "train_s": r["time/total_s"], "env_steps": r["env/steps_total"]}


def run_sb3(env: str, seed: int, steps: int) -> dict:
    import numpy as np
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize
    from torch import nn

    t0 = time.perf_counter()
    venv = VecNormalize(make_vec_env(env, n_envs=1, seed=seed), gamma=ZOO[env]["gamma"])
    model = PPO("MlpPolicy", venv, seed=seed, device="cpu", **ZOO[env], policy_kwargs=dict(
        log_std_init=-2, ortho_init=False, activation_fn=nn.ReLU,
        net_arch=dict(pi=[256, 256], vf=[256, 256])))
    model.learn(total_timesteps=steps)
    wall = time.perf_counter() - t0
    returns = [e["r"] for e in model.ep_info_buffer]
    return {"final_return": float(np.mean(returns)), "wall_s": wall, "train_s": wall,
            "env_steps": model.num_timesteps}


def one(system: str, env: str, seed: int, steps: int, threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    if system == "sb3":
        result = run_sb3(env, seed, steps)
    else:
        result = run_distrl(env, seed, steps, 2 if system == "distrl_ray2" else 0)
    return {"system": system, "env": env, "seed": seed, "threads": threads, **result}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--envs", nargs="+", default=list(TUNED))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=300_000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--one", choices=SYSTEMS)
    ap.add_argument("--env", default="Hopper-v5")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.env, args.seed, args.steps, args.threads)))
        return
    OUT.mkdir(exist_ok=True)
    trials = []
    for env in args.envs:
        trials += run_trials(__file__, SYSTEMS, args.seeds,
                             ["--env", env, "--steps", str(args.steps),
                              "--threads", str(args.threads)])
    print(json.dumps(summary(trials, args.envs)))


def summary(trials: list[dict], envs: list[str]) -> dict:
    out: dict = {}
    for env in envs:
        def med(system: str, key: str, env: str = env) -> float:
            return statistics.median(t[key] for t in trials
                                     if t["system"] == system and t["env"] == env)

        for system in SYSTEMS:
            out[f"{system}_return_{env}"] = med(system, "final_return")
            out[f"{system}_wall_s_{env}"] = med(system, "wall_s")
        out[f"return_ratio_{env}"] = out[f"distrl_return_{env}"] / out[f"sb3_return_{env}"]
        out[f"time_ratio_{env}"] = out[f"distrl_wall_s_{env}"] / out[f"sb3_wall_s_{env}"]
        out[f"return_ratio_ray2_{env}"] = (out[f"distrl_ray2_return_{env}"]
                                           / out[f"sb3_return_{env}"])
        out[f"time_ratio_ray2_{env}"] = (out[f"distrl_ray2_wall_s_{env}"]
                                         / out[f"sb3_wall_s_{env}"])
    return out


if __name__ == "__main__":
    main()
