"""Wilson's score interval, against hand-computed values."""

import math

import pytest

from distrl.games.scoring import wilson_interval


def test_wilson_matches_its_formula_and_stays_inside_0_1():
    # 39 of 40 (0.975): centre (p + z²/2n) / (1 + z²/n), half z √(p(1-p)/n + z²/4n²) / (1 + z²/n)
    z, p = 1.96, 39 / 40
    centre = (p + z * z / 80) / (1 + z * z / 40)
    half = z * math.sqrt(p * (1 - p) / 40 + z * z / 6400) / (1 + z * z / 40)
    assert wilson_interval(39, 40) == pytest.approx((centre - half, centre + half))
    assert wilson_interval(39, 40) == pytest.approx((0.8712, 0.9956), abs=1e-4)
    low, high = wilson_interval(0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)  # not empty at 0 wins
    assert wilson_interval(10, 10)[1] == 1.0
    with pytest.raises(ValueError, match="needs games"):
        wilson_interval(0, 0)
