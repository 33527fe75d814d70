"""Plot mean-100 return against env steps and against wall time for every trial of
bench/ppo_lstm.py (one task), distrl beside SB3-contrib's RecurrentPPO.

    python bench/plot_ppo_lstm.py [bench/out/ppo_lstm_<task>_curves.json] [out.png]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from _plot import curves, pyplot, save

plt = pyplot()

HERE = Path(__file__).parent
STYLE = {"distrl": ("tab:blue", "distrl LSTM PPO"),
         "distrl_feedforward": ("tab:gray", "distrl feed-forward PPO"),
         "distrl_full_state": ("tab:green", "distrl, same recipe, velocities seen"),
         "distrl_full_state_tuned": ("tab:olive", "distrl, full-state env's own entry"),
         "sb3": ("tab:red", "SB3-contrib RecurrentPPO (rl-zoo)")}


def main() -> None:
    default = HERE / "out" / "ppo_lstm_stateless_cartpole_curves.json"
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else default
    dst = Path(sys.argv[2]) if len(sys.argv) > 2 else HERE.parent / "docs" / "img" / "ppo_lstm.png"
    trials = json.loads(src.read_text())
    seeds = sorted({t["seed"] for t in trials})
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    drawn = [t for t in trials if t["curve"]]  # SB3 skips repeat_after
    target = next(t["target"] for t in trials if "target" in t)
    for ax, x, label in ((axes[0], "env_steps", "env steps"),
                         (axes[1], "seconds", "wall-clock seconds since the start of training")):
        curves(ax, drawn, STYLE, x=x)
        ax.axhline(target, color="gray", ls="--", lw=0.8)
        ax.set_xlabel(label)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("mean return, last 100 episodes")
    axes[1].legend(loc="lower right", fontsize=8)
    task = trials[0]["task"] + (f" k={trials[0]['k']}" if trials[0]["k"] else "")
    fig.suptitle(f"{task} to {target:g}, seeds {seeds}, 1 torch thread")
    save(fig, dst)


if __name__ == "__main__":
    main()
