"""Plot bench/ppo_mujoco.py's distrl runs: mean-100 return against env steps and against
wall time, one row per task, every seed found, with Tianshou's published 1M-step return
(the table's peer) as a dashed line.

    python bench/plot_ppo_mujoco.py [bench/out/runs] [out.png]

Reads ``<runs>/ppo_<env>_0_<seed>/metrics.jsonl`` (the in-process runs).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from _plot import save
from ppo_mujoco import TIANSHOU_1M

HERE = Path(__file__).parent


def runs(root: Path, env: str) -> dict[int, list[dict]]:
    """Seed -> metrics rows of each in-process run of ``env`` under ``root``."""
    found = {}
    for path in sorted(root.glob(f"ppo_{env}_0_*/metrics.jsonl")):
        seed = int(path.parent.name.rsplit("_", 1)[1])
        found[seed] = [json.loads(line) for line in path.read_text().splitlines()]
    return found


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "out" / "runs"
    dst = (Path(sys.argv[2]) if len(sys.argv) > 2
           else HERE.parent / "docs" / "img" / "ppo_mujoco.png")
    envs = [e for e in TIANSHOU_1M if runs(root, e)]
    fig, axes = plt.subplots(len(envs), 2, figsize=(10, 2.6 * len(envs)), squeeze=False)
    for (by_steps, by_time), env in zip(axes, envs, strict=True):
        for seed, rows in runs(root, env).items():
            ret = [r["env/episode_return_mean"] for r in rows]
            style = dict(lw=1.1, color=f"C{seed}")
            by_steps.plot([r["env/steps_total"] for r in rows], ret, label=f"distrl seed {seed}",
                          **style)
            by_time.plot([r["time/total_s"] for r in rows], ret, **style)
        for ax in (by_steps, by_time):
            ax.axhline(TIANSHOU_1M[env], color="gray", ls="--", lw=0.8)
            ax.grid(alpha=0.3)
            ax.set_ylabel(f"{env}\nmean-100 return")
        by_steps.legend(loc="upper left", fontsize=7, title="dashed: Tianshou at 1M",
                        title_fontsize=7)
    axes[-1][0].set_xlabel("env steps")
    axes[-1][1].set_xlabel("wall-clock seconds (in process, 1 torch thread)")
    save(fig, dst)


if __name__ == "__main__":
    main()
