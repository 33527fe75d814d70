"""Elo over training time against a fixed strength ladder: the snapshots of a one-learner
connect-four league (bench/league_connect4_mcts.py's run by default) play the random
player and OpenSpiel's MCTSBot with 50 and 200 simulations, neighbouring snapshots play
each other, and the bots play their neighbours on the ladder (random < MCTS 50 < 200 <
800). One Bradley-Terry fit of all those games (league.rules.fit_elo, random at 0) rates
everyone on one scale, so a snapshot's Elo says how far it is from each bot.

    python bench/league_connect4_mcts.py    # trains and saves the league
    python bench/league_elo.py [RUN] [--games 40] [--seed 0]

Snapshots are taken at doubling indices (1, 2, 4, ...) and the final policy, so the
x axis (training seconds, from the run's metrics) is even on a log scale. Games between
snapshots open with 2 random moves (greedy players would repeat one game otherwise);
games against the bots need none (their rollouts vary). The last line, also written to
bench/out/league_elo.json for bench/plot_league.py, is JSON: each player's Elo, training
seconds and moves.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

HERE = Path(__file__).parent
BOTS = ("random", "mcts:50", "mcts:200", "mcts:800")


def snapshot_clock(run: Path, learner: str) -> dict[str, tuple[float, int]]:
    """(training seconds, env steps) when each snapshot of ``learner`` was taken and at
    the end, from the metrics' snapshot counter (the league must have this one learner)."""
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    clock: dict[str, tuple[float, int]] = {}
    taken = 0
    for r in rows:  # snapshots_taken counts one iteration's snapshots
        for _ in range(int(r.get("league/snapshots_taken", 0))):
            taken += 1
            clock[f"{learner}@{taken}"] = (r["time/total_s"], r["env/steps_total"])
    clock[learner] = (rows[-1]["time/total_s"], rows[-1]["env/steps_total"])
    return clock


def players(run: Path, learner: str) -> list[str]:
    from distrl.core.checkpoint import Checkpoint

    league = Checkpoint(run / "checkpoint").json("progress", "progress.json")["algo"]["league"]
    learners = [p["id"] for p in league["players"] if p["parent"] is None]
    if learners != [learner]:
        raise SystemExit(f"{run}: learners {learners}; this ladder reads a league of "
                         f"{learner!r} alone (its snapshot counter is {learner}'s).")
    count = max(p["snapshots"] for p in league["players"] if p["id"] == learner)
    picked, k = [], 1
    while k <= count:
        picked.append(f"{learner}@{k}")
        k *= 2
    return [*picked, learner]


def pairings(ladder: list[str]) -> list[tuple[str, str, int]]:
    """(player, opponent, random opening moves) of every match the fit uses."""
    pairs = [(p, bot, 0) for p in ladder for bot in BOTS[:3]]
    pairs += [(a, b, 2) for a, b in itertools.pairwise(ladder)]
    return pairs + [(BOTS[k + 1], BOTS[k], 0) for k in range(len(BOTS) - 1)]


def play(run: Path, pairs: list[tuple[str, str, int]], games: int, seed: int
         ) -> list[tuple[str, str, float, float]]:
    from distrl.games.scoring import evaluate_league

    results = []
    for a, b, opening in pairs:
        t = time.perf_counter()
        r = evaluate_league(run / "checkpoint", a, b, games, seed, opening_moves=opening)
        score = (r["win_rate"] + 0.5 * r["draw_rate"]) * games
        results.append((a, b, score, float(games)))
        print(json.dumps({"player": a, "opponent": b, "score": score / games,
                          "distinct_games": r["distinct_games"],
                          "s": round(time.perf_counter() - t, 1)}), flush=True)
    return results


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run", nargs="?", default=str(HERE / "out/runs/league_c4_mcts_0"))
    ap.add_argument("--learner", default="main_0")
    ap.add_argument("--games", type=int, default=40, help="per pairing, half in each seat")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    from distrl.league.rules import fit_elo

    run = Path(args.run)
    clock = snapshot_clock(run, args.learner)
    ladder = players(run, args.learner)
    results = play(run, pairings(ladder), args.games, args.seed)
    elo = fit_elo(results, anchor="random")
    out = {"games_per_pairing": args.games, "elo": elo, "bots": list(BOTS),
           "train_s": {p: clock[p][0] for p in ladder},
           "env_steps": {p: clock[p][1] for p in ladder}}
    (HERE / "out/league_elo.json").write_text(json.dumps(out))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
