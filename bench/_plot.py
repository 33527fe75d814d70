"""What every bench plot does last."""

from pathlib import Path


def save(fig, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    print(dst)


def curves(ax, trials: list[dict], style: dict[str, tuple[str, str]], **plot_kw) -> None:
    """One line per trial's (x, y) curve, coloured and labelled once per system."""
    labelled = set()
    for t in trials:
        color, label = style[t["system"]]
        xs, ys = zip(*t["curve"], strict=True)
        ax.plot(xs, ys, color=color, alpha=0.8, lw=1.2,
                label=None if t["system"] in labelled else label, **plot_kw)
        labelled.add(t["system"])
