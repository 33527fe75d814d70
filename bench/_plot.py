"""What every bench plot does last."""

from pathlib import Path


def save(fig, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    print(dst)
