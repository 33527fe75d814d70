"""Plot bench/ppo_mujoco.py's runs: mean-100 return against env steps and against wall
time, one row per task, every distrl seed found and SB3's curves (rl-zoo settings, from
the same bench run) where there are any, with Tianshou's published 1M-step return (the
table's peer) as a dashed line.

    python bench/plot_ppo_mujoco.py [bench/out] [out.png]

Reads ``<out>/runs/ppo_<env>_0_<seed>/metrics.jsonl`` (distrl's in-process runs) and
``<out>/ppo_mujoco_curves.json`` (SB3's trials).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from _plot import curves, pyplot, save
from ppo_mujoco import TIANSHOU_1M

plt = pyplot()

HERE = Path(__file__).parent
SB3_STYLE = {"sb3": ("black", "SB3 (rl-zoo), same run")}


def runs(out: Path, env: str) -> dict[int, list[dict]]:
    """Seed -> metrics rows of each in-process distrl run of ``env`` under ``out``."""
    found = {}
    for path in sorted(out.glob(f"runs/ppo_{env}_0_*/metrics.jsonl")):
        seed = path.parent.name.removeprefix(f"ppo_{env}_0_")
        if seed.isdigit():  # not a variant's folder (another entry, replaced fields)
            found[int(seed)] = [json.loads(line) for line in path.read_text().splitlines()]
    return found


def sb3_trials(out: Path, env: str) -> list[dict]:
    """SB3's trials of ``env`` with a curve, from the last bench run (none if it has none)."""
    path = out / "ppo_mujoco_curves.json"
    trials = json.loads(path.read_text()) if path.exists() else []
    return [t for t in trials if t["system"] == "sb3" and t["env"] == env and t.get("curve")]


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "out"
    dst = (Path(sys.argv[2]) if len(sys.argv) > 2
           else HERE.parent / "docs" / "img" / "ppo_mujoco.png")
    envs = [e for e in TIANSHOU_1M if runs(out, e)]
    fig, axes = plt.subplots(len(envs), 2, figsize=(10, 2.6 * len(envs)), squeeze=False)
    for (by_steps, by_time), env in zip(axes, envs, strict=True):
        for seed, rows in runs(out, env).items():
            ret = [r["env/episode_return_mean"] for r in rows]
            style = dict(lw=1.1, color=f"C{seed}")
            by_steps.plot([r["env/steps_total"] for r in rows], ret, label=f"distrl seed {seed}",
                          **style)
            by_time.plot([r["time/total_s"] for r in rows], ret, **style)
        sb3 = sb3_trials(out, env)
        curves(by_steps, sb3, SB3_STYLE, x="env_steps", ls=":")
        curves(by_time, sb3, SB3_STYLE, ls=":")
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
