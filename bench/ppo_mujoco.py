"""PPO on MuJoCo: the mean return of the last 100 episodes after a fixed env-step budget,
a deterministic 10-episode evaluation of the final policy, and the wall time to spend
the budget, for distrl (tuned entry, in-process and 2 Ray env runners) next to
Stable-Baselines3 PPO with rl-zoo3's hyperparameters (VecNormalize on), same torch
threads, every trial a fresh subprocess interleaved by seed. Both run each env with the
tuned entry's env_config (Ant and Humanoid without contact forces in the observation,
as the v3 tasks of the published tables had them).

    python bench/ppo_mujoco.py [--envs Hopper-v5 HalfCheetah-v5] [--seeds 0 1 2]
                               [--steps 300000] [--sb3-steps 200000] [--systems ...]
                               [--set FIELD=JSON ...] [--entry NAME]
    python bench/ppo_mujoco.py --steps 1000000 --sb3-steps 200000 \
        --envs Hopper-v5 HalfCheetah-v5 Walker2d-v5 Ant-v5 Humanoid-v5

``--set`` replaces a field of distrl's tuned config (``recompute_advantages=true``,
``model.action_scaling=true``);
``--entry`` runs another tuned entry's config (and env_config) on the env; by default
each env runs its own entry, at 1M steps and more Hopper its 1M one (``hopper_1m``).
``--sb3-steps`` runs SB3 for a shorter window (its first N steps) to give its env
steps/s: its returns are then those of the window, not of the budget. One JSON line per
trial, the summary last: per env the medians of final return, deterministic evaluation,
wall time and env steps/s of each system, return_ratio_<env> and time_ratio_<env>
(distrl in-process / SB3, the wall time per env step where SB3 ran a shorter window), and
how many tasks distrl's median reaches Tianshou's 1M figure on
(``tasks_at_tianshou_final_return``, ``tasks_at_tianshou_det_eval``). Every trial, with
SB3's curve (seconds, env steps, mean-100 return after each rollout), goes to
bench/out/ppo_mujoco_curves.json for bench/plot_ppo_mujoco.py.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
import zlib
from pathlib import Path

from _extra import need
from _trials import run_trials, sb3_stop_at

OUT = Path(__file__).parent / "out"
SYSTEMS = ("sb3", "distrl", "distrl_ray2")
TUNED = {"Hopper-v5": "hopper", "HalfCheetah-v5": "halfcheetah", "Walker2d-v5": "walker2d",
         "Ant-v5": "ant", "Humanoid-v5": "humanoid"}
TUNED_1M = {**TUNED, "Hopper-v5": "hopper_1m"}
"""The entries for budgets of 1M env steps and more (``hopper`` is calibrated for 300k)."""
# rl-zoo3 hyperparams/ppo.yml (the v3 entries, on the v5 envs). Ant has no tuned entry
# there: the zoo runs SB3's defaults on it. ``net`` marks the entries with the zoo's
# ReLU 256x256 policy (log-std -2, no orthogonal init); the others keep SB3's 64x64 tanh.
ZOO = {
    "Hopper-v5": dict(batch_size=32, n_steps=512, gamma=0.999, learning_rate=9.80828e-05,
                      ent_coef=0.00229519, clip_range=0.2, n_epochs=5, gae_lambda=0.99,
                      max_grad_norm=0.7, vf_coef=0.835671, net=True),
    "HalfCheetah-v5": dict(batch_size=64, n_steps=512, gamma=0.98, learning_rate=2.0633e-05,
                           ent_coef=0.000401762, clip_range=0.1, n_epochs=20,
                           gae_lambda=0.92, max_grad_norm=0.8, vf_coef=0.58096, net=True),
    "Walker2d-v5": dict(batch_size=32, n_steps=512, gamma=0.99, learning_rate=5.05041e-05,
                        ent_coef=0.000585045, clip_range=0.1, n_epochs=20, gae_lambda=0.95,
                        max_grad_norm=1.0, vf_coef=0.871923, net=False),
    "Ant-v5": dict(net=False),
    "Humanoid-v5": dict(batch_size=256, n_steps=512, gamma=0.95, learning_rate=3.56987e-05,
                        ent_coef=0.00238306, clip_range=0.3, n_epochs=5, gae_lambda=0.9,
                        max_grad_norm=2.0, vf_coef=0.431892, net=True),
}
# Tianshou's PPO at 1M env steps (v3 envs, its README's MuJoCo table): the bar's figures.
TIANSHOU_1M = {"Hopper-v5": 2_609.0, "HalfCheetah-v5": 5_784.0, "Walker2d-v5": 3_589.0,
               "Ant-v5": 3_258.0, "Humanoid-v5": 787.0}


def run_distrl(env: str, seed: int, steps: int, runners: int,
               overrides: dict | None = None, entry: str | None = None) -> dict:
    import numpy as np

    from distrl import RunConfig, train_ppo
    from distrl.core.evaluation import run_episodes
    from distrl.tuned import tuned

    logdir = run_folder(env, runners, seed, overrides, entry)
    shutil.rmtree(logdir, ignore_errors=True)
    t = tuned(entry or entry_for(env, steps))
    t0 = time.perf_counter()
    config = overridden(t.for_runners(runners), overrides or {})
    r = train_ppo(config, RunConfig(env=env, env_config=t.env_config, seed=seed,
                                    vector_mode=t.vector_mode, max_env_steps=steps,
                                    logdir=str(logdir), progress=False))
    wall = time.perf_counter() - t0
    det = run_episodes(r["checkpoint"], episodes=10, seed=10_000 + seed)
    return {"final_return": r["env/episode_return_mean"], "det_eval": float(np.mean(det.returns)),
            "wall_s": wall, "train_s": r["time/total_s"], "env_steps": r["env/steps_total"]}


def entry_for(env: str, steps: int) -> str:
    """The env's tuned entry for a budget of ``steps`` env steps."""
    return (TUNED_1M if steps >= 1_000_000 else TUNED)[env]


def run_folder(env: str, runners: int, seed: int, overrides: dict | None = None,
               entry: str | None = None) -> Path:
    """A trial's run folder. A variant (another entry, replaced fields) has one of its
    own, so that it can run beside the default trial of the same env and seed."""
    variant = "".join([f"_{entry}" if entry else "",
                       f"_{zlib.crc32(json.dumps(overrides, sort_keys=True).encode()):08x}"
                       if overrides else ""])
    return OUT / f"runs/ppo_{env}_{runners}_{seed}{variant}"


def overridden(config, overrides: dict):
    """``config`` with fields replaced; ``model.x`` names a field of its ModelConfig."""
    import dataclasses

    top, model = {}, {}
    for key, value in overrides.items():
        head, _, field = key.partition(".")
        if field and head != "model":
            raise SystemExit(f"--set {key}: only model.<field> may be nested")
        (model if field else top)[field or key] = value
    if model:
        top["model"] = dataclasses.replace(config.model, **model)
    return dataclasses.replace(config, **top)


def run_sb3(env: str, seed: int, steps: int) -> dict:
    import numpy as np
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import VecNormalize
    from torch import nn

    from distrl.tuned import tuned

    zoo = dict(ZOO[env])
    net = zoo.pop("net")
    kwargs = dict(log_std_init=-2, ortho_init=False, activation_fn=nn.ReLU,
                  net_arch=dict(pi=[256, 256], vf=[256, 256])) if net else {}
    t0 = time.perf_counter()
    env_kwargs = tuned(TUNED[env]).env_config  # the same task as distrl's
    venv = VecNormalize(make_vec_env(env, n_envs=1, seed=seed, env_kwargs=env_kwargs),
                        gamma=zoo.get("gamma", 0.99))
    model = PPO("MlpPolicy", venv, seed=seed, device="cpu", **zoo, policy_kwargs=kwargs)
    cb = sb3_stop_at(float("inf"))  # never stops: records the curve
    model.learn(total_timesteps=steps, callback=cb)
    wall = time.perf_counter() - t0
    returns = [e["r"] for e in model.ep_info_buffer]
    venv.training, venv.norm_reward = False, False
    det, _ = evaluate_policy(model, venv, n_eval_episodes=10, deterministic=True)
    return {"final_return": float(np.mean(returns)), "det_eval": float(det), "wall_s": wall,
            "train_s": wall, "env_steps": model.num_timesteps, "curve": cb.curve}


def one(system: str, env: str, seed: int, steps: int, threads: int,
        overrides: dict | None = None, entry: str | None = None) -> dict:
    import torch

    torch.set_num_threads(threads)
    if system == "sb3":
        result = run_sb3(env, seed, steps)
    else:
        result = run_distrl(env, seed, steps, 2 if system == "distrl_ray2" else 0, overrides,
                            entry)
    result["steps_per_s"] = result["env_steps"] / result["wall_s"]
    return {"system": system, "env": env, "seed": seed, "threads": threads, **result}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--envs", nargs="+", default=list(TUNED))
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=300_000)
    ap.add_argument("--sb3-steps", type=int, default=None,
                    help="SB3's window (default: the budget, --steps)")
    ap.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--one", choices=SYSTEMS)
    ap.add_argument("--env", default="Hopper-v5")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=JSON",
                    help="replace a field of distrl's tuned PPOConfig")
    ap.add_argument("--entry", help="distrl's tuned entry (default: the env's own)")
    args = ap.parse_args()
    if args.one:
        steps = args.sb3_steps or args.steps if args.one == "sb3" else args.steps
        overrides = {k: json.loads(v) for k, _, v in (s.partition("=") for s in args.set)}
        trial = one(args.one, args.env, args.seed, steps, args.threads, overrides, args.entry)
        print(json.dumps({**trial, "overrides": args.set, "entry": args.entry}))
        return
    OUT.mkdir(exist_ok=True)
    trials = []
    extra = ["--threads", str(args.threads)] + (
        ["--sb3-steps", str(args.sb3_steps)] if args.sb3_steps else []) + [
        a for s in args.set for a in ("--set", s)] + (
        ["--entry", args.entry] if args.entry else [])
    for env in args.envs:
        trials += run_trials(__file__, tuple(args.systems), args.seeds,
                             ["--env", env, "--steps", str(args.steps), *extra])
    (OUT / "ppo_mujoco_curves.json").write_text(json.dumps(trials))
    print(json.dumps(summary(trials, args.envs, tuple(args.systems))))


def summary(trials: list[dict], envs: list[str], systems: tuple[str, ...] = SYSTEMS) -> dict:
    """Per env and system the medians over seeds; distrl's ratios to SB3 where both ran.
    The time ratio compares wall time per env step, so that it holds where SB3 ran a
    shorter window (then its return ratio compares different budgets: left out)."""
    out: dict = {}
    for env in envs:
        out[f"tianshou_1m_{env}"] = TIANSHOU_1M[env]

        def med(system: str, key: str, env: str = env) -> float:
            return statistics.median(t[key] for t in trials
                                     if t["system"] == system and t["env"] == env)

        for system in systems:
            for key in ("final_return", "det_eval", "wall_s", "steps_per_s", "env_steps"):
                out[f"{system}_{key}_{env}"] = med(system, key)
        if "sb3" not in systems:
            continue
        for system, tag in (("distrl", ""), ("distrl_ray2", "_ray2")):
            if system not in systems:
                continue
            out[f"time_ratio{tag}_{env}"] = (out[f"sb3_steps_per_s_{env}"]
                                             / out[f"{system}_steps_per_s_{env}"])
            if out[f"sb3_env_steps_{env}"] == out[f"{system}_env_steps_{env}"]:
                out[f"return_ratio{tag}_{env}"] = (out[f"{system}_final_return_{env}"]
                                                   / out[f"sb3_final_return_{env}"])
    if "distrl" in systems:
        for key in ("final_return", "det_eval"):
            out[f"tasks_at_tianshou_{key}"] = sum(
                out[f"distrl_{key}_{env}"] >= TIANSHOU_1M[env] for env in envs)
    return out


if __name__ == "__main__":
    need("stable_baselines3")
    main()
