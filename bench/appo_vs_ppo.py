"""APPO against PPO on the same runners: seconds of training (and env steps) from the
start to a tuned task's threshold (a mean-100 return of 475 on CartPole-v1, 1,000 on
Hopper-v5), each with its tuned entry of that name (distrl/tuned.py: TUNED for PPO,
TUNED_APPO for APPO), in process and on 2 Ray env runners; and PPO with ``overlap`` on
2 Ray runners (its runners sample the next batch while the learner trains: the same one
update of lag as APPO's, without V-trace), which tells what the lag costs from what
V-trace does about it.

Every trial runs in a fresh subprocess, interleaved by seed so that machine noise hits
all of them alike; Ray's start-up is reported apart from the training time. Prints one JSON
line per trial, then the summary as the last line: each system's median (time, env steps,
the share of the time its learner spent updating, and its seconds per 100k env steps), and
``appo_to_ppo_wall_time`` (median APPO time / median PPO time on 2 Ray runners; the
in-process ratio beside it, and ``ppo_overlap_to_ppo_wall_time``). Curves go to
bench/out/appo_vs_ppo_curves.json.

    python bench/appo_vs_ppo.py [--task cartpole|hopper] [--seeds 0 1 2] [--max-steps N]
"""

from __future__ import annotations

import shutil
import statistics
import time
from pathlib import Path

from _trials import cli, column, per_seed

OUT = Path(__file__).parent / "out"
SYSTEMS = ("ppo", "appo", "ppo_ray2", "appo_ray2", "ppo_overlap_ray2")


def run(task: str, algo: str, seed: int, runners: int, max_steps: int, logdir: Path,
        overlap: bool = False) -> dict:
    from dataclasses import replace

    from distrl import RunConfig
    from distrl.core.metrics import read_jsonl
    from distrl.registry import ALGORITHMS
    from distrl.tuned import tuned

    shutil.rmtree(logdir, ignore_errors=True)  # metrics.jsonl appends: start clean
    t = tuned(task, algo)
    config = t.for_runners(runners)  # the entry's sub-envs in total, in process or over 2
    config = replace(config, overlap=True) if overlap else config
    t0 = time.perf_counter()
    r = ALGORITHMS[algo].train()(config, RunConfig(
        env=t.env, seed=seed, stop_return=t.stop_return, max_env_steps=max_steps,
        logdir=str(logdir), progress=False))
    wall = time.perf_counter() - t0
    rows = read_jsonl(logdir / "metrics.jsonl")
    learn_s = sum(x["time/learn_s"] for x in rows)  # what no overlap can hide
    return {
        "reached": r["stopped_by"] == "stop_return", "train_s": r["time/total_s"],
        "env_steps": r["env/steps_total"], "iterations": r["iteration"],
        "ray_start_s": r["ray_start_s"], "setup_s": wall - r["time/total_s"] - r["ray_start_s"],
        "policy_lag_mean": statistics.fmean(x.get("learner/policy_lag", 0.0) for x in rows),
        "learn_share": learn_s / r["time/total_s"],
        "learn_s_per_100k_steps": learn_s / r["env/steps_total"] * 1e5,
        "curve": [(x["time/total_s"], x["env/episode_return_mean"]) for x in rows],
    }


def one(system: str, seed: int, task: str, max_steps: int, threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    algo = system.split("_")[0]
    result = run(task, algo, seed, 2 if system.endswith("_ray2") else 0, max_steps,
                 OUT / f"runs/appo_vs_ppo_{task}_{system}_{seed}", "_overlap" in system)
    return {"system": system, "seed": seed, "task": task, "threads": threads, **result}


def summary(trials: list[dict]) -> dict:
    med = {s: statistics.median(column(trials, s, "train_s")) for s in SYSTEMS}
    steps = {s: statistics.median(column(trials, s, "env_steps")) for s in SYSTEMS}
    return {
        **{f"{s}_median_s": med[s] for s in SYSTEMS},
        **{f"{s}_median_env_steps": steps[s] for s in SYSTEMS},
        **{f"{s}_median_{k}": statistics.median(column(trials, s, k)) for s in SYSTEMS
           for k in ("learn_share", "learn_s_per_100k_steps")},
        "appo_to_ppo_wall_time": med["appo_ray2"] / med["ppo_ray2"],
        "appo_to_ppo_wall_time_in_process": med["appo"] / med["ppo"],
        "ppo_overlap_to_ppo_wall_time": med["ppo_overlap_ray2"] / med["ppo_ray2"],
        "all_reached": all(t["reached"] for t in trials),
        "ray_start_s": column(trials, "appo_ray2", "ray_start_s")
                       + column(trials, "ppo_ray2", "ray_start_s"),
        "per_seed": per_seed(trials, SYSTEMS),
        "task": trials[0]["task"],
        "threads": trials[0]["threads"],
    }


if __name__ == "__main__":
    cli(__file__, SYSTEMS, "appo_vs_ppo_curves.json", one, summary, task="cartpole",
        max_steps=300_000, threads=1)
