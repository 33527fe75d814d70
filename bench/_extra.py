"""What a bench needs beyond distrl's own dependencies: the `bench` extra (the peers it
compares with, matplotlib for its plots). A script that lacks one stops with the command
that installs it, not an ImportError's traceback."""

from __future__ import annotations

import importlib.util
import sys

INSTALL = "pip install -c constraints.txt -e '.[bench]'  (or: make bench)"
PACKAGES = {"stable_baselines3": "stable-baselines3", "sb3_contrib": "sb3-contrib",
            "matplotlib": "matplotlib", "ray.rllib": "ray[rllib]", "cpprb": "cpprb",
            "bitbully": "bitbully"}
"""Module -> the package of the bench extra (pyproject.toml) that brings it."""


def need(*modules: str) -> None:
    """Stop this script in one line unless every module imports."""
    missing = [m for m in modules if not _importable(m)]
    if missing:
        names = ", ".join(PACKAGES[m] for m in missing)
        raise SystemExit(f"{sys.argv[0]} needs {names} from the bench extra: {INSTALL}")


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its parent package is missing (ray.rllib without ray)
        return False
