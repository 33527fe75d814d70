"""Wall-clock seconds of training until a greedy evaluation (20 episodes) reaches a mean
return of 475 on CartPole-v1: distrl Ape-X (2 actors on a local Ray, the tuned
"cartpole" entry) next to Stable-Baselines3 DQN with rl-zoo3's CartPole hyperparameters.

Evaluation time is excluded from both: each system evaluates on its own env instances
at a fixed cadence and the time spent evaluating is subtracted. Every trial runs in a
fresh subprocess, interleaved by seed. One JSON line per trial, then the summary as the
last line.

    python bench/apex_cartpole.py [--seeds 0 1 2] [--cap-s 600]
"""

from __future__ import annotations

import shutil
import statistics
import time
from pathlib import Path

from _extra import need
from _trials import cli, column, per_seed

OUT = Path(__file__).parent / "out"
TARGET = 475.0
EPISODES = 20
SYSTEMS = ("sb3_dqn", "distrl_apex")
SB3_EVAL_EVERY = 2_000  # env steps between SB3's evaluations


def run_distrl(seed: int, cap_s: float) -> dict:
    import numpy as np

    from distrl import RunConfig, train_apex
    from distrl.core.metrics import read_jsonl
    from distrl.tuned import tuned

    logdir = OUT / f"runs/apex_{seed}"
    shutil.rmtree(logdir, ignore_errors=True)
    t = tuned("cartpole", "apex")
    r = train_apex(t.config, RunConfig(
        env=t.env, seed=seed, stop_return=TARGET, stop_on="eval", evaluation_interval=1,
        evaluation_duration=EPISODES, max_env_steps=t.env_step_budget * 4,
        logdir=str(logdir), progress=False, num_torch_threads=1))
    rows = read_jsonl(logdir / "metrics.jsonl")
    eval_s = np.cumsum([x.get("eval/time_s", 0.0) for x in rows])  # excluded, as for SB3
    curve = [(x["time/total_s"] - e, x["env/steps_total"], x["eval/episode_return_mean"])
             for x, e in zip(rows, eval_s, strict=True)]
    return {"reached": r["stopped_by"] == "stop_return", "train_s": curve[-1][0],
            "eval_s": float(eval_s[-1]), "env_steps": r["env/steps_total"],
            "ray_start_s": r["ray_start_s"], "curve": curve}


def run_sb3(seed: int, cap_s: float) -> dict:
    """rl-zoo3's hyperparams/dqn.yml entry for CartPole-v1 (50k steps)."""
    import gymnasium as gym
    import numpy as np
    from stable_baselines3 import DQN
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.evaluation import evaluate_policy

    class EvalUntil(BaseCallback):
        def _on_training_start(self) -> None:
            self.t0, self.eval_s, self.hit, self.curve = time.perf_counter(), 0.0, False, []
            self.env = gym.make("CartPole-v1")

        def _on_step(self) -> bool:
            if self.num_timesteps % SB3_EVAL_EVERY:
                return True
            e0 = time.perf_counter()
            returns, _ = evaluate_policy(self.model, self.env, n_eval_episodes=EPISODES,
                                         deterministic=True, return_episode_rewards=True)
            self.eval_s += time.perf_counter() - e0
            mean = float(np.mean(returns))
            self.curve.append((time.perf_counter() - self.t0 - self.eval_s, self.num_timesteps,
                               mean))
            self.hit = mean >= TARGET
            return not self.hit and self.curve[-1][0] < cap_s

    model = DQN("MlpPolicy", gym.make("CartPole-v1"), learning_rate=2.3e-3, batch_size=64,
                buffer_size=100_000, learning_starts=1_000, gamma=0.99,
                target_update_interval=10, train_freq=256, gradient_steps=128,
                exploration_fraction=0.16, exploration_final_eps=0.04,
                policy_kwargs={"net_arch": [256, 256]}, seed=seed, device="cpu")
    cb = EvalUntil()
    model.learn(total_timesteps=50_000, callback=cb)  # rl-zoo: 50k (sets the eps decay)
    train_s = time.perf_counter() - cb.t0 - cb.eval_s
    return {"reached": cb.hit, "train_s": train_s, "eval_s": cb.eval_s,
            "env_steps": model.num_timesteps, "curve": cb.curve}


def one(system: str, seed: int, cap_s: float) -> dict:
    import torch

    torch.set_num_threads(1)
    result = run_sb3(seed, cap_s) if system == "sb3_dqn" else run_distrl(seed, cap_s)
    if not result["reached"]:
        result["train_s"] = max(result["train_s"], cap_s)  # a miss counts as the cap
    return {"system": system, "seed": seed, **result}


def summary(trials: list[dict]) -> dict:
    med = {s: statistics.median(column(trials, s, "train_s")) for s in SYSTEMS}
    return {
        "distrl_median_s": med["distrl_apex"], "sb3_median_s": med["sb3_dqn"],
        "ratio": med["distrl_apex"] / med["sb3_dqn"],
        "all_reached": all(t["reached"] for t in trials),
        "per_seed": per_seed(trials, SYSTEMS),
    }


if __name__ == "__main__":
    need("stable_baselines3")
    cli(__file__, SYSTEMS, "apex_cartpole_curves.json", one, summary, cap_s=600.0)
