"""Every algorithm's tuned CartPole / connect-four run on one node and on a simulated
three-node cluster (ray.cluster_utils on this machine: a head without CPUs for the driver,
two worker nodes of 2 CPUs, `--placement-strategy SPREAD`), per seed: does it reach the
tuned entry's threshold, in how many env steps, and in how many seconds.

PPO and DD-PPO are deterministic for a seed, so their two runs must take exactly the same
env steps; Ape-X and the league are asynchronous, so theirs must fall within each other's
seed spread. Each trial is a fresh subprocess. One JSON line per trial, then the summary.

    python bench/multinode.py [--seeds 0 1 2] [--algos ppo ddppo apex league]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

OUT = Path(__file__).parent / "out"
ALGOS = ("ppo", "ddppo", "apex", "league")
MODES = ("one_node", "three_nodes")


def trial(algo: str, mode: str, seed: int) -> dict:
    import ray
    import torch

    from distrl import RunConfig, train_apex, train_ddppo, train_league, train_ppo
    from distrl.tuned import tuned

    torch.set_num_threads(1)
    cluster = None
    if mode == "three_nodes":
        from ray.cluster_utils import Cluster

        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
        for _ in range(2):
            cluster.add_node(num_cpus=2)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address, log_to_driver=False)
    t = tuned("connect_four" if algo == "league" else "cartpole", algo)
    logdir = OUT / f"runs/multinode_{algo}_{mode}_{seed}"
    shutil.rmtree(logdir, ignore_errors=True)
    run = RunConfig(env=t.env, seed=seed, stop_return=t.stop_return, logdir=str(logdir),
                    max_env_steps=t.env_step_budget * 2, progress=False,
                    placement_strategy="SPREAD" if cluster else None)
    if algo == "apex":  # the learning test's greedy evaluation
        run = replace(run, stop_on="eval", evaluation_interval=1, evaluation_duration=20)
    config = {"ppo": lambda: t.for_runners(2), "ddppo": lambda: t.config,
              "apex": lambda: t.config,
              "league": lambda: replace(t.config, num_env_runners=2,
                                        num_cpus_per_env_runner=1.0)}[algo]()
    train = {"ppo": train_ppo, "ddppo": train_ddppo, "apex": train_apex,
             "league": train_league}[algo]
    t0 = time.perf_counter()
    result = train(config, run)
    wall_s = time.perf_counter() - t0
    ray.shutdown()
    if cluster:
        cluster.shutdown()
    score = (result.get("league/win_rate/main_0_vs_random") if algo == "league" else
             result.get("eval/episode_return_mean") if algo == "apex" else
             result.get("env/episode_return_mean"))
    return {"algo": algo, "mode": mode, "seed": seed,
            "reached": result["stopped_by"] in ("stop_return", "stop_win_rate"),
            "env_steps": result["env/steps_total"], "score": score, "wall_s": round(wall_s, 1)}


def summary(trials: list[dict]) -> dict:
    out = {}
    for algo in sorted({t["algo"] for t in trials}):
        for mode in MODES:
            rows = [t for t in trials if t["algo"] == algo and t["mode"] == mode]
            out[f"{algo}_{mode}_env_steps"] = [t["env_steps"] for t in rows]
            out[f"{algo}_{mode}_reached"] = [t["reached"] for t in rows]
        one, three = (out[f"{algo}_{m}_env_steps"] for m in MODES)
        out[f"{algo}_identical_steps"] = one == three
        out[f"{algo}_within_spread"] = (
            all(out[f"{algo}_{m}_reached"] == [True] * len(one) for m in MODES)
            and min(one) <= sorted(three)[len(three) // 2] <= max(one)
            and min(three) <= sorted(one)[len(one) // 2] <= max(three))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--algos", nargs="+", choices=ALGOS, default=list(ALGOS))
    ap.add_argument("--one", nargs=2, metavar=("ALGO", "MODE"))
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(trial(*args.one, args.seed)))
        return
    trials = []
    for algo in args.algos:
        for seed in args.seeds:
            for mode in MODES:
                out = subprocess.run([sys.executable, __file__, "--one", algo, mode,
                                      "--seed", str(seed)],
                                     capture_output=True, text=True, check=True)
                trials.append(json.loads(out.stdout.strip().splitlines()[-1]))
                print(json.dumps(trials[-1]), flush=True)
    print(json.dumps(summary(trials)))


if __name__ == "__main__":
    main()
