"""AlphaZero's strength ladder: train the tuned connect-four entry for ``--train-s``
seconds (no early stop), then play it, as the bare greedy network and inside PUCT with
``--search`` simulations a move, ``--games`` games a rung (half per seat, the first
``--opening-moves`` moves of each game random, counted as distinct_games) against:
the random player; the one-ply win/block bot (random other moves); OpenSpiel's MCTS with
200 and 1,000 simulations (one random rollout a leaf); alpha-beta to depth 5 with a
win/block/centre heuristic (bench/board_bots.py). Games are paired (each random opening
played once from each seat) and both searchers start every move afresh, as OpenSpiel's
MCTSBot does (``--search-reuse`` lets distrl's keep the last move's subtree, its visits
then beyond ``--search``); each rung reports Wilson's 95% interval of its win rate
(``ci95_low_<rung>``, ``ci95_high_<rung>``) and its distinct games. Then a tic-tac-toe
check: a short AlphaZero run on tic-tac-toe (``--ttt-train-s``) searching as above plays 100 games
against a perfect minimax player, 50 per seat (the first move random), and should lose
none.

    python bench/alphazero_ladder.py [--train-s 3600] [--seeds 0] [--games 200]
        [--search 200] [--ttt-train-s 120] [--skip-train RUN] [--set FIELD=JSON ...]
        [--only search200_vs_mcts1000 ...]
    python bench/alphazero_ladder.py --train-s 20 --games 4 --ttt-train-s 10   # smoke

``--skip-train RUN`` ladders a saved connect-four run instead of training (one seed);
``--snapshot-every N`` keeps the checkpoint (without its replay) every N iterations in
the run's snapshots/ (200, about every 5 minutes here), for an Elo over training time;
``--ttt-train-s 0`` skips the tic-tac-toe check; ``--set`` replaces a field of the tuned
AlphaZeroConfig (as bench/league_connect4_mcts.py). Runs go to bench/out/runs/. One JSON
line per rung as it ends; the last line holds every rate as
``win_rate_<net|search200>_vs_<random|oneply|mcts200|mcts1000|alphabeta5>`` (the median
over seeds, with every seed on every rung; ``per_seed`` lists each), the draw and loss
rates alike, the win rate as the
first and as the second mover (``first_seat_win_rate_...``, ``second_seat_...``), and
``ttt_losses_vs_perfect``. ``--only search200_vs_mcts1000 ...`` plays those rungs alone.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from league_connect4_mcts import OUT, configured, train

RUNGS = {"random": "random", "oneply": "board_bots:oneply", "mcts200": "mcts:200",
         "mcts1000": "mcts:1000", "alphabeta5": "board_bots:alphabeta5"}
"""Rung name in the metrics -> opponent spec (board_bots imports from this folder)."""
TTT_ENV = "pettingzoo:tictactoe_v3"  # the board bots read PettingZoo's planes
TTT_GAMES = 100


def rung(checkpoint: str, opponent: str, games: int, seed: int, opening_moves: int,
         search: int, reuse: bool = False) -> dict[str, Any]:
    """One rung: the library's evaluation of a game run against an opponent spec."""
    import board_bots

    from distrl.games.scoring import evaluate_league

    board_bots.seed(seed)  # the bots' own random moves repeat with the seed
    t = time.perf_counter()
    r = evaluate_league(checkpoint, "main_0", opponent, games, seed,
                        opening_moves=opening_moves, nash_conv_max_states=0, search=search,
                        search_reuse=reuse)
    r["eval_s"] = round(time.perf_counter() - t, 1)
    print(json.dumps(r), flush=True)
    return r


def ladder(checkpoint: str, args: argparse.Namespace, seed: int) -> dict[str, Any]:
    """Every rung for the bare network, then searched (or those ``args.only`` names, in
    its order); the win rate also by seat (``first_seat_...``: the first mover's edge)."""
    games = [(f"{player}_vs_{name}", search, spec)
             for player, search in (("net", 0), (f"search{args.search}", args.search))
             for name, spec in RUNGS.items()]
    if args.only:
        unknown = set(args.only) - {game for game, _, _ in games}
        if unknown:
            raise SystemExit(f"--only {sorted(unknown)}: not a rung; choose from "
                             f"{[game for game, _, _ in games]}")
        games = sorted((g for g in games if g[0] in args.only), key=lambda g: args.only.index(g[0]))
    out: dict[str, Any] = {}
    for game, search, spec in games:
        r = rung(checkpoint, spec, args.games, seed, args.opening_moves, search,
                 args.search_reuse)
        for key in ("win_rate", "draw_rate", "loss_rate", "distinct_games"):
            out[f"{key}_{game}"] = r[key]
        out[f"ci95_low_{game}"], out[f"ci95_high_{game}"] = r["win_rate_ci95"]
        for order, rate in zip(("first", "second"), r["win_rate_by_seat"].values(), strict=True):
            out[f"{order}_seat_win_rate_{game}"] = rate
    return out


def ttt_check(args: argparse.Namespace, seed: int) -> dict[str, Any]:
    """A short AlphaZero run on tic-tac-toe, then 100 searched games against perfect
    play; the first move random (every first move draws with perfect play)."""
    from distrl import AlphaZeroConfig, ModelConfig, RunConfig, train_alphazero

    logdir = OUT / f"runs/alphazero_ttt_{seed}"
    shutil.rmtree(logdir, ignore_errors=True)
    config = AlphaZeroConfig(model=ModelConfig(hiddens=(64, 64), activation="relu",
                                               vf_share_layers=True),
                             num_games=32, num_simulations=50, learning_starts=512,
                             train_batch_size=128, moves_per_iteration=256, eval_interval=0,
                             # Two sampled moves, not ten (a whole game here): the outcomes
                             # must be those of good play for the value head to learn them.
                             temperature_moves=2, value_target_mix=0.5)
    result = train_alphazero(config, RunConfig(env=TTT_ENV, seed=seed, max_env_steps=10**9,
                                               max_time_s=args.ttt_train_s,
                                               logdir=str(logdir), progress=False))
    r = rung(result["checkpoint"], "board_bots:perfect", TTT_GAMES, seed, 1, args.search,
             args.search_reuse)
    return {"ttt_losses_vs_perfect": round(r["loss_rate"] * r["games"]),
            "ttt_draw_rate_vs_perfect": r["draw_rate"],
            "ttt_distinct_games": r["distinct_games"], "ttt_env_steps": result["env/steps_total"]}


def median(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each figure's median over the seeds (every seed plays every rung)."""
    keys = [k for k in rows[0] if isinstance(rows[0][k], (int, float))]
    return {k: round(statistics.median(r[k] for r in rows), 4) for k in keys}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train-s", type=float, default=3600.0)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--games", type=int, default=200, help="per rung, half in each seat")
    ap.add_argument("--search", type=int, default=200, help="simulations a searched move")
    ap.add_argument("--opening-moves", type=int, default=2, help="random first moves")
    ap.add_argument("--search-reuse", action="store_true",
                    help="distrl's search keeps the last move's subtree (OpenSpiel's does not)")
    ap.add_argument("--ttt-train-s", type=float, default=120.0, help="0: no tic-tac-toe check")
    ap.add_argument("--skip-train", metavar="RUN", help="ladder this saved run instead")
    ap.add_argument("--snapshot-every", type=int, default=200, metavar="N",
                    help="keep the checkpoint every N iterations (0: only the last)")
    ap.add_argument("--set", action="append", default=[], metavar="FIELD=JSON")
    ap.add_argument("--only", nargs="+", metavar="PLAYER_vs_RUNG",
                    help="play these rungs only, in this order (e.g. search200_vs_mcts1000)")
    args = ap.parse_args()
    seeds = args.seeds[:1] if args.skip_train else args.seeds
    rows = []
    for seed in seeds:
        row: dict[str, Any] = {"seed": seed}
        checkpoint = args.skip_train
        if checkpoint is None:
            config = configured("alphazero", args.set)
            checkpoint, trained = train("alphazero", config, seed, args.train_s, "alphazero_c4",
                                        args.snapshot_every)
            row.update(trained)
            print(json.dumps({"seed": seed, "trained": trained}), flush=True)
        row.update(ladder(str(Path(checkpoint)), args, seed))
        if args.ttt_train_s > 0:
            row.update(ttt_check(args, seed))
        rows.append(row)
    print(json.dumps({**median(rows), "seeds": seeds, "search": args.search,
                      "games": args.games, "opening_moves": args.opening_moves,
                      "paired_openings": True, "search_reuse": args.search_reuse,
                      "overrides": args.set, "per_seed": rows}))


if __name__ == "__main__":
    main()
