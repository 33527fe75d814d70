"""Checkpoints: one torch file holding everything a run needs to resume exactly."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

FILE = "checkpoint.pt"


def save_checkpoint(directory: Path, payload: dict[str, Any]) -> Path:
    """Write atomically (temp file + rename) so a crash never leaves half a checkpoint."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / FILE
    tmp = path.with_suffix(".tmp")
    torch.save(payload, tmp)
    os.replace(tmp, path)
    return directory


def find_checkpoint(path: str | Path) -> Path:
    """Accept a checkpoint file, a checkpoint directory, or a run's logdir."""
    p = Path(path)
    for candidate in (p, p / FILE, p / "checkpoint" / FILE):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(
        f"no checkpoint at {str(p)!r}: pass a run's logdir, its checkpoint/ directory, or a {FILE}."
    )


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    # weights_only=False: the payload holds our config dataclasses and runner states,
    # so only load checkpoints you trust (as with any pickle).
    return torch.load(find_checkpoint(path), map_location="cpu", weights_only=False)
