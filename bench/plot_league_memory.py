"""Plot memory vs number of policies P from bench/league_memory.py's output lines.

    python bench/league_memory.py | tee bench/out/league_memory.jsonl
    python bench/plot_league_memory.py [bench/out/league_memory.jsonl] [out.png]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from _plot import pyplot, save

plt = pyplot()

HERE = Path(__file__).parent
COLORS = {"distrl": "tab:blue", "rllib": "tab:red"}


def main() -> None:
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "out" / "league_memory.jsonl"
    default_dst = HERE.parent / "docs" / "img" / "league_memory.png"
    dst = Path(sys.argv[2]) if len(sys.argv) > 2 else default_dst
    rows = [json.loads(x) for x in src.read_text().splitlines() if '"system"' in x[:20]]
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for system, color in COLORS.items():
        mine = sorted((r for r in rows if r["system"] == system), key=lambda r: r["p"])
        ps = [r["p"] for r in mine]
        left.plot(ps, [statistics.mean(r["runner_uss_mb"]) for r in mine], "o-", color=color,
                  label=system)
        right.plot(ps, [r["total_uss_mb"] / 1024 for r in mine], "o-", color=color,
                   label=system)
    left.set(xscale="log", xlabel="policies P", ylabel="USS per env runner (MB)",
             title="per env runner")
    right.set(xscale="log", xlabel="policies P", ylabel="GB",
              title="all processes + object store")
    for ax in (left, right):
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("League memory: 1.06M-parameter policies, 4 env runners")
    save(fig, dst)


if __name__ == "__main__":
    main()
