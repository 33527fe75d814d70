"""The ladders' fixed bots (bench/board_bots.py): the tic-tac-toe player never loses to
any line of play, the connect-four bots take wins and block losses, and the connect-four
solver knows the game's solved values (Allis 1988)."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

spec = importlib.util.spec_from_file_location(
    "board_bots", Path(__file__).parents[2] / "bench" / "board_bots.py")
bots = importlib.util.module_from_spec(spec)
sys.modules["board_bots"] = bots  # dataclasses look their module up
spec.loader.exec_module(bots)


def obs_of(board: np.ndarray, game) -> np.ndarray:
    """PettingZoo's planes from the mover's view (+1 mover, -1 the other)."""
    grid = board.reshape(game.rows, game.cols)
    return np.stack([grid == 1, grid == -1], axis=-1).astype(np.int8)


def mask_of(board: np.ndarray, game) -> np.ndarray:
    n = game.cols if game.gravity else game.rows * game.cols
    mask = np.zeros(n, np.int8)
    mask[game.legal(board)] = 1
    return mask


def worst_result(board: np.ndarray, bot_to_move: bool) -> int:
    """The perfect bot's worst outcome (+1 win, 0 draw, -1 loss) over every reply the
    other side can make; ``board`` holds +1 for the bot's pieces."""
    game = bots.TIC_TAC_TOE
    if (w := bots.winner(game, board)) or not game.legal(board):
        return w
    if bot_to_move:
        action = bots.perfect(obs_of(board, game), mask_of(board, game))
        child = board.copy()
        child[game.cell(board, action)] = 1
        return worst_result(child, False)
    results = []
    for action in game.legal(board):
        child = board.copy()
        child[game.cell(board, action)] = -1
        results.append(worst_result(child, True))
    return min(results)


@pytest.mark.parametrize("first", [True, False])
def test_perfect_never_loses_tic_tac_toe_to_any_line_of_play(first):
    assert worst_result(np.zeros(9, np.int8), first) >= 0


def test_perfect_converts_a_won_position():
    # X took a corner and O answered on the adjacent edge: a known forced win for X.
    board = np.zeros(9, np.int8)
    board[0], board[1] = 1, -1
    assert worst_result(board, True) == 1


def c4(moves: list[int]) -> np.ndarray:
    """Connect-four board after ``moves`` (columns), from the next mover's view."""
    game, board, side = bots.CONNECT_FOUR, np.zeros(42, np.int8), 1
    for col in moves:
        board[game.cell(board, col)] = side
        side = -side
    return board * side  # the next mover's pieces are +1


@pytest.mark.parametrize("bot", ["oneply", "alphabeta5", "solver"])
@pytest.mark.parametrize(("moves", "best"), [
    ([0, 6, 0, 6, 0, 6], 0),  # the mover has three in column 0: win
    ([0, 6, 0, 6, 1, 6], 6),  # the other side threatens column 6: block
    ([1, 0, 2, 0, 3, 6], 4),  # three in the bottom row, both ends open except 0: win at 4
    ([3, 0, 3, 1, 3], 3),  # the second player to move, three above it in column 3: block
])
def test_connect_four_bots_take_the_win_and_block_the_loss(bot, moves, best):
    board = c4(moves)
    game = bots.CONNECT_FOUR
    assert getattr(bots, bot)(obs_of(board, game), mask_of(board, game)) == best


def test_alphabeta_beats_oneply_from_either_seat():
    game = bots.CONNECT_FOUR
    bots.seed(0)
    wins = 0
    for g in range(6):
        board, mover = np.zeros(42, np.int8), g % 2  # 0: alpha-beta moves first
        while not bots.winner(game, board) and game.legal(board):
            play = bots.alphabeta5 if mover == 0 else bots.oneply
            action = play(obs_of(board, game), mask_of(board, game))
            board[game.cell(board, action)] = 1
            if bots.winner(game, board):
                wins += mover == 0
                break
            board, mover = -board, 1 - mover
    assert wins >= 5


def test_solver_knows_the_first_moves_values():
    # Allis (1988): the first player wins by the centre column, draws by its neighbours,
    # loses by the four outer columns.
    scores = bots.column_scores(np.zeros(42, np.int8))
    signs = {col: int(np.sign(s)) for col, s in scores.items()}
    assert signs == {0: -1, 1: -1, 2: 0, 3: 1, 4: 0, 5: -1, 6: -1}


def test_solver_as_first_player_beats_alphabeta_and_a_random_second_move():
    game = bots.CONNECT_FOUR
    bots.seed(0)
    rng = np.random.default_rng(0)
    for g in range(3):
        board, mover, ply = np.zeros(42, np.int8), 0, 0  # 0: the solver, moving first
        while not bots.winner(game, board) and game.legal(board):
            if mover == 0:
                action = bots.solver(obs_of(board, game), mask_of(board, game))
            elif ply == 1 and g > 0:  # another reply than alpha-beta's: another game
                action = int(rng.choice(game.legal(board)))
            else:
                action = bots.alphabeta5(obs_of(board, game), mask_of(board, game))
            board[game.cell(board, action)] = 1
            if bots.winner(game, board):
                assert mover == 0, f"game {g}: the solver lost a won game"
                break
            board, mover, ply = -board, 1 - mover, ply + 1
        assert bots.winner(game, board) == 1, f"game {g}: the solver did not win"
