"""Plot bench/ddppo_scaling.py: steps/s vs workers (with ideal scaling) and the
straggler's throughput with preemption off and on.

    python bench/plot_ddppo_scaling.py [trials.json] [out.png]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from _plot import pyplot, save

plt = pyplot()

HERE = Path(__file__).parent


def rates(trials: list[dict], kind: str, workers: int) -> list[float]:
    return [t["steps_per_s"] / 1e3 for t in trials
            if t["kind"] == kind and t["workers"] == workers]


def main() -> None:
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "out" / "ddppo_scaling_trials.json"
    default_dst = HERE.parent / "docs" / "img" / "ddppo_scaling.png"
    dst = Path(sys.argv[2]) if len(sys.argv) > 2 else default_dst
    trials = json.loads(src.read_text())
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
    w1, w2 = rates(trials, "throughput", 1), rates(trials, "throughput", 2)
    base = sum(w1) / len(w1)
    left.plot([1, 2], [base, 2 * base], "--", color="gray", label="ideal (2 x one worker)")
    for workers, ys in ((1, w1), (2, w2)):
        left.scatter([workers] * len(ys), ys, color="tab:blue", zorder=3,
                     label="measured (each repeat)" if workers == 1 else None)
    left.set_xticks([1, 2])
    left.set_xlabel("DD-PPO workers (1 CPU each)")
    left.set_ylabel("env steps / s (thousands)")
    left.set_title("CartPole, 16 envs x 32 steps per worker per round")
    left.legend(loc="upper left")
    left.grid(alpha=0.3)
    off, on = rates(trials, "straggler_off", 2), rates(trials, "straggler_on", 2)
    right.bar(["preemption off", "preemption on"], [sum(off) / len(off), sum(on) / len(on)],
              color=["tab:red", "tab:green"])
    for x, ys in enumerate((off, on)):
        right.scatter([x] * len(ys), ys, color="black", s=12, zorder=3)
    right.set_ylabel("env steps / s (thousands)")
    right.set_title("2 workers, one a straggler (+0.5 ms per env step)")
    right.grid(alpha=0.3, axis="y")
    save(fig, dst)


if __name__ == "__main__":
    main()
