"""What perfect play scores on a connect-four ladder rung: the solver
(``board_bots:solver``, BitBully's) plays a rung's opponent in the ladder's games
(bench/alphazero_ladder.py: ``--games`` games, half per seat, the first
``--opening-moves`` moves random, the same seeds), so a rung's bar can be read against
the best any agent could be expected to do there. Also the game-theoretic values of
the random openings themselves: the share won, drawn and lost for the first player
under perfect play, over every equally likely opening.

    python bench/connect4_perfect.py [--opponent mcts:1000] [--opening-moves 2]
        [--games 200] [--seed 0]
    python bench/connect4_perfect.py --opponent board_bots:oneply --games 4   # smoke

Prints one JSON line: the solver's win, draw and loss rates (also by seat), the
distinct games, the openings' values and the seconds it took.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from typing import Any

import numpy as np
from _extra import need

GAME = "pettingzoo:connect_four_v3"  # the ladder's env, whose planes the bots read
SOLVER = "board_bots:solver"


def opening_values(plies: int) -> dict[str, float]:
    """Share of the ``plies``-move random openings (each legal move equally likely, as
    the ladder draws them) that perfect play wins, draws or loses for the first player.
    Openings that end the game are redrawn by the ladder; none can in under 7 plies."""
    import board_bots

    game = board_bots.CONNECT_FOUR
    shares = {"win": 0.0, "draw": 0.0, "loss": 0.0}
    for moves in itertools.product(range(game.cols), repeat=plies):
        board, weight = np.zeros(game.rows * game.cols, np.int8), 1.0
        for col in moves:  # from the mover's view: +1 the mover's pieces
            weight /= len(game.legal(board))
            board[game.cell(board, col)] = 1
            board = -board
        mover_value = max(board_bots.column_scores(board).values())
        first_value = mover_value if plies % 2 == 0 else -mover_value
        shares["win" if first_value > 0 else "draw" if first_value == 0 else "loss"] += weight
    return {k: round(v, 4) for k, v in shares.items()}


def play(opponent: str, games: int, seed: int, opening_moves: int) -> dict[str, Any]:
    """The solver against ``opponent`` in the ladder's games (distrl.games.scoring)."""
    import board_bots

    from distrl.games.scoring import outside_policy, play_matches, win_draw_loss, win_rate_by_seat

    board_bots.seed(seed)
    policies = {spec: outside_policy(spec, GAME, {}, seed, 7) for spec in (SOLVER, opponent)}
    results = play_matches(GAME, {}, policies, set(policies), SOLVER, opponent, games, seed,
                           opening_moves)
    rates = win_draw_loss(results, SOLVER, opponent)
    return {"win_rate": float(rates[0]), "draw_rate": float(rates[1]),
            "loss_rate": float(rates[2]),
            "win_rate_by_seat": win_rate_by_seat(results, SOLVER, opponent),
            "distinct_games": len({r.history for r in results})}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--opponent", default="mcts:1000")
    ap.add_argument("--games", type=int, default=200, help="half in each seat")
    ap.add_argument("--opening-moves", type=int, default=2, help="random first moves")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t = time.perf_counter()
    out = {"player": SOLVER, "opponent": args.opponent, "games": args.games,
           "opening_moves": args.opening_moves, "seed": args.seed,
           **play(args.opponent, args.games, args.seed, args.opening_moves),
           "openings_for_first_player": opening_values(args.opening_moves)}
    out["eval_s"] = round(time.perf_counter() - t, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    need("bitbully")
    main()
