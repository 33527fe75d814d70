"""Env steps and wall-clock seconds from the start of training to a task's threshold
(mean return of the last 100 episodes), distrl's LSTM PPO in-process against
SB3-contrib's RecurrentPPO with rl-zoo3's settings, distrl's feed-forward PPO with
the same budget (which must not get there: the tasks need memory), and the tuned entry on
the task's full-state twin (``distrl_full_state``: CartPole-v1 and Pendulum-v1 with their
velocities, same threshold and budget): what the recipe reaches when nothing needs
remembering; and ``distrl_full_state_tuned``, that env's own tuned entry (``cartpole``,
``pendulum``) with the same threshold and budget: what distrl's PPO reaches there at best.

Tasks (``--task``):
- ``stateless_cartpole``: CartPole-v1 without velocities to 500 in 100k env steps
  (rl-zoo's CartPoleNoVel-v1), the tuned entry.
- ``pendulum_novel``: Pendulum-v1 without angular velocity to -200 in 100k env steps
  (rl-zoo's PendulumNoVel-v1), the tuned entry.
- ``repeat_after``: name the cue seen exactly ``--k`` steps earlier (RepeatAfter) to a
  mean of 0.9; the control is feed-forward PPO over a 4-frame stack. No SB3 side.

Every trial runs in a fresh subprocess (same torch threads for all), interleaved by
seed. Prints one JSON line per trial, then the summary as the last line; curves go to
bench/out/ppo_lstm_<task>_curves.json. Each trial also plays 10 deterministic episodes
with its final policy (``det_eval``).

    python bench/ppo_lstm.py --task stateless_cartpole [--seeds 0 1 2 3 4] [--budget N]
"""

from __future__ import annotations

import shutil
import statistics
import sys
from dataclasses import replace
from pathlib import Path

from _extra import need
from _trials import cli, column, per_seed, sb3_stop_at

OUT = Path(__file__).parent / "out"
SYSTEMS = ("sb3", "distrl", "distrl_feedforward", "distrl_full_state",
           "distrl_full_state_tuned")
# The env each memory task hides its velocities from, and that env's own tuned entry.
FULL_STATE = {"stateless_cartpole": ("CartPole-v1", "cartpole"),
              "pendulum_novel": ("Pendulum-v1", "pendulum")}
FULL_STATE_RECIPE = {"distrl_full_state": "same", "distrl_full_state_tuned": "tuned"}
TASKS = ("stateless_cartpole", "pendulum_novel", "repeat_after")
STACK = 4  # the feed-forward control's frame stack on repeat_after


def task_setup(task: str, k: int, budget: int | None, lstm: bool, full_state: str = ""):
    """(config, env, env_config, threshold, budget) of one distrl trial; ``full_state``:
    on the env with its velocities, with the task's tuned entry ("same") or that env's
    own ("tuned", feed-forward as tuned)."""
    from distrl.tuned import repeat_after, tuned

    if task == "repeat_after":
        t = repeat_after(k, budget or 150_000)
        config, env, target, budget = t.for_runners(0), t.env, t.stop_return, t.env_step_budget
        env_config = {**t.env_config, "stack": 1 if lstm else STACK}
    else:
        t = tuned(task)
        config, env, env_config, target = t.for_runners(0), t.env, {}, t.stop_return
        budget = budget or t.env_step_budget
        if full_state:
            env, own = FULL_STATE[task]
            if full_state == "tuned":
                config = tuned(own).for_runners(0)
    if not lstm:
        config = replace(config, model=config.model.feedforward())
    return config, env, env_config, target, budget


def run_distrl(task: str, seed: int, lstm: bool, k: int, budget: int | None,
               logdir: Path, full_state: str = "") -> dict:
    import numpy as np

    from distrl import RunConfig, train_ppo
    from distrl.core.evaluation import run_episodes
    from distrl.core.metrics import read_jsonl

    shutil.rmtree(logdir, ignore_errors=True)  # metrics.jsonl appends: start clean
    config, env, env_config, target, budget = task_setup(task, k, budget, lstm, full_state)
    r = train_ppo(config, RunConfig(env=env, env_config=env_config, seed=seed,
                                    stop_return=target, max_env_steps=budget,
                                    logdir=str(logdir), progress=False))
    rows = read_jsonl(logdir / "metrics.jsonl")
    det = run_episodes(r["checkpoint"], episodes=10, seed=10_000 + seed)
    return {"reached": r["stopped_by"] == "stop_return", "train_s": r["time/total_s"],
            "env_steps": r["env/steps_total"], "target": target, "budget": budget,
            "final_return": r["env/episode_return_mean"],
            "det_eval": float(np.mean(det.returns)),
            "curve": [(x["time/total_s"], x["env/steps_total"], x["env/episode_return_mean"])
                      for x in rows]}


def sb3_model(task: str, seed: int):
    """rl-zoo3's RecurrentPPO hyperparameters (hyperparams/ppo_lstm.yml) for
    CartPoleNoVel-v1 and PendulumNoVel-v1, on distrl's envs, with the zoo's VecNormalize."""
    import torch
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.utils import LinearSchedule
    from stable_baselines3.common.vec_env import VecNormalize

    from distrl.envs.memory_tasks import PendulumNoVel, StatelessCartPole

    if task == "stateless_cartpole":
        env = VecNormalize(make_vec_env(StatelessCartPole, n_envs=8, seed=seed),
                           norm_obs=True, norm_reward=False)
        return RecurrentPPO(
            "MlpLstmPolicy", env, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98,
            n_epochs=20, ent_coef=0.0, learning_rate=LinearSchedule(1e-3, 0.0, 1.0),
            clip_range=LinearSchedule(0.2, 0.0, 1.0), seed=seed, device="cpu",
            policy_kwargs=dict(ortho_init=False, activation_fn=torch.nn.ReLU,
                               lstm_hidden_size=64, enable_critic_lstm=True,
                               net_arch=dict(pi=[64], vf=[64])))
    env = VecNormalize(make_vec_env(PendulumNoVel, n_envs=4, seed=seed))
    return RecurrentPPO(
        "MlpLstmPolicy", env, n_steps=1024, gae_lambda=0.95, gamma=0.9, n_epochs=10,
        ent_coef=0.0, learning_rate=1e-3, clip_range=0.2, use_sde=True, sde_sample_freq=4,
        seed=seed, device="cpu",
        policy_kwargs=dict(ortho_init=False, activation_fn=torch.nn.ReLU, lstm_hidden_size=64,
                           enable_critic_lstm=True, net_arch=dict(pi=[64], vf=[64])))


def skipped(why: str) -> dict:
    """A trial that does not run (the summary leaves its system out)."""
    return {"reached": False, "skipped": why, "train_s": None, "env_steps": None, "curve": []}


def run_sb3(task: str, seed: int, budget: int | None) -> dict:
    if task == "repeat_after":
        return skipped("rl-zoo has no settings for it")
    import numpy as np
    from stable_baselines3.common.evaluation import evaluate_policy

    from distrl.tuned import tuned

    t = tuned(task)
    budget = budget or t.env_step_budget
    model = sb3_model(task, seed)
    cb = sb3_stop_at(t.stop_return, full_window=True)
    model.learn(total_timesteps=budget, callback=cb)
    buf = model.ep_info_buffer
    model.get_env().training = False  # VecNormalize: freeze the statistics for eval
    det, _ = evaluate_policy(model, model.get_env(), n_eval_episodes=10, deterministic=True)
    return {"reached": cb.hit, "train_s": cb.curve[-1][0], "env_steps": model.num_timesteps,
            "target": t.stop_return, "budget": budget,
            "final_return": float(np.mean([e["r"] for e in buf])) if buf else None,
            "det_eval": float(det), "curve": cb.curve}


def one(system: str, seed: int, threads: int, task: str, k: int, budget: int) -> dict:
    import torch

    if task not in TASKS:
        sys.exit(f"--task must be one of {TASKS}")
    torch.set_num_threads(threads)
    budget = budget or None
    if system == "sb3":
        result = run_sb3(task, seed, budget)
    elif system in FULL_STATE_RECIPE and task not in FULL_STATE:
        result = skipped("no full-state twin")
    else:
        logdir = OUT / f"runs/lstm_{task}_{system}_{seed}"
        result = run_distrl(task, seed, system != "distrl_feedforward", k, budget, logdir,
                            FULL_STATE_RECIPE.get(system, ""))
    return {"system": system, "seed": seed, "threads": threads, "task": task,
            "k": k if task == "repeat_after" else None, **result}


def summary(trials: list[dict]) -> dict:
    # A run that missed counts at its full time: the median then says so honestly.
    ran = [s for s in SYSTEMS if (times := column(trials, s, "train_s")) and None not in times]
    med = {s: statistics.median(column(trials, s, "train_s")) for s in ran}
    steps = {s: statistics.median(column(trials, s, "env_steps")) for s in ran}
    return {
        "task": trials[0]["task"], "k": trials[0]["k"],
        "target": next(t["target"] for t in trials if "target" in t),
        "median_s": med, "median_env_steps": steps,
        "median_final_return": {s: statistics.median(column(trials, s, "final_return"))
                                for s in ran},
        "reached": {s: column(trials, s, "reached") for s in ran},
        "det_eval": {s: column(trials, s, "det_eval") for s in ran},
        "per_seed": per_seed(trials, tuple(ran)), "threads": trials[0]["threads"],
    }


if __name__ == "__main__":
    need("stable_baselines3", "sb3_contrib")
    task = sys.argv[sys.argv.index("--task") + 1] if "--task" in sys.argv else TASKS[0]
    cli(__file__, SYSTEMS, f"ppo_lstm_{task}_curves.json", one, summary, threads=1,
        task=TASKS[0], k=64, budget=0)
