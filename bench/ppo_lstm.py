"""Wall-clock seconds from the start of training to a mean-100 return of 475 on
StatelessCartPole (CartPole-v1 without the velocities): distrl's LSTM PPO in-process vs
SB3-contrib's RecurrentPPO, and distrl's feed-forward PPO with the same budget (which
must not get there: the task needs memory).

Every trial runs in a fresh subprocess (same torch threads for all), interleaved by
seed. Prints one JSON line per trial, then the summary as the last line
(``distrl_median_s``, ``sb3_median_s``, ``ratio``, ``feedforward_reached``); curves go
to bench/out/ppo_lstm_curves.json.

    python bench/ppo_lstm.py [--seeds 0 1 2] [--threads 1]
"""

from __future__ import annotations

import shutil
import statistics
from dataclasses import replace
from pathlib import Path

from _trials import cli, column, per_seed, sb3_stop_at

OUT = Path(__file__).parent / "out"
TARGET = 475.0
BUDGET = 500_000  # env steps for every system
SYSTEMS = ("sb3", "distrl", "distrl_feedforward")


def run_distrl(seed: int, lstm: bool, logdir: Path) -> dict:
    from distrl import RunConfig, train_ppo
    from distrl.core.metrics import read_jsonl
    from distrl.tuned import tuned

    shutil.rmtree(logdir, ignore_errors=True)  # metrics.jsonl appends: start clean
    t = tuned("stateless_cartpole")
    config = t.for_runners(0)
    if not lstm:
        config = replace(config, model=replace(config.model, use_lstm=False))
    r = train_ppo(config, RunConfig(env=t.env, seed=seed, stop_return=TARGET,
                                    max_env_steps=BUDGET, logdir=str(logdir), progress=False))
    rows = read_jsonl(logdir / "metrics.jsonl")
    return {"reached": r["stopped_by"] == "stop_return", "train_s": r["time/total_s"],
            "env_steps": r["env/steps_total"],
            "final_return": r["env/episode_return_mean"],
            "curve": [(x["time/total_s"], x["env/episode_return_mean"]) for x in rows]}


def run_sb3(seed: int) -> dict:
    """rl-zoo3's RecurrentPPO hyperparameters for CartPoleNoVel-v1 (hyperparams/
    ppo_lstm.yml), on the same env."""
    import numpy as np
    import torch
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.utils import LinearSchedule

    from distrl.core.memory_tasks import StatelessCartPole

    env = make_vec_env(StatelessCartPole, n_envs=8, seed=seed)
    model = RecurrentPPO(
        "MlpLstmPolicy", env, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98,
        n_epochs=20, ent_coef=0.0, learning_rate=LinearSchedule(1e-3, 0.0, 1.0),
        clip_range=LinearSchedule(0.2, 0.0, 1.0), seed=seed, device="cpu",
        policy_kwargs=dict(ortho_init=False, activation_fn=torch.nn.ReLU,
                           lstm_hidden_size=64, enable_critic_lstm=True,
                           net_arch=dict(pi=[64], vf=[64])))
    cb = sb3_stop_at(TARGET, full_window=True)
    model.learn(total_timesteps=BUDGET, callback=cb)
    buf = model.ep_info_buffer
    return {"reached": cb.hit, "train_s": cb.curve[-1][0], "env_steps": model.num_timesteps,
            "final_return": float(np.mean([e["r"] for e in buf])) if buf else None,
            "curve": cb.curve}


def one(system: str, seed: int, threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    if system == "sb3":
        result = run_sb3(seed)
    else:
        result = run_distrl(seed, system == "distrl", OUT / f"runs/lstm_{system}_{seed}")
    return {"system": system, "seed": seed, "threads": threads, **result}


def summary(trials: list[dict]) -> dict:
    # A run that missed counts at its full time: the median then says so honestly.
    med = {s: statistics.median(column(trials, s, "train_s")) for s in SYSTEMS}
    return {
        "distrl_median_s": med["distrl"], "sb3_median_s": med["sb3"],
        "ratio": med["distrl"] / med["sb3"],
        "distrl_reached": column(trials, "distrl", "reached"),
        "sb3_reached": column(trials, "sb3", "reached"),
        "feedforward_reached": any(column(trials, "distrl_feedforward", "reached")),
        "feedforward_final_return": column(trials, "distrl_feedforward", "final_return"),
        "per_seed": per_seed(trials, SYSTEMS),
        "budget_env_steps": BUDGET, "threads": trials[0]["threads"],
    }


if __name__ == "__main__":
    cli(__file__, SYSTEMS, "ppo_lstm_curves.json", one, summary, threads=1)
