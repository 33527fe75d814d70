"""What bench/league_kuhn.py and bench/league_leduc.py share: a league's main agent on an
OpenSpiel poker game, its exact NashConv (OpenSpiel's exploitability, logged by the
league's evaluations) over wall time and over moves, and OpenSpiel's tabular CFR+
(average policy) in the same run for reference.

Each script gives its game, its LeagueConfig and its defaults; each seed's checkpoint and
metrics go to bench/out/runs/league_<game>_<seed>, the curves to
bench/out/league_<game>.json (for bench/plot_league.py; the first seed's). A JSON line
per seed: for the main agent's policy (nash_conv_*) and, where the config sets
league_eval_average_window, its average over its last evaluations (avg_nash_conv_*): the
curve's first, best and last values, its median over the last 60 s, the time it first
went below each level (null: never), its value at the first evaluation after ``--moves``
moves (``*_at_<N>_moves``: a figure that compares across days, when this machine's speed
does not), and ``avg_nash_conv_final``: the NashConv of the average policy the
checkpoint saved, recomputed from it as ``distrl eval RUN --policy average`` does (the
policy a user takes away). The last line is JSON: CFR+'s figures and the median and
worst over the seeds of ``avg_nash_conv_final`` and ``avg_nash_conv_at_<N>_moves``.
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
               ) -> tuple[dict[str, list[tuple[float, float]]], Path]:
    """{"policy": (seconds, NashConv of main_0) at each of the league's evaluations,
    "average": the same for its average policy (league_eval_average_window), and
    "policy_moves" and "average_moves": the same against moves}, and the run's folder."""
    from distrl import RunConfig, train_league

    logdir = OUT / f"runs/league_{game}_{seed}"
    shutil.rmtree(logdir, ignore_errors=True)
    train_league(config, RunConfig(env=f"openspiel:{game}", seed=seed,
                                   max_env_steps=10**9, max_time_s=seconds,
                                   logdir=str(logdir), progress=False,
                                   num_torch_threads=torch_threads))
    curves: dict[str, list[tuple[float, float]]] = {
        "policy": [], "average": [], "policy_moves": [], "average_moves": []}
    for line in (logdir / "metrics.jsonl").read_text().splitlines():
        row = json.loads(line)
        for name, key in (("policy", "league/nash_conv/main_0"),
                          ("average", "league/nash_conv_avg/main_0")):
            if key in row:
                curves[name].append((row["time/total_s"], row[key]))
                curves[f"{name}_moves"].append((row["env/steps_total"], row[key]))
    return curves, logdir


def saved_average_nash_conv(logdir: Path) -> float | None:
    """The NashConv of the average policy the checkpoint saved (None: it saved none), as
    ``distrl eval RUN --policy average`` reports it."""
    from distrl.core.checkpoint import Checkpoint
    from distrl.games.scoring import evaluate_league

    if not (Checkpoint(logdir).path / "average").is_dir():
        return None
    return evaluate_league(logdir, policy="average", games=2)["nash_conv"]


def at_moves(curve: list[tuple[float, float]], moves: float) -> float | None:
    """The value at the first evaluation at or after ``moves`` moves (None: the run
    ended before)."""
    return next((v for m, v in curve if m >= moves), None)


def over_seeds(rows: list[dict[str, Any]], keys: list[str]) -> dict[str, float | None]:
    """Median and worst (highest NashConv) over the seeds of each key; None when a seed
    has no value (its run never reached it)."""
    out: dict[str, float | None] = {}
    for key in keys:
        values = [row.get(key) for row in rows]
        known = None not in values and bool(values)
        out[f"{key}_median"] = statistics.median(values) if known else None
        out[f"{key}_worst"] = max(values) if known else None
    return out


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
         cfr_seconds: float, moves: int, torch_threads: int = 1) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=seconds)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--moves", type=int, default=moves,
                    help="the moves-bounded figure's budget (avg_nash_conv_at_<N>_moves)")
    ap.add_argument("--cfr-seconds", type=float, default=cfr_seconds)
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    rows, plotted = [], {}
    for seed in args.seeds:
        curves, logdir = run_distrl(game, config, args.seconds, seed, torch_threads)
        plotted = plotted or curves  # the first seed's
        row: dict[str, Any] = {"game": game, "seconds": args.seconds, "seed": seed,
                               "evaluations": len(curves["policy"])}
        for name, prefix in (("policy", "nash_conv"), ("average", "avg_nash_conv")):
            if curves[name]:
                row.update(summarize(curves[name], prefix, levels))
                row[f"{prefix}_at_{args.moves}_moves"] = at_moves(curves[f"{name}_moves"],
                                                                  args.moves)
        row["avg_nash_conv_final"] = saved_average_nash_conv(logdir)
        rows.append(row)
        print(json.dumps(row), flush=True)
    cfr_curve = run_cfr_plus(game, args.cfr_seconds)
    (OUT / f"league_{game}.json").write_text(json.dumps({**plotted, "cfr": cfr_curve}))
    out = {"game": game, "seconds": args.seconds, "moves": args.moves, "seeds": args.seeds,
           "cfr_plus_iterations": len(cfr_curve), "cfr_plus_nash_conv_last": cfr_curve[-1][1]}
    for level in levels:
        out[f"cfr_plus_s_below_{level}"] = first_below(cfr_curve, level)
    out.update(over_seeds(rows, ["avg_nash_conv_final", f"avg_nash_conv_at_{args.moves}_moves",
                                 "nash_conv_last"]))
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
