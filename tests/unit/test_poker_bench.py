"""bench/_poker.py's figures that compare across days and seeds: the NashConv at the first
evaluation after a number of moves, and the median and worst over seeds."""

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.append(str(BENCH))  # the benches import their neighbours by name

from _poker import at_moves, over_seeds  # noqa: E402

CURVE = [(1_000, 0.5), (2_500, 0.3), (4_000, 0.2)]  # (moves, NashConv) per evaluation


def test_the_moves_bounded_figure_is_the_first_evaluation_at_or_after_the_budget():
    assert at_moves(CURVE, 1_000) == 0.5  # at the budget exactly
    assert at_moves(CURVE, 1_001) == 0.3  # the next evaluation, not the closest
    assert at_moves(CURVE, 4_000) == 0.2
    assert at_moves(CURVE, 4_001) is None  # the run ended before


def test_median_and_worst_over_seeds_and_none_when_a_seed_missed():
    rows = [{"a": 0.2, "b": 0.5}, {"a": 0.01, "b": None}, {"a": 0.05, "b": 0.1}]
    out = over_seeds(rows, ["a", "b"])
    assert out["a_median"] == 0.05 and out["a_worst"] == 0.2  # worst: the most exploitable
    assert out["b_median"] is None and out["b_worst"] is None
    assert over_seeds([{"a": 0.3}, {"a": 0.1}], ["a"])["a_median"] == 0.2
