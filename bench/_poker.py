"""What bench/league_kuhn.py and bench/league_leduc.py share: a league's main agent on an
OpenSpiel poker game, its exact NashConv (OpenSpiel's exploitability, logged by the
league's evaluations) over wall time, and OpenSpiel's tabular CFR+ (average policy) in
the same run for reference.

Each script gives its game, its LeagueConfig and its defaults; the league's checkpoint
and metrics go to bench/out/runs/league_<game>_<seed>, the curves to
bench/out/league_<game>.json (for bench/plot_league.py). The last line is JSON: the
curve's first, best and last values, its median over the last 60 s (the bar), the time
it first went below each level (null: never), and CFR+'s.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

OUT = Path(__file__).parent / "out"


def run_distrl(game: str, config: Any, seconds: float, seed: int
               ) -> list[tuple[float, float]]:
    """(seconds, NashConv of main_0) at each of the league's evaluations."""
    from distrl import RunConfig, train_league

    logdir = OUT / f"runs/league_{game}_{seed}"
    shutil.rmtree(logdir, ignore_errors=True)
    train_league(config, RunConfig(env=f"openspiel:{game}", seed=seed,
                                   max_env_steps=10**9, max_time_s=seconds,
                                   logdir=str(logdir), progress=False))
    curve = []
    for line in (logdir / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        if "league/nash_conv/main_0" in row:
            curve.append((row["time/total_s"], row["league/nash_conv/main_0"]))
    return curve


def run_cfr_plus(game: str, seconds: float) -> list[tuple[float, float]]:
    """CFR+'s average policy: (solver seconds, NashConv) per iteration, for at most
    ``seconds`` of solving (the exact evaluations are not timed)."""
    import pyspiel
    from open_spiel.python.algorithms import cfr, exploitability

    loaded = pyspiel.load_game(game)
    solver = cfr.CFRPlusSolver(loaded)
    spent, curve = 0.0, []
    while spent < seconds:
        t = time.perf_counter()
        solver.evaluate_and_update_policy()
        spent += time.perf_counter() - t
        curve.append((spent, exploitability.nash_conv(loaded, solver.average_policy())))
    return curve


def first_below(curve: list[tuple[float, float]], level: float) -> float | None:
    return next((t for t, v in curve if v < level), None)


def main(game: str, config: Any, seconds: float, levels: tuple[float, ...],
         cfr_seconds: float) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=seconds)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cfr-seconds", type=float, default=cfr_seconds)
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    distrl = run_distrl(game, config, args.seconds, args.seed)
    cfr_curve = run_cfr_plus(game, args.cfr_seconds)
    (OUT / f"league_{game}.json").write_text(json.dumps({"distrl": distrl, "cfr": cfr_curve}))
    values = [v for _, v in distrl]
    out = {"game": game, "seconds": args.seconds, "seed": args.seed,
           "evaluations": len(distrl), "nash_conv_first": values[0],
           "nash_conv_best": min(values), "nash_conv_last": values[-1],
           "nash_conv_median_last_60s": statistics.median(
               v for t, v in distrl if t >= distrl[-1][0] - 60),
           "cfr_plus_iterations": len(cfr_curve), "cfr_plus_nash_conv_last": cfr_curve[-1][1]}
    for level in levels:
        out[f"distrl_s_below_{level}"] = first_below(distrl, level)
        out[f"cfr_plus_s_below_{level}"] = first_below(cfr_curve, level)
    print(json.dumps(out))
