"""bench/_plot.py's curves: each trial's return drawn against the chosen axis, one label
per system."""

import sys
from pathlib import Path

import pytest

sys.path.append(str(Path(__file__).resolve().parents[2] / "bench"))

from _plot import curves


class Axes:
    """Records what would be drawn (the benches' plots need matplotlib; this does not)."""

    def __init__(self):
        self.lines = []

    def plot(self, xs, ys, **kw):
        self.lines.append((list(xs), list(ys), kw))


TRIALS = [{"system": "a", "curve": [(1.5, 100, -3.0), (2.5, 200, -1.0)]},
          {"system": "a", "curve": [(1.0, 120, -2.0)]},
          {"system": "b", "curve": [(4.0, 300, 7.0)]}]
STYLE = {"a": ("red", "system a"), "b": ("blue", "system b")}


@pytest.mark.parametrize("x, first_xs", [("seconds", [1.5, 2.5]), ("env_steps", [100, 200])])
def test_returns_are_drawn_against_the_chosen_axis(x, first_xs):
    ax = Axes()
    curves(ax, TRIALS, STYLE, x=x)
    assert ax.lines[0][:2] == (first_xs, [-3.0, -1.0])
    assert [line[1] for line in ax.lines] == [[-3.0, -1.0], [-2.0], [7.0]]


def test_each_system_is_labelled_once_in_its_colour():
    ax = Axes()
    curves(ax, TRIALS, STYLE, ls=":")
    assert [kw["label"] for *_, kw in ax.lines] == ["system a", None, "system b"]
    assert [kw["color"] for *_, kw in ax.lines] == ["red", "red", "blue"]
    assert all(kw["ls"] == ":" for *_, kw in ax.lines)
