import numpy as np
import pytest

from distrl.core.schedules import schedule_value, validate_schedule


def test_linear_interpolation_and_flat_ends():
    s = ((0, 1.0), (100, 0.0), (200, 0.5))
    assert schedule_value(s, 0) == 1.0
    assert schedule_value(s, 25) == pytest.approx(0.75)
    assert schedule_value(s, 150) == pytest.approx(0.25)
    assert schedule_value(s, 10_000) == 0.5
    assert schedule_value(((50, 2.0),), 0) == 2.0


@pytest.mark.parametrize(
    "schedule,match",
    [((), "empty"), (((0, 1.0, 2.0),), "pair"), (((10, 1.0), (5, 0.5)), "increasing"),
     (((-1, 1.0),), ">= 0"), ([0.01], "pair"), (0.01, "not a list"), ("0,1", "not a list"),
     ([[0, float("nan")]], "finite"), ([[0, "1e-3"]], "two finite numbers"),
     ([[True, 1.0]], "numbers")],
)
def test_bad_schedules_say_what_to_change(schedule, match):
    with pytest.raises(ValueError, match=match):
        validate_schedule(schedule, "lr_schedule")


def test_lists_are_normalized_to_tuples_of_floats():
    want = ((0.0, 1e-3), (100.0, 1e-4))
    for given in ([[0, 1e-3], [100, 1e-4]], ((0, 1e-3), [100, 1e-4]), np.array(want)):
        got = validate_schedule(given, "lr_schedule")
        assert got == want and all(type(v) is float for p in got for v in p)
        hash(got)
