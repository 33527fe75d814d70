"""``distrl plot RUN [RUN ...]``: the picture a person wants after a run, from its
metrics.jsonl, without starting TensorBoard: the return (evaluations too) and, for game
runs, win rates and the main agents' Elo, against env steps and against wall time,
several runs on one figure, written as a PNG (matplotlib: ``pip install 'distrl[plot]'``).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tyro

from distrl.core.display import is_game_metric
from distrl.core.metrics import read_jsonl
from distrl.core.resume import resume_logdir

PLOT_EXTRA = "pip install 'distrl[plot]'"
X_AXES = {"env/steps_total": "env steps", "time/total_s": "wall time (s)"}
PANELS = ("return", "win rate", "Elo")


@dataclass(frozen=True)
class Plot:
    """Plot runs' curves from their metrics.jsonl into one PNG."""

    runs: tyro.conf.Positional[tuple[str, ...]]
    """Runs' logdirs (or their checkpoint/ directories)."""
    out: str | None = None
    """The PNG to write (default: plot.png in the first run's logdir)."""


def panel_of(key: str) -> str | None:
    """Which panel a metric is drawn in: the training and evaluation returns, win rates
    (against outside opponents and random), a main agent's Elo (snapshots, with an @ in
    their ids, would bury it); None for the rest."""
    if key in ("env/episode_return_mean", "eval/episode_return_mean"):
        return "return"
    if key.startswith("league/elo/") and "@" not in key:
        return "Elo"
    if is_game_metric(key) and "win_rate" in key:
        return "win rate"
    return None


def curves(logdir: Path) -> dict[str, dict[str, list[tuple[float, float, float]]]]:
    """panel -> metric -> [(env steps, seconds, value)] of one run, in iteration order.
    A game run's training return (self-play: near 0 whoever wins) is left out."""
    rows = read_jsonl(logdir / "metrics.jsonl")
    game = any(is_game_metric(k) for row in rows for k in row)
    out: dict[str, dict[str, list]] = {}
    for row in rows:
        for key, value in row.items():
            panel = panel_of(key)
            if panel is None or value is None or (game and key == "env/episode_return_mean"):
                continue
            point = (row.get("env/steps_total", 0), row.get("time/total_s", 0.0), value)
            out.setdefault(panel, {}).setdefault(key, []).append(point)
    return {panel: dict(sorted(keys.items())) for panel, keys in out.items()}


def figure(runs: list[str | Path]) -> Any:
    """A matplotlib Figure: a row per panel some run has, a column per x axis, a line
    per (run, metric)."""
    figure_cls = _figure_class()
    logdirs = [resume_logdir(r) for r in runs]
    for logdir in logdirs:
        if not (logdir / "metrics.jsonl").is_file():
            raise FileNotFoundError(f"{str(logdir)!r} has no metrics.jsonl: give a run's "
                                    "logdir (or its checkpoint/).")
    drawn = [(logdir, curves(logdir)) for logdir in logdirs]
    panels = [p for p in PANELS if any(p in c for _, c in drawn)]
    if not panels:
        raise ValueError(f"no return, win rate or Elo logged yet in {[str(d) for d in logdirs]}")
    fig = figure_cls(figsize=(11, 3.4 * len(panels)))
    axes = fig.subplots(len(panels), 2, squeeze=False)
    for row, panel in zip(axes, panels, strict=True):
        for col, (ax, label) in enumerate(zip(row, X_AXES.values(), strict=True)):
            for logdir, runs_curves in drawn:
                for key, points in runs_curves.get(panel, {}).items():
                    ax.plot([p[col] for p in points], [p[2] for p in points],
                            label=f"{logdir.name}: {key}")
            ax.set_xlabel(label)
            ax.set_ylabel(panel)
            ax.grid(alpha=0.3)
        row[0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_runs(runs: list[str | Path], out: str | Path | None = None) -> Path:
    """figure(runs) written as a PNG at ``out`` (default: plot.png in the first run's logdir)."""
    fig = figure(runs)
    path = Path(out) if out is not None else resume_logdir(runs[0]) / "plot.png"
    fig.savefig(path, dpi=110)
    return path


def _figure_class() -> type:
    """matplotlib's Figure: drawn and saved without pyplot, so no backend is chosen or
    changed (a notebook's stays as it is) and no display is needed."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ValueError(f"distrl plot draws with matplotlib: {PLOT_EXTRA}") from None
    return Figure


def main(argv: list[str] | None = None) -> None:
    """`distrl plot`: ``argv`` are the arguments after the command's name."""
    args = tyro.cli(Plot, args=sys.argv[1:] if argv is None else argv, prog="distrl plot")
    try:
        path = plot_runs(list(args.runs), args.out)
    except (ValueError, FileNotFoundError) as err:
        raise SystemExit(f"distrl: error: {err}") from None
    print(f"wrote {path}")
