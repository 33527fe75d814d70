"""A league growing to 256 policies on 4 Ray env runners: throughput and runner memory.

One main agent on connect four is frozen every iteration (snapshot_steps = its batch), so
the league gains one policy per iteration; its games are self-play or PFSP over every
snapshot, each read by the runners from their node's policy store. Measured per
iteration: env steps/s and matches/s (the league's own metrics, sampling and learning),
and at 8 and at 256 policies the USS of every runner (bench/league_memory.py's measure:
object-store pages left out, the store is shared).

    python bench/league_scale.py [--policies 256] [--runners 4] [--batch 2048]
                                 [--distinct-only]

First, league_distinct.py's measure: matches/s against 64 distinct opponents of one
architecture vs against one (distinct_opponents_ratio_64, in process, and _ray in a
Ray runner reading the policy store); --distinct-only stops there.

The last line is JSON: steps_per_s_p8, steps_per_s_p256 (means over the 16 iterations
from 8 policies on, and the last 16 up to 256), throughput_ratio_p256_p8,
matches_per_s_p8/_p256, matches_ratio, runner_uss_mb_p8/_p256 (per runner) and
runner_uss_growth_mb (mean over runners).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from league_distinct import measure as distinct_opponents
from league_memory import usage  # the same measure as the store benchmark

OUT = Path(__file__).parent / "out"
WINDOW = 16  # iterations averaged per size: one iteration's rate varies by +-15% here


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--policies", type=int, default=256)
    ap.add_argument("--runners", type=int, default=4)
    # The tuned connect_four league's batch. With 512, an iteration took ~0.15 s here and
    # the 16-iteration windows' means swung by +-0.3 between runs of the same code.
    ap.add_argument("--batch", type=int, default=2048, help="main agent moves per iteration")
    ap.add_argument("--distinct-only", action="store_true")
    args = ap.parse_args()
    distinct = distinct_opponents()
    print(json.dumps(distinct), flush=True)
    if args.distinct_only:
        return

    import ray

    from distrl import LeagueConfig, LeagueRules, RunConfig
    from distrl.league.train import start_league

    config = LeagueConfig(
        rules=LeagueRules(num_main_exploiters=0, num_league_exploiters=0,
                          snapshot_steps=args.batch),
        train_batch_size=args.batch, minibatch_size=args.batch, num_epochs=1,
        use_kl_loss=False, num_envs=16, league_eval_interval=0,
        num_env_runners=args.runners, num_cpus_per_env_runner=0.25,
        num_cpus_per_learner=0.25)
    logdir = OUT / "runs/league_scale"
    shutil.rmtree(logdir, ignore_errors=True)
    logdir.mkdir(parents=True)
    run = RunConfig(env="pettingzoo:connect_four_v3", logdir=str(logdir), progress=False)
    league = start_league(config, run)
    pids = ray.get([a.__ray_call__.remote(lambda self: os.getpid())
                    for a in league.workers.runners.actors])
    rows, memory = [], {}
    try:
        while True:
            m = league.iterate()
            p = m["league/num_policies"]
            rows.append({"policies": p, "steps_per_s": m["env/steps_per_s"],
                         "matches_per_s": m["league/matches_per_s"]})
            print(json.dumps(rows[-1]), flush=True)
            if p in (8, args.policies):
                memory[p] = [usage(pid)["uss_mb"] for pid in pids]
            if p >= args.policies:
                break
    finally:
        league.close()

    def around(p: int, key: str) -> float:
        """Mean over the WINDOW iterations from p on (for the largest: up to p)."""
        near = ([r for r in rows if r["policies"] >= p][:WINDOW] if p < args.policies
                else rows[-WINDOW:])
        return statistics.mean(r[key] for r in near)

    hi = args.policies
    out = {**distinct, "runners": args.runners, "iterations": len(rows),
           "steps_per_s_p8": around(8, "steps_per_s"),
           f"steps_per_s_p{hi}": around(hi, "steps_per_s"),
           "matches_per_s_p8": around(8, "matches_per_s"),
           f"matches_per_s_p{hi}": around(hi, "matches_per_s"),
           "runner_uss_mb_p8": memory[8], f"runner_uss_mb_p{hi}": memory[hi]}
    out[f"throughput_ratio_p{hi}_p8"] = out[f"steps_per_s_p{hi}"] / out["steps_per_s_p8"]
    out[f"matches_ratio_p{hi}_p8"] = out[f"matches_per_s_p{hi}"] / out["matches_per_s_p8"]
    out["runner_uss_growth_mb"] = statistics.mean(
        b - a for a, b in zip(memory[8], memory[hi], strict=True))
    (OUT / "league_scale.json").write_text(json.dumps({"rows": rows, "summary": out}))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
