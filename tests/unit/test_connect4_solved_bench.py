"""bench/connect4_solved.py's measure: Pons's six sets by moves played and moves left,
a mistake as a worse game-theoretic outcome than the best move's, error rates per set;
and the positions file it ships: every set full, every label consistent."""

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.append(str(BENCH))  # the benches import their neighbours by name

import connect4_solved as solved  # noqa: E402


@pytest.mark.parametrize(("played", "remaining", "name"), [
    (29, 13, "end_easy"), (42 - 13, 0, "end_easy"), (28, 13, "middle_easy"),
    (15, 14, "middle_medium"), (20, 27, "middle_medium"), (20, 28, None),
    (14, 13, "begin_easy"), (0, 14, "begin_medium"), (14, 27, "begin_medium"),
    (0, 42, "begin_hard"), (10, 28, "begin_hard"), (29, 14, None)])
def test_positions_fall_in_ponss_sets_by_moves_played_and_left(played, remaining, name):
    assert solved.which_set(played, remaining) == name


def test_a_mistake_is_a_worse_outcome_not_a_slower_win():
    scores = [3, 1, 0, -2, None, 0, -1]  # wins on 0 and 1 (0 the faster), draws, losses
    assert [solved.is_mistake(scores, m) for m in (0, 1, 2, 3, 5, 6)] == [
        False, False, True, True, True, True]
    drawn = [0, -5, 0, -1, -1, -1, -1]  # the best is a draw: a loss is the only mistake
    assert [solved.is_mistake(drawn, m) for m in range(7)] == [
        False, True, False, True, True, True, True]
    lost = [-3, -1, -2, -20, -1, -1, -1]  # every move loses: none is a mistake
    assert not any(solved.is_mistake(lost, m) for m in range(7))


def test_error_rates_are_each_sets_share_of_mistakes():
    positions = [{"set": "end_easy", "scores": [1, 0, 0, 0, 0, 0, 0]},
                 {"set": "end_easy", "scores": [1, 0, 0, 0, 0, 0, 0]},
                 {"set": "begin_hard", "scores": [0, 0, -1, 0, 0, 0, 0]}]
    rates = solved.error_rates("x", positions, [0, 3, 2])
    assert rates == {"error_rate_x_end_easy": 0.5, "error_rate_x_begin_hard": 1.0}


def test_the_shipped_positions_fill_every_set_with_consistent_labels():
    positions = solved.load()
    counts = {s: sum(p["set"] == s for p in positions) for s in solved.SETS}
    assert counts == dict.fromkeys(solved.SETS, 1_000)
    assert len({p["moves"] for p in positions}) == len(positions)
    for p in positions:
        heights = [p["moves"].count(str(c)) for c in range(7)]
        assert max(heights) <= 6
        full = [h == 6 for h in heights]
        assert [s is None for s in p["scores"]] == full  # a label for each legal move
        above, at_most, _, _ = solved.SETS[p["set"]]
        assert above < len(p["moves"]) <= at_most


def test_the_solvers_board_and_the_searched_game_agree_on_each_move():
    """A position is a list of columns for both BitBully (the labels) and OpenSpiel (the
    players): a mirrored board would score every move against its mirror image."""
    bitbully = pytest.importorskip("bitbully")
    import numpy as np

    rng = np.random.default_rng(1)
    checked = 0
    for _ in range(50):
        moves = solved._random_game(rng, int(rng.integers(4, 30)))
        if moves is None:
            continue
        board = bitbully.Board(moves)
        state, = solved.states([{"moves": "".join(map(str, moves))}])
        assert sorted(board.legal_moves()) == state.legal_actions()
        for column in state.legal_actions():
            after = state.child(column)
            wins = after.is_terminal() and max(after.returns()) > 0
            assert wins == board.can_win_next(column)
            checked += wins
    assert checked >= 3  # some immediate wins were among the moves compared
