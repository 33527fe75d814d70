"""Elo over training time against a fixed strength ladder: the snapshots of a one-learner
connect-four league (bench/league_connect4_mcts.py's run by default) play the random
player and OpenSpiel's MCTSBot with 50 and 200 simulations, neighbouring snapshots play
each other, and the bots play their neighbours on the ladder (random < MCTS 50 < 200 <
800). One Bradley-Terry fit of all those games (league.rules.fit_elo, random at 0) rates
everyone on one scale, so a snapshot's Elo says how far it is from each bot.

    python bench/league_connect4_mcts.py    # trains and saves the league
    python bench/league_elo.py [RUN] [--games 40] [--seed 0]
    python bench/league_elo.py bench/out/runs/alphazero_c4_0   # an AlphaZero ladder run

Snapshots are taken at doubling indices (1, 2, 4, ...) and the final policy, so the
x axis (training seconds, from the run's metrics) is even on a log scale. A run with a
snapshots/ folder (bench/alphazero_ladder.py keeps one, a checkpoint every few minutes)
is rated from those checkpoints instead, each as its own player, against random and
MCTS 200 and 1,000 (written to bench/out/alphazero_elo.json). Games between
snapshots open with 2 random moves (greedy players would repeat one game otherwise);
games against the bots need none (their rollouts vary). The last line, also written to
bench/out/league_elo.json (alphazero_elo.json) for bench/plot_league.py, is JSON: each
player's Elo, training seconds and moves.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path

HERE = Path(__file__).parent
BOTS = ("random", "mcts:50", "mcts:200", "mcts:800")
SNAPSHOT_BOTS = ("random", "mcts:200", "mcts:1000")  # AlphaZero passes MCTS 200 early


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


def snapshots(run: Path, learner: str
              ) -> tuple[list[str], dict[str, Path], dict[str, tuple[float, int]]]:
    """A run's kept checkpoints (its snapshots/ folder, one per iteration kept): their
    names in training order, directories, and (training seconds, env steps) of each."""
    rows = {}
    for line in (run / "metrics.jsonl").read_text().splitlines():
        r = json.loads(line)
        rows[r["iteration"]] = (r["time/total_s"], r["env/steps_total"])
    dirs = sorted((run / "snapshots").iterdir(), key=lambda d: int(d.name))
    paths = {f"{learner}@{int(d.name)}": d for d in dirs}
    return list(paths), paths, {name: rows[int(d.name)] for name, d in paths.items()}


def pairings(ladder: list[str], bots: tuple[str, ...] = BOTS) -> list[tuple[str, str, int]]:
    """(player, opponent, random opening moves) of every match the fit uses: each player
    against the first three bots, neighbours against each other, and each bot against
    the next weaker."""
    pairs = [(p, bot, 0) for p in ladder for bot in bots[:3]]
    pairs += [(a, b, 2) for a, b in itertools.pairwise(ladder)]
    return pairs + [(bots[k + 1], bots[k], 0) for k in range(len(bots) - 1)]


def play(run: Path, pairs: list[tuple[str, str, int]], games: int, seed: int,
         paths: dict[str, Path] | None = None, learner: str = "main_0"
         ) -> list[tuple[str, str, float, float]]:
    """Every pairing's score; a player named in ``paths`` is that checkpoint's
    ``learner`` (an opponent: run:PATH), any other a policy of the run's checkpoint or a
    bot."""
    from distrl.games.scoring import evaluate_league

    paths = paths or {}
    results = []
    for a, b, opening in pairs:
        t = time.perf_counter()
        ckpt = paths.get(a) or next(iter(paths.values()), run / "checkpoint")
        r = evaluate_league(ckpt, learner if a in paths else a,
                            f"run:{paths[b]}" if b in paths else b, games, seed,
                            opening_moves=opening)
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
    if (run / "snapshots").is_dir():
        ladder, paths, clock = snapshots(run, args.learner)
        bots, name = SNAPSHOT_BOTS, "alphazero_elo"
    else:
        ladder, paths, clock = players(run, args.learner), {}, snapshot_clock(run, args.learner)
        bots, name = BOTS, "league_elo"
    results = play(run, pairings(ladder, bots), args.games, args.seed, paths, args.learner)
    elo = fit_elo(results, anchor="random")
    out = {"games_per_pairing": args.games, "elo": elo, "bots": list(bots),
           "train_s": {p: clock[p][0] for p in ladder},
           "env_steps": {p: clock[p][1] for p in ladder}}
    (HERE / f"out/{name}.json").write_text(json.dumps(out))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
