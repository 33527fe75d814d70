"""Piecewise-linear schedules in RLlib's format: ``[[timestep, value], ...]``."""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Sequence

import numpy as np

Schedule = Sequence[Sequence[float]]
ScheduleT = tuple[tuple[float, float], ...]
"""A validated schedule: tuples of floats, so configs holding one stay hashable."""


def validate_schedule(schedule: Schedule, name: str) -> ScheduleT:
    """The schedule as tuples of (float, float); ValueError, saying what to change,
    unless it is well formed. Lists (from Python or JSON) are accepted."""
    example = f"e.g. {name}=[[0, 0.001], [100000, 0.0001]]"
    if isinstance(schedule, np.ndarray):
        schedule = schedule.tolist()
    if isinstance(schedule, str | bytes) or not isinstance(schedule, Sequence):
        raise ValueError(f"`{name}` ({schedule!r}) is not a list of [timestep, value] pairs; "
                         f"{example}.")
    if len(schedule) == 0:
        raise ValueError(f"`{name}` is empty; give at least one [timestep, value] pair, {example}.")
    for point in schedule:
        if isinstance(point, str | bytes) or not isinstance(point, Sequence) or len(point) != 2:
            shown = list(point) if isinstance(point, tuple) else point
            raise ValueError(f"`{name}` entry {shown!r} is not a [timestep, value] pair; "
                             f"{example}.")
        # bool is a Real too, but True as a timestep or value is surely a mistake.
        if not all(isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)
                   for v in point):
            raise ValueError(f"`{name}` entry {list(point)!r} must hold two finite numbers; "
                             f"{example}.")
    steps = [p[0] for p in schedule]
    if steps[0] < 0 or any(b <= a for a, b in itertools.pairwise(steps)):
        raise ValueError(
            f"`{name}` timesteps {steps} must be >= 0 and strictly increasing; {example}."
        )
    return tuple((float(t), float(v)) for t, v in schedule)


def schedule_value(schedule: Schedule, timestep: float) -> float:
    """Linear interpolation between points; the end values hold outside the range."""
    steps = [float(p[0]) for p in schedule]
    values = [float(p[1]) for p in schedule]
    return float(np.interp(timestep, steps, values))


def validate_lr_schedule(schedule: Schedule, name: str = "lr_schedule") -> ScheduleT:
    """validate_schedule, and every learning rate > 0 (Adam cannot step with less)."""
    sched = validate_schedule(schedule, name)
    for t, v in sched:
        if v <= 0:
            raise ValueError(f"`{name}` value {v} at timestep {t:g} must be > 0: "
                             "Adam cannot step with a learning rate <= 0.")
    return sched
