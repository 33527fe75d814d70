"""What bench/league_kuhn.py and bench/league_leduc.py share: a league's main agent on an
OpenSpiel poker game, its exact NashConv (OpenSpiel's exploitability, logged by the
league's evaluations) over wall time, and OpenSpiel's tabular CFR+ (average policy) in
the same run for reference.

Each script gives its game, its LeagueConfig and its defaults; the league's checkpoint
and metrics go to bench/out/runs/league_<game>_<seed>, the curves to
bench/out/league_<game>.json (for bench/plot_league.py). The last line is JSON: for the
main agent's policy (nash_conv_*) and, where the config sets league_eval_average_window,
its average over its last evaluations (avg_nash_conv_*): the curve's first, best and last
values, its median over the last 60 s (the bar), the time it first went below each level
(null: never); and CFR+'s.
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


def run_distrl(game: str, config: Any, seconds: float, seed: int, torch_threads: int = 1
               ) -> dict[str, list[tuple[float, float]]]:
    """{"policy": (seconds, NashConv of main_0) at each of the league's evaluations,
    "average": the same for its average policy (league_eval_average_window)}."""
    from distrl import RunConfig, train_league

    logdir = OUT / f"runs/league_{game}_{seed}"
    shutil.rmtree(logdir, ignore_errors=True)
    train_league(config, RunConfig(env=f"openspiel:{game}", seed=seed,
                                   max_env_steps=10**9, max_time_s=seconds,
                                   logdir=str(logdir), progress=False,
                                   num_torch_threads=torch_threads))
    curves: dict[str, list[tuple[float, float]]] = {"policy": [], "average": []}
    for line in (logdir / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        for name, key in (("policy", "league/nash_conv/main_0"),
                          ("average", "league/nash_conv_avg/main_0")):
            if key in row:
                curves[name].append((row["time/total_s"], row[key]))
    return curves


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
         cfr_seconds: float, torch_threads: int = 1) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=seconds)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cfr-seconds", type=float, default=cfr_seconds)
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    curves = run_distrl(game, config, args.seconds, args.seed, torch_threads)
    cfr_curve = run_cfr_plus(game, args.cfr_seconds)
    (OUT / f"league_{game}.json").write_text(json.dumps({**curves, "cfr": cfr_curve}))
    out = {"game": game, "seconds": args.seconds, "seed": args.seed,
           "evaluations": len(curves["policy"]), "cfr_plus_iterations": len(cfr_curve),
           "cfr_plus_nash_conv_last": cfr_curve[-1][1]}
    for level in levels:
        out[f"cfr_plus_s_below_{level}"] = first_below(cfr_curve, level)
    for name, prefix in (("policy", "nash_conv"), ("average", "avg_nash_conv")):
        if curves[name]:
            out.update(summarize(curves[name], prefix, levels))
    print(json.dumps(out))


def summarize(curve: list[tuple[float, float]], prefix: str, levels: tuple[float, ...]
              ) -> dict[str, float | None]:
    """First, best, last, the median over the last 60 s (the bar), first times below."""
    values, end = [v for _, v in curve], curve[-1][0]
    out: dict[str, float | None] = {
        f"{prefix}_first": values[0], f"{prefix}_best": min(values),
        f"{prefix}_last": values[-1],
        f"{prefix}_median_last_60s": statistics.median(v for t, v in curve if t >= end - 60)}
    for level in levels:
        out[f"{prefix}_s_below_{level}"] = first_below(curve, level)
    return out
