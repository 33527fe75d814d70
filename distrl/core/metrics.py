"""Namespaced metrics to JSONL and TensorBoard, and progress on the terminal."""

from __future__ import annotations

import json
import math
import os
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table

from distrl.core.display import Budget, Shown
from distrl.core.wandb_logger import WandbLogger


class MetricsLogger:
    """Appends one JSON line per iteration, mirrors scalars to TensorBoard, shows progress."""

    def __init__(self, logdir: Path, progress: bool = True, resumed_at: int | None = None,
                 budget: Budget | None = None, wandb: WandbLogger | None = None):
        """``resumed_at``: a resumed run's checkpoint iteration; rows logged past it are
        dropped, since the run redoes (and logs again) those iterations. ``budget``: what
        the progress row measures the run against (none shown without it). ``wandb``: a
        W&B run that gets the TensorBoard scalars too."""
        from torch.utils.tensorboard import SummaryWriter  # slow import: only when logging

        logdir.mkdir(parents=True, exist_ok=True)
        if resumed_at is not None:
            drop_rows_after(logdir / "metrics.jsonl", resumed_at)
        self.jsonl = (logdir / "metrics.jsonl").open("a")
        self.tb = SummaryWriter(str(logdir))
        self.wandb = wandb
        self.console = Console(stderr=True)
        self.live: Live | None = None
        if progress and sys.stderr.isatty():
            self.live = Live(console=self.console, refresh_per_second=4, transient=False)
            self.live.start()
        self.plain = progress and self.live is None
        self._last_line = 0.0
        self.shown = Shown(budget)

    def log(self, metrics: dict[str, Any], last: bool = False) -> None:
        """One row: metrics.jsonl, TensorBoard (and W&B), and the screen (a live table,
        or off a TTY a line every 10 s; always for the ``last`` row)."""
        self.jsonl.write(strict_json(metrics) + "\n")
        self.jsonl.flush()
        step = int(metrics.get("env/steps_total", metrics.get("iteration", 0)))
        scalars = {key: value for key, value in metrics.items()
                   if isinstance(value, int | float) and not isinstance(value, bool)
                   and key != "iteration"}
        for key, value in scalars.items():
            self.tb.add_scalar(key, value, step)
        if self.wandb is not None:
            self.wandb.log(scalars, step)
        if self.live is not None:
            self.live.update(_table(self.shown.rows(metrics)))
        elif self.plain:
            rows = self.shown.rows(metrics, bar=False)  # every row: it keeps evaluations
            if last or time.monotonic() - self._last_line > 10.0:
                # Not a TTY (CI, nohup): a short line every 10 s instead of a live table.
                self._last_line = time.monotonic()
                self.info("  ".join(f"{k}={v}" for k, v in rows))

    def info(self, text: str) -> None:
        """A one-line message for a person (stderr, so stdout stays machine-readable),
        never wrapped: one report is one line to grep, whatever the width."""
        self.console.print(text, soft_wrap=True)

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
        self.tb.close()
        self.jsonl.close()
        if self.wandb is not None:
            self.wandb.close()


def _table(rows: list[tuple[str, str]]) -> Table:
    table = Table(title="distrl", show_header=False, min_width=48)
    for key, text in rows:
        table.add_row(key, text)
    return table


def strict_json(values: dict[str, Any]) -> str:
    """JSON that every parser reads: NaN and infinities (a mean over no episodes yet)
    become null instead of Python's non-standard NaN."""
    def clean(v: Any) -> Any:
        return None if isinstance(v, float) and not math.isfinite(v) else v
    return json.dumps({k: clean(v) for k, v in values.items()}, allow_nan=False)


def drop_rows_after(path: Path, iteration: int) -> None:
    """Keep the rows of iterations up to ``iteration`` (and no torn line a kill left
    mid-write). Rewritten through a temp file (0600 while written, then the file's own
    mode) and os.replace: a kill leaves the old file or the new one, never half of it."""
    if not path.is_file():
        return
    lines = path.read_text(errors="replace").splitlines(keepends=True)
    kept = [line for line in lines if _logged_by(line, iteration)]
    if kept == lines:
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.writelines(kept)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _logged_by(line: str, iteration: int) -> bool:
    """A whole row (ending in a newline) of an iteration up to ``iteration``."""
    try:
        row = json.loads(line)
    except ValueError:
        return False  # torn by a kill
    return line.endswith("\n") and isinstance(row, dict) and row.get("iteration", 0) <= iteration


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open() as f:
        return [json.loads(line) for line in f if line.strip()]

