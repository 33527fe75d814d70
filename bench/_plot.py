"""What every bench plot shares: matplotlib without a display (``pyplot()``), the curves,
the save."""

from pathlib import Path
from types import ModuleType

from _extra import need


def pyplot() -> ModuleType:
    """matplotlib.pyplot drawing to files only (no display needed); a missing bench extra
    is one line."""
    need("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    print(dst)


X_AXES = {"seconds": 0, "env_steps": 1}
"""A curve point is (seconds since training began, env steps, mean-100 return)."""


def curves(ax, trials: list[dict], style: dict[str, tuple[str, str]], x: str = "seconds",
           **plot_kw) -> None:
    """One line per trial's curve, return against ``x`` (a key of X_AXES), coloured and
    labelled once per system."""
    labelled = set()
    for t in trials:
        color, label = style[t["system"]]
        xs, ys = [p[X_AXES[x]] for p in t["curve"]], [p[2] for p in t["curve"]]
        ax.plot(xs, ys, color=color, alpha=0.8, lw=1.2,
                label=None if t["system"] in labelled else label, **plot_kw)
        labelled.add(t["system"])
