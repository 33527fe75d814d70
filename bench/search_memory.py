"""Memory of play-time search with tree reuse: the bytes SearchPlayer's trees hold (the
last move's, and the last two moves' it keeps for reuse) while a saved connect-four run
plays ``--games`` games at ``--search`` simulations a move against the one-ply bot
(``--games`` / 2 side by side per seat, as `distrl eval` plays them).

    python bench/search_memory.py [--run bench/out/runs/alphazero_c4_0] [--games 20]

Last line JSON: ``trees_bytes_max`` (one move's trees), ``kept_bytes_max`` (every tree
kept for reuse), ``games_side_by_side`` and ``kept_bytes_per_game``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np
import torch

from distrl.games import players
from distrl.games.search import Trees


def nbytes(trees: Trees) -> int:
    """The bytes of a Trees' arrays (its node fields live in dicts of arrays)."""
    total = 0
    for value in vars(trees).values():
        parts = value.values() if isinstance(value, dict) else [value]
        total += sum(x.nbytes for x in parts if isinstance(x, np.ndarray))
    return total


def measured(choose: Any, peak: dict[str, int]) -> Any:
    """SearchPlayer.choose, keeping the peaks of its trees' bytes in ``peak``."""

    def wrapped(self: players.SearchPlayer, states: list, observe: Any) -> list:
        out = choose(self, states, observe)
        kept = {id(t): t for trees in self._kept for t, _ in trees.values()}
        peak["trees_bytes_max"] = max(peak["trees_bytes_max"], nbytes(self.trees))
        peak["kept_bytes_max"] = max(peak["kept_bytes_max"],
                                     sum(nbytes(t) for t in kept.values()))
        peak["games_side_by_side"] = max(peak["games_side_by_side"], self.trees.rows)
        return out

    return wrapped


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--run", default="bench/out/runs/alphazero_c4_0")
    ap.add_argument("--games", type=int, default=20)
    ap.add_argument("--search", type=int, default=200)
    args = ap.parse_args()
    torch.set_num_threads(1)
    from alphazero_ladder import rung

    peak = {"trees_bytes_max": 0, "kept_bytes_max": 0, "games_side_by_side": 0}
    players.SearchPlayer.choose = measured(players.SearchPlayer.choose, peak)
    rung(args.run, "board_bots:oneply", args.games, 0, 2, args.search)
    peak["kept_bytes_per_game"] = peak["kept_bytes_max"] / peak["games_side_by_side"]
    print(json.dumps({**peak, "search": args.search, "games": args.games}))


if __name__ == "__main__":
    main()
