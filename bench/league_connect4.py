"""Connect four: wall time until the main agent first wins >= 0.95 against a uniformly
random player, distrl (tuned `connect_four` league, in-process, judged on 200 greedy
evaluation games in both seats) next to RLlib 2.60's own
examples/multi_agent/self_play_with_open_spiel.py run as shipped (PPO, 2 env runners,
`--num-cpus 4` because it asks for 3 logical CPUs; judged as its callback judges itself:
win rate > 0.95 on training episodes, the moment it adds its first opponent). RLlib is
capped at --cap seconds and a miss counts as the cap. Same machine, same run.

    python bench/league_connect4.py [--cap 1200] [--seed 0]

The last line is JSON: both times, RLlib's last win rate and ratio = distrl / RLlib.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from _extra import need

OUT = Path(__file__).parent / "out"
WIN = re.compile(r"Iter=(\d+) win-rate=([0-9.]+) -> (adding new opponent)?")


def run_distrl(seed: int) -> dict:
    from distrl import RunConfig, train_league
    from distrl.tuned import tuned

    t = tuned("connect_four", "league")
    logdir = OUT / f"runs/league_c4_{seed}"
    shutil.rmtree(logdir, ignore_errors=True)
    t0 = time.perf_counter()
    r = train_league(t.config, RunConfig(env=t.env, seed=seed, max_env_steps=1_000_000,
                                         logdir=str(logdir), progress=False))
    return {"distrl_s": time.perf_counter() - t0, "distrl_train_s": r["time/total_s"],
            "distrl_moves": r["env/steps_total"], "distrl_stopped_by": r["stopped_by"],
            "distrl_win_rate": r.get("league/win_rate/main_0_vs_random")}


def run_rllib(cap: float) -> dict:
    """RLlib's example as a subprocess; its stdout is scanned for the callback's lines."""
    import ray.rllib

    script = (Path(ray.rllib.__file__).parent
              / "examples/multi_agent/self_play_with_open_spiel.py")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(script), "--num-cpus", "4"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    last_rate, iters, reached, errors = None, 0, None, 0
    try:
        for line in proc.stdout:
            errors += "IndexError" in line
            m = WIN.search(line)
            if m:
                iters, last_rate = int(m.group(1)), float(m.group(2))
                if m.group(3):
                    reached = time.perf_counter() - t0
                    break
            if time.perf_counter() - t0 > cap:
                break
    finally:
        proc.kill()
        proc.wait()
    return {"rllib_s": reached if reached is not None else cap, "rllib_reached": reached
            is not None, "rllib_last_win_rate": last_rate, "rllib_iterations": iters,
            "rllib_index_errors": errors, "rllib_cap_s": cap}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cap", type=float, default=1200.0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    out = run_distrl(args.seed)
    print(json.dumps(out), flush=True)
    out.update(run_rllib(args.cap))
    out["ratio"] = out["distrl_s"] / out["rllib_s"]
    print(json.dumps(out))


if __name__ == "__main__":
    need("ray.rllib")
    main()
