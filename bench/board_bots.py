"""Fixed-strength opponents for the board-game ladders, as ``distrl eval --opponent
module:callable`` bots (``callable(obs, action_mask) -> action`` on PettingZoo's
observations: planes of the mover's pieces and the other player's).

- ``oneply``: wins at once if it can, else blocks the other player's immediate win, else a
  uniformly random legal move (connect four).
- ``alphabeta5``: negamax with alpha-beta to depth 5, scoring leaves with a win/block/centre
  heuristic (connect four).
- ``perfect``: full-depth minimax on tic-tac-toe, which never loses.
- ``solver``: perfect play on connect four (the BitBully solver and its 12-ply opening
  book, the ``bench`` extra): the fastest win, else a draw, else the slowest loss.

The bots share one random generator (``seed(n)`` resets it), so a ladder is repeatable;
all but the solver are pure numpy.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

WIN = 1_000_000
_rng = np.random.default_rng(0)


def seed(n: int) -> None:
    """Reset the bots' random generator (the random moves of ``oneply`` and tie-breaks)."""
    global _rng
    _rng = np.random.default_rng(n)


@dataclass(frozen=True)
class Game:
    """A two-player drop or place game on a grid: ``k`` in a row wins."""

    rows: int
    cols: int
    k: int
    gravity: bool
    """Pieces fall to the lowest free cell of a column (connect four); else the action is a
    cell, row-major (tic-tac-toe)."""

    def lines(self) -> np.ndarray:
        """Every k-in-a-row window as flat cell indices, shape (windows, k)."""
        out = []
        for r in range(self.rows):
            for c in range(self.cols):
                for dr, dc in ((0, 1), (1, 0), (1, 1), (-1, 1)):
                    cells = [(r + i * dr, c + i * dc) for i in range(self.k)]
                    if all(0 <= y < self.rows and 0 <= x < self.cols for y, x in cells):
                        out.append([y * self.cols + x for y, x in cells])
        return np.array(out)

    def cell(self, board: np.ndarray, action: int) -> int:
        """The flat cell an action fills (-1: not legal)."""
        if not self.gravity:
            return action if board[action] == 0 else -1
        for r in range(self.rows - 1, -1, -1):
            if board[r * self.cols + action] == 0:
                return r * self.cols + action
        return -1

    def legal(self, board: np.ndarray) -> list[int]:
        n = self.cols if self.gravity else self.rows * self.cols
        return [a for a in range(n) if self.cell(board, a) >= 0]


CONNECT_FOUR = Game(6, 7, 4, gravity=True)
TIC_TAC_TOE = Game(3, 3, 3, gravity=False)
_LINES = {g: g.lines() for g in (CONNECT_FOUR, TIC_TAC_TOE)}


def board_of(obs: np.ndarray) -> np.ndarray:
    """Flat board from the mover's view: +1 the mover's pieces, -1 the other player's."""
    obs = np.asarray(obs)
    return (obs[..., 0].astype(np.int8) - obs[..., 1].astype(np.int8)).reshape(-1)


def winner(game: Game, board: np.ndarray) -> int:
    """+1 or -1 when that side has k in a row, else 0."""
    sums = board[_LINES[game]].sum(axis=1)
    return 1 if (sums == game.k).any() else -1 if (sums == -game.k).any() else 0


def _wins_now(game: Game, board: np.ndarray, side: int) -> list[int]:
    """Actions that give ``side`` k in a row at once."""
    out = []
    for a in game.legal(board):
        cell = game.cell(board, a)
        board[cell] = side
        if winner(game, board) == side:
            out.append(a)
        board[cell] = 0
    return out


def heuristic(game: Game, board: np.ndarray) -> int:
    """The mover's windows minus the other's, weighted by pieces in them (a window with
    both players' pieces counts for nobody), plus the centre column: the usual connect-four
    evaluation, a threat of k-1 worth far more than scattered pieces."""
    windows = board[_LINES[game]]
    mine, theirs = (windows == 1).sum(axis=1), (windows == -1).sum(axis=1)
    weight = np.array([0, 1, 10, 100, 0][: game.k + 1])
    score = int(weight[mine[theirs == 0]].sum() - weight[theirs[mine == 0]].sum())
    centre = board.reshape(game.rows, game.cols)[:, game.cols // 2]
    return score + 3 * int(centre.sum())


def negamax(game: Game, board: np.ndarray, depth: int, alpha: float, beta: float
            ) -> tuple[float, int]:
    """(value for the mover, best action) by alpha-beta to ``depth`` plies; a win sooner
    scores higher than a win later. ``board`` is restored on return."""
    legal = game.legal(board)
    if not legal:
        return 0, -1
    centre = (game.cols - 1) / 2
    legal.sort(key=lambda a: abs((a % game.cols) - centre))  # centre first: more cut-offs
    best, best_action = -np.inf, legal[0]
    for a in legal:
        cell = game.cell(board, a)
        board[cell] = 1
        if winner(game, board) == 1:
            value = WIN + depth
        elif depth <= 1:
            value = heuristic(game, board) if game.legal(board) else 0
        else:
            board *= -1  # the other player's view
            value = -negamax(game, board, depth - 1, -beta, -alpha)[0]
            board *= -1
        board[cell] = 0
        if value > best:
            best, best_action = value, a
        alpha = max(alpha, value)
        if alpha >= beta:
            break
    return best, best_action


def oneply(obs: np.ndarray, action_mask: np.ndarray) -> int:
    """Connect four: win, else block, else random."""
    board = board_of(obs)
    for side in (1, -1):
        wins = _wins_now(CONNECT_FOUR, board, side)
        if wins:
            return int(wins[0])
    return int(_rng.choice(np.flatnonzero(action_mask)))


def alphabeta5(obs: np.ndarray, action_mask: np.ndarray) -> int:
    """Connect four: alpha-beta to depth 5 with the heuristic above."""
    return int(negamax(CONNECT_FOUR, board_of(obs), 5, -np.inf, np.inf)[1])


def solver(obs: np.ndarray, action_mask: np.ndarray) -> int:
    """Connect four: a move of the highest game-theoretic score (random among ties)."""
    scores = column_scores(board_of(obs))
    best = max(scores.values())
    return int(_rng.choice([c for c, s in sorted(scores.items()) if s == best]))


def column_scores(board: np.ndarray) -> dict[int, int]:
    """Connect four under perfect play, from the mover's view (``board``: +1 the mover's
    pieces): each legal column's score, > 0 a win (the sooner, the higher), 0 a draw,
    < 0 a loss (the later, the higher)."""
    import bitbully  # AGPL-3.0, a reference for the benches only: distrl never imports it

    grid = board.reshape(CONNECT_FOUR.rows, CONNECT_FOUR.cols)
    first = (grid == 1).sum() == (grid == -1).sum()  # equal counts: the mover began
    me, them = (1, 2) if first else (2, 1)  # BitBully numbers the first player 1
    cells = np.where(grid == 1, me, np.where(grid == -1, them, 0))
    return _solver().score_all_moves(bitbully.Board.from_array(cells.tolist()))


@functools.cache
def _solver():
    import bitbully

    return bitbully.BitBully("12-ply-dist")  # loading the book takes ~1 s: once


def perfect(obs: np.ndarray, action_mask: np.ndarray) -> int:
    """Tic-tac-toe: minimax over the whole tree (at most 9 plies)."""
    return int(negamax(TIC_TAC_TOE, board_of(obs), 9, -np.inf, np.inf)[1])
