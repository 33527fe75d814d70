"""Plot the greedy evaluation return vs training seconds (evaluation time excluded) for
every trial of bench/apex_cartpole.py.

    python bench/plot_apex_cartpole.py [curves.json] [out.png]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from _plot import curves, pyplot, save

plt = pyplot()

HERE = Path(__file__).parent
STYLE = {"distrl_apex": ("tab:blue", "distrl Ape-X, 2 actors"),
         "sb3_dqn": ("tab:red", "Stable-Baselines3 DQN (rl-zoo)")}


def main() -> None:
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "out" / "apex_cartpole_curves.json"
    default_dst = HERE.parent / "docs" / "img" / "apex_cartpole.png"
    dst = Path(sys.argv[2]) if len(sys.argv) > 2 else default_dst
    trials = json.loads(src.read_text())
    fig, ax = plt.subplots(figsize=(8, 4.5))
    curves(ax, trials, STYLE, marker=".", ms=3)
    ax.axhline(475, color="gray", ls="--", lw=0.8)
    ax.set_xlabel("training seconds (evaluation excluded)")
    ax.set_ylabel("greedy evaluation, mean of 20 episodes")
    ax.set_title("DQN on CartPole-v1 to a greedy 475 (seeds 0-2, 2 CPU cores)")
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3)
    save(fig, dst)


if __name__ == "__main__":
    main()
