"""Connect four measured as the field measures it: mistakes on solved positions.

Pascal Pons's six test sets, as AlphaZero.jl's benchmark plays them: positions sorted by
how many moves were played (beginning <= 14 < middle <= 28 < end) and by how far the end
is under perfect play (easy < 14 <= medium < 28 <= hard), 1,000 in each of
end_easy, middle_easy, middle_medium, begin_easy, begin_medium and begin_hard. A
player's move is a mistake when its game-theoretic outcome (win, draw, loss) is worse
than the best move's; the error rate of a set is its share of mistakes.

    python bench/connect4_solved.py --generate      # (re)writes the positions file
    python bench/connect4_solved.py --baseline      # minimax5 and oneply
    python bench/connect4_solved.py --run RUN [--search 200 800]  # net, search200, ...

The positions come from uniformly random play with a fixed seed (``--seed``, 0), each
labelled with every legal move's score by the BitBully solver (the ``bench`` extra),
and are kept in bench/data/connect4_solved.json.gz, so every run scores the same
positions. The last line is JSON: ``error_rate_<player>_<set>`` for each player.
"""

from __future__ import annotations

import argparse
import gzip
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

DATA = Path(__file__).parent / "data" / "connect4_solved.json.gz"
SETS = {  # name -> (played above, played at most, remaining at least, remaining below)
    "end_easy": (28, 42, 0, 14),
    "middle_easy": (14, 28, 0, 14),
    "middle_medium": (14, 28, 14, 28),
    "begin_easy": (-1, 14, 0, 14),
    "begin_medium": (-1, 14, 14, 28),
    "begin_hard": (-1, 14, 28, 43),
}
"""Pons's sets: a position belongs to the one whose bounds hold its moves played and
the moves left under perfect play."""
COLUMNS = 7


def which_set(played: int, remaining: int) -> str | None:
    """The set a position with ``played`` moves and ``remaining`` moves to the end under
    perfect play belongs to (None: none, e.g. the middle game's hard positions)."""
    for name, (above, at_most, low, below) in SETS.items():
        if above < played <= at_most and low <= remaining < below:
            return name
    return None


def outcome(score: int) -> int:
    """A solver score's outcome for the mover: 1 win, 0 draw, -1 loss."""
    return int(np.sign(score))


def is_mistake(scores: list[int | None], move: int) -> bool:
    """Whether ``move`` (a column) gives up outcome against the position's best move
    (``scores``: each column's solver score from the mover's view, None if full)."""
    best = max(outcome(s) for s in scores if s is not None)
    return outcome(scores[move]) < best


# ------------------------------------------------------------------ positions


def generate(seed: int, per_set: int) -> list[dict[str, Any]]:
    """``per_set`` labelled positions in each set, from uniformly random games (a
    position is the game cut after a random number of moves in the set's range)."""
    import bitbully

    solver = bitbully.BitBully("12-ply-dist")
    rng = np.random.default_rng(seed)
    wanted = dict.fromkeys(SETS, per_set)
    seen: set[str] = set()
    out = []
    while any(wanted.values()):
        name = next(n for n in rng.permutation(list(SETS)) if wanted[n])
        above, at_most, _, _ = SETS[name]
        moves = _random_game(rng, int(rng.integers(above + 1, at_most + 1)))
        key = "".join(map(str, moves or []))
        if moves is None or key in seen:
            continue
        seen.add(key)
        board = bitbully.Board(moves)
        scores = solver.score_all_moves(board)
        remaining = solver.score_to_moves_left(max(scores.values()), board)
        found = which_set(len(moves), remaining)
        if found is not None and wanted[found]:
            wanted[found] -= 1
            out.append({"set": found, "moves": key,
                        "scores": [scores.get(c) for c in range(COLUMNS)]})
    return sorted(out, key=lambda p: (list(SETS).index(p["set"]), p["moves"]))


def _random_game(rng: np.random.Generator, plies: int) -> list[int] | None:
    """``plies`` uniformly random legal moves from the empty board; None when the game
    ends on the way (or the position is full)."""
    import bitbully

    board, moves = bitbully.Board(), []
    for _ in range(plies):
        move = int(rng.choice(board.legal_moves()))
        if board.can_win_next(move):  # this move would end the game
            return None
        board.play(move)
        moves.append(move)
    return moves if board.legal_moves() else None


def load() -> list[dict[str, Any]]:
    with gzip.open(DATA, "rt") as f:
        return json.load(f)


# ------------------------------------------------------------------ players


def states(positions: list[dict[str, Any]]) -> list[Any]:
    """Each position as a state of OpenSpiel's connect four (the search's game)."""
    import pyspiel

    game = pyspiel.load_game("connect_four")
    out = []
    for p in positions:
        state = game.new_initial_state()
        for move in p["moves"]:
            state.apply_action(int(move))
        out.append(state)
    return out


def observer() -> Any:
    """PettingZoo's observation of OpenSpiel states (what the networks and bots read)."""
    from distrl.games.games import make_multiagent_env

    env = make_multiagent_env("pettingzoo:connect_four_v3")
    env.reset(seed=0)
    return env.observe_states


def bot_moves(bot: Any, positions: list[dict[str, Any]]) -> list[int]:
    """A board bot's move in each position (bench/board_bots.py)."""
    observe = observer()
    moves = []
    for state in states(positions):
        mask = np.array(state.legal_actions_mask(), bool)
        moves.append(int(bot(observe([state])[0], mask)))
    return moves


def network_moves(run: str, positions: list[dict[str, Any]], search: int) -> list[int]:
    """The saved run's main_0 in each position: its greedy move (``search`` 0) or the
    most visited after ``search`` PUCT simulations (every position's search afresh)."""
    import torch

    from distrl.core.checkpoint import Checkpoint
    from distrl.core.evaluation import load_policy
    from distrl.games.players import SearchPlayer, exploration
    from distrl.games.policies import LocalPolicy
    from distrl.models.distributions import mask_logits

    ckpt = Checkpoint(run)
    policy = LocalPolicy(load_policy(ckpt, "main_0"))
    observe, games = observer(), states(positions)
    if search:
        player = SearchPlayer(policy, search, c=exploration(ckpt), reuse=False)
        return [move for block in _blocks(games, 256)
                for move, _ in player.choose(block, observe)]
    obs = torch.as_tensor(observe(games), dtype=torch.float32)
    mask = torch.as_tensor(np.array([s.legal_actions_mask() for s in games], bool))
    with torch.no_grad():
        logits, _ = policy(obs, value=True)
    return mask_logits(logits, mask).argmax(-1).tolist()


def _blocks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i:i + size] for i in range(0, len(items), size)]


def error_rates(name: str, positions: list[dict[str, Any]], moves: list[int]
                ) -> dict[str, float]:
    """``error_rate_<name>_<set>``: the share of each set's positions where the move
    played is a mistake."""
    out = {}
    for s in SETS:
        picked = [(p, m) for p, m in zip(positions, moves, strict=True) if p["set"] == s]
        if picked:
            out[f"error_rate_{name}_{s}"] = sum(is_mistake(p["scores"], m)
                                                for p, m in picked) / len(picked)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--generate", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--per-set", type=int, default=1_000)
    ap.add_argument("--baseline", action="store_true", help="score minimax5 and oneply")
    ap.add_argument("--run", help="score this saved connect-four run's main_0")
    ap.add_argument("--search", type=int, nargs="*", default=[200, 800])
    args = ap.parse_args()
    if args.generate:
        from _extra import need

        need("bitbully")
        t = time.perf_counter()
        positions = generate(args.seed, args.per_set)
        DATA.parent.mkdir(parents=True, exist_ok=True)
        with gzip.GzipFile(DATA, "wb", mtime=0) as f:  # the same bytes for the same seed
            f.write(json.dumps(positions, separators=(",", ":")).encode())
        print(json.dumps({"positions": len(positions), "seed": args.seed,
                          "seconds": round(time.perf_counter() - t, 1)}), flush=True)
    positions = load()
    out: dict[str, Any] = {"positions": len(positions)}
    if args.baseline:
        import board_bots

        board_bots.seed(args.seed)
        for name, bot in (("minimax5", board_bots.alphabeta5), ("oneply", board_bots.oneply)):
            t = time.perf_counter()
            out.update(error_rates(name, positions, bot_moves(bot, positions)))
            out[f"seconds_{name}"] = round(time.perf_counter() - t, 1)
    if args.run:
        for search in [0, *args.search]:
            name = f"search{search}" if search else "net"
            t = time.perf_counter()
            out.update(error_rates(name, positions, network_moves(args.run, positions, search)))
            out[f"seconds_{name}"] = round(time.perf_counter() - t, 1)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
