"""Piecewise-linear schedules in RLlib's format: ``[[timestep, value], ...]``."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

Schedule = Sequence[Sequence[float]]


def validate_schedule(schedule: Schedule, name: str) -> None:
    """Raise ValueError, saying what to change, unless ``schedule`` is well formed."""
    example = f"e.g. {name}=[[0, 0.001], [100000, 0.0001]]"
    if len(schedule) == 0:
        raise ValueError(f"`{name}` is empty; give at least one [timestep, value] pair, {example}.")
    for point in schedule:
        if len(point) != 2:
            raise ValueError(
                f"`{name}` entry {list(point)} is not a [timestep, value] pair; {example}."
            )
    steps = [p[0] for p in schedule]
    if steps[0] < 0 or any(b <= a for a, b in itertools.pairwise(steps)):
        raise ValueError(
            f"`{name}` timesteps {steps} must be >= 0 and strictly increasing; {example}."
        )


def schedule_value(schedule: Schedule, timestep: float) -> float:
    """Linear interpolation between points; the end values hold outside the range."""
    steps = [float(p[0]) for p in schedule]
    values = [float(p[1]) for p in schedule]
    return float(np.interp(timestep, steps, values))
