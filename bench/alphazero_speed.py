"""AlphaZero self-play speed: network-evaluated simulations per second of the tuned
connect-four entry's search with its network, batched as a self-play worker runs it
(``num_games`` games searched side by side, one batch of leaves per simulation, one
torch thread), and where the time goes (cProfile, split into network forward, the
observation of positions, tree code and OpenSpiel's game stepping).

    python bench/alphazero_speed.py              # ~1 minute on one core
    python bench/alphazero_speed.py --workers 2  # the tuned entry's two workers side by side
    python bench/alphazero_speed.py --moves 4 --profile-moves 1   # smoke

Last line JSON: ``simulations_per_s`` (leaves the network evaluated, per second, over
``--moves`` timed moves after ``--warmup`` moves), ``moves_per_s``, ``forward_ms_batch``
and ``profile`` (fraction of profiled time per part, and the top functions by own time).
With ``--workers N``: N such players in processes of their own at once (seeds 0..N-1,
no profile), each one's figures and ``simulations_per_s_total``, their sum.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import subprocess
import sys
import time
from collections import defaultdict

import torch

from distrl.alphazero.self_play import SelfPlayer
from distrl.tuned import TUNED_ALPHAZERO

PARTS = (("network", ("torch", "self_play.py:evaluate")),
         ("observe", ("observation", "games.py", "twins.py", "pettingzoo")),
         ("tree", ("search.py",)), ("game", ("pyspiel",)))
"""A profiled function's part, by where it lives (the first match wins)."""


def part(func: tuple[str, int, str], stats: dict | None = None) -> str:
    """network, observe, tree, game or other; a built-in of neither torch nor OpenSpiel
    (numpy's, Python's) counts for the part of the caller that spent most time in it."""
    filename, _, name = func
    where = f"{filename}:{name}"
    for label, keys in PARTS:
        if any(k in where for k in keys):
            return label
    if stats and filename == "~" and stats[func][4]:
        callers = stats[func][4]
        return part(max(callers, key=lambda c: callers[c][2]), stats)
    return "other"


def counting(player: SelfPlayer) -> list[int]:
    """Wrap the player's evaluate to count the positions it sends to the network."""
    count, evaluate = [0], player.evaluate

    def counted(states):
        count[0] += len(states)
        return evaluate(states)

    player.evaluate = counted
    return count


def timed(player: SelfPlayer, moves: int, count: list[int]) -> dict[str, float]:
    count[0] = 0
    start = time.perf_counter()
    player.play(None, moves)
    elapsed = time.perf_counter() - start
    return {"simulations_per_s": round(count[0] / elapsed, 1),
            "moves_per_s": round(moves * player.games.trees.rows / elapsed, 1),
            "evaluated": count[0], "seconds": round(elapsed, 2)}


def forward_ms(player: SelfPlayer, batch: int, repeats: int = 50) -> float:
    obs = torch.as_tensor(player.env.observe_states(player.games.positions()
                                                    [:batch]), dtype=torch.float32)
    with torch.no_grad():
        player.model(obs)
        start = time.perf_counter()
        for _ in range(repeats):
            player.model(obs)
    return round((time.perf_counter() - start) / repeats * 1e3, 3)


def profile(player: SelfPlayer, moves: int, top: int = 10) -> dict:
    prof = cProfile.Profile()
    prof.enable()
    player.play(None, moves)
    prof.disable()
    stats = pstats.Stats(prof).stats  # func -> (calls, primitive calls, tottime, cumtime, ...)
    total = sum(s[2] for s in stats.values())
    parts: dict[str, float] = defaultdict(float)
    for func, s in stats.items():
        parts[part(func, stats)] += s[2]
    ranked = sorted(stats.items(), key=lambda kv: -kv[1][2])[:top]
    return {"fractions": {k: round(v / total, 3) for k, v in sorted(parts.items())},
            "top": [{"function": f"{os.path.basename(f[0])}:{f[2]}", "part": part(f, stats),
                     "calls": s[0], "own_fraction": round(s[2] / total, 3)}
                    for f, s in ranked]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--moves", type=int, default=20, help="timed moves of every game")
    parser.add_argument("--warmup", type=int, default=4, help="moves before timing")
    parser.add_argument("--profile-moves", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    if args.workers > 1:
        print(json.dumps(side_by_side(args)))
        return
    torch.set_num_threads(1)  # as each self-play worker
    tuned = TUNED_ALPHAZERO["connect_four"]
    player = SelfPlayer(tuned.env, {}, tuned.config, args.seed)
    torch.manual_seed(args.seed)
    count = counting(player)
    player.play(None, args.warmup)
    out = {"env": tuned.env, "num_games": tuned.config.num_games,
           "num_simulations": tuned.config.num_simulations, "torch_threads": 1,
           **timed(player, args.moves, count),
           "forward_ms_batch": forward_ms(player, tuned.config.num_games),
           "forward_ms_one": forward_ms(player, 1),
           "profile": profile(player, args.profile_moves) if args.profile_moves else None}
    print(json.dumps(out))


def side_by_side(args: argparse.Namespace) -> dict:
    """``args.workers`` single players started at once, each in its own process."""
    procs = [subprocess.Popen([sys.executable, __file__, "--moves", str(args.moves),
                               "--warmup", str(args.warmup), "--profile-moves", "0",
                               "--seed", str(seed)], stdout=subprocess.PIPE, text=True)
             for seed in range(args.workers)]
    each = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]
    return {"workers": args.workers,
            "simulations_per_s_total": round(sum(w["simulations_per_s"] for w in each), 1),
            "each": [{k: w[k] for k in ("simulations_per_s", "moves_per_s", "seconds",
                                        "forward_ms_batch")} for w in each]}


if __name__ == "__main__":
    main()
