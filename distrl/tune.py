"""Ray Tune trainables: ``tune.Tuner(trainable("ppo"), param_space={...})`` runs
``train_ppo`` (or any algorithm in distrl.registry.ALGORITHMS) once per trial and reports
every iteration's metrics, with its checkpoint when one was saved, through Tune.

The param space is flat: each key is a field of RunConfig, of the algorithm's config, or
of its ModelConfig (``hiddens``, ``activation``, ...), so sweeps read like the CLI's
flags. Imported only by users of Tune (``pip install 'distrl[tune]'``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from distrl.core.callbacks import Callbacks
from distrl.core.config import RunConfig
from distrl.registry import ALGORITHMS


def trainable(algo: str) -> Callable[[dict[str, Any]], None]:
    """A Tune function trainable that trains ``algo`` with the trial's parameters."""
    if algo not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algo!r}; choose one of {sorted(ALGORITHMS)}.")
    # A partial of a module-level function pickles by reference (a closure would drag
    # this module's globals along to the trial's process).
    return functools.partial(train_trial, algo)


def train_trial(algo: str, params: dict[str, Any]) -> None:
    """One Tune trial: train ``algo`` and report each iteration to Tune."""
    from ray import tune

    config, run = split_params(algo, params)
    if run.logdir is None:  # metrics.jsonl, TensorBoard and checkpoints in the trial dir
        run = dataclasses.replace(run, logdir=tune.get_context().get_trial_dir())

    saved: list[Path] = []  # the checkpoint written in this iteration (before its report)

    def report(metrics: dict[str, Any]) -> None:
        checkpoint = tune.Checkpoint.from_directory(str(saved.pop())) if saved else None
        tune.report(_numbers(metrics), checkpoint=checkpoint)

    ALGORITHMS[algo].train()(config, run, callbacks=Callbacks(report, saved.append))


def split_params(algo: str, params: dict[str, Any]) -> tuple[Any, RunConfig]:
    """(algorithm config, RunConfig) from one flat dict; an unknown key is an error that
    lists the valid ones."""
    cls = ALGORITHMS[algo].config
    model_cls = type(cls().model)
    groups = {name: {} for name in ("run", "config", "model")}
    fields = {"run": _names(RunConfig), "config": _names(cls) - {"model"},
              "model": _names(model_cls)}
    for key, value in params.items():
        group = next((g for g, names in fields.items() if key in names), None)
        if group is None:
            valid = sorted(set().union(*fields.values()))
            raise ValueError(f"unknown parameter {key!r} for {algo}; valid: {valid}")
        groups[group][key] = tuple(value) if isinstance(value, list) else value
    config = cls(**groups["config"], model=model_cls(**groups["model"]))
    return config, RunConfig(**groups["run"])


def _names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def _numbers(metrics: dict[str, Any]) -> dict[str, Any]:
    """Tune keeps scalars; lists (none today) would be dropped by its loggers anyway."""
    return {k: v for k, v in metrics.items() if isinstance(v, int | float | str | bool)}
