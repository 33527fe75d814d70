"""What the time-to-threshold benches share: each trial is a fresh subprocess of the
bench script (``--one SYSTEM --seed S``), interleaved by seed so that machine noise hits
every system alike."""

from __future__ import annotations

import json
import subprocess
import sys


def run_trials(script: str, systems: tuple[str, ...], seeds: list[int],
               extra: list[str]) -> list[dict]:
    """Every (seed, system) trial's JSON (its last stdout line), printed without curves
    as it completes."""
    trials = []
    for seed in seeds:
        for system in systems:
            out = subprocess.run([sys.executable, script, "--one", system, "--seed", str(seed),
                                  *extra], capture_output=True, text=True, check=True)
            trial = json.loads(out.stdout.strip().splitlines()[-1])
            trials.append(trial)
            print(json.dumps({k: v for k, v in trial.items() if k != "curve"}), flush=True)
    return trials
