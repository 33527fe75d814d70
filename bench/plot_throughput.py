"""Plot Atari frames/s of each system from bench/throughput.py's summary lines: one bar a
system (its median, the whisker its spread over the repeats), the simulator alone and the
one- and two-process ceilings as reference lines. Rows from a second run (``--also``)
are hatched and marked as such: they were measured at another time.

    python bench/throughput.py | tee bench/out/throughput.jsonl
    python bench/plot_throughput.py [--src bench/out/throughput.jsonl] [--also FILE] [--dst PNG]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from _plot import pyplot, save

plt = pyplot()

HERE = Path(__file__).parent
LABELS = {  # bench/throughput.py's system names, as a reader says them
    "sampler": "distrl sampler, in process",
    "sampler_async": "distrl sampler, in process, double-buffered",
    "sampler_ray2": "distrl sampler, 2 Ray runners",
    "sampler_async_ray2": "distrl sampler, 2 Ray runners, double-buffered",
    "apex_ray2": "Ape-X actors, 2 Ray runners",
    "appo_ray2": "APPO end to end, 2 Ray runners (1 epoch)",
    "appo_equal_work_ray2": "APPO end to end, 2 Ray runners (PPO's epochs)",
    "appo_async_ray2": "APPO end to end, 2 Ray runners, double-buffered",
    "ppo_overlap_ray2": "PPO --overlap, 2 Ray runners",
    "ppo_ray2": "PPO end to end, 2 Ray runners",
}
REFERENCES = {"envpool_random": ("EnvPool, random actions", "tab:gray"),
              "ceiling_1proc": ("ceiling, one process", "tab:red"),
              "ceiling_2proc": ("ceiling, two processes", "tab:orange")}


def summary(path: Path) -> dict[str, tuple[float, list[float]]]:
    """The last JSON line of a bench/throughput.py output: by system, its median frames/s
    (of a ceiling: the better of its plain and double-buffered loops) and spread."""
    last = [x for x in path.read_text().splitlines() if x.startswith("{")][-1]
    row = json.loads(last)
    out = {k.removesuffix("_frames_per_s"): (v, row[k.replace("frames_per_s", "spread")])
           for k, v in row.items() if k.endswith("_frames_per_s")}
    for name in ("ceiling_1proc", "ceiling_2proc"):
        loops = [out[n] for n in (name, name + "_async") if n in out]
        if loops:
            out[name] = max(loops)
    return out


def bars(main: dict, also: dict) -> list[tuple[str, float, list[float], bool]]:
    """(label, frames/s, spread, from the second run) for each system, in LABELS' order."""
    out = []
    for name, label in LABELS.items():
        if name in main:
            out.append((label, *main[name], False))
        elif name in also:
            out.append((label + " (other run)", *also[name], True))
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--src", type=Path, default=HERE / "out" / "throughput.jsonl")
    parser.add_argument("--also", type=Path, default=None)
    parser.add_argument("--dst", type=Path,
                        default=HERE.parent / "docs" / "img" / "throughput.png")
    args = parser.parse_args()
    main_run = summary(args.src)
    rows = bars(main_run, summary(args.also) if args.also else {})
    fig, ax = plt.subplots(figsize=(8, 4))
    ys = range(len(rows))
    medians = [v for _, v, _, _ in rows]
    whiskers = [[v - lo for (_, v, (lo, _), _) in rows], [hi - v for (_, v, (_, hi), _) in rows]]
    ax.barh(ys, medians, xerr=whiskers, color="tab:blue",
            hatch=["//" if other else "" for *_, other in rows])
    ax.set_yticks(list(ys), [label for label, *_ in rows])
    for name, (label, color) in REFERENCES.items():
        if name in main_run:
            ax.axvline(main_run[name][0], color=color, ls="--", label=label)
    ax.set(xlabel="Atari frames/s (Pong, 16 envs, 2 cores)")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="upper right")
    save(fig, args.dst)


if __name__ == "__main__":
    main()
