"""Plot mean-100 return vs wall time for every trial of bench/ppo_cartpole.py.

    python bench/plot_ppo_cartpole.py [curves.json] [out.png]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from _plot import curves, pyplot, save

plt = pyplot()

HERE = Path(__file__).parent
STYLE = {"distrl": ("tab:blue", "distrl in-process"),
         "distrl_ray2": ("tab:green", "distrl, 2 Ray env runners"),
         "sb3": ("tab:red", "Stable-Baselines3 (rl-zoo)")}


def main() -> None:
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "out" / "ppo_cartpole_curves.json"
    default_dst = HERE.parent / "docs" / "img" / "ppo_cartpole.png"
    dst = Path(sys.argv[2]) if len(sys.argv) > 2 else default_dst
    trials = json.loads(src.read_text())
    fig, ax = plt.subplots(figsize=(8, 4.5))
    curves(ax, trials, STYLE)
    ax.axhline(475, color="gray", ls="--", lw=0.8)
    ax.set_xlabel("wall-clock seconds since the start of training")
    ax.set_ylabel("mean return, last 100 episodes")
    ax.set_title("PPO on CartPole-v1 to 475 (seeds 0-2, 1 torch thread, 2 CPU cores)")
    ax.legend(loc="lower right")
    ax.grid(alpha=0.3)
    save(fig, dst)


if __name__ == "__main__":
    main()
