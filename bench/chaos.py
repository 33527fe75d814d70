"""Chaos run: each algorithm trains on an embedded Ray for a fixed time while a killer
sends SIGKILL to a random one of the run's own actor processes (found by its Ray process
title among the run's descendants) every ``--period`` seconds. Each run must finish,
report every kill as a restart (faults/restarts/*), and reach a learning result within
the range of clean runs of the same length (seeds 0, 1 and 2).

Kills start one period after the first iteration is logged (faults during start-up
are not what this measures) and stop one period before the end, so that the last one
is noticed (an actor is found dead at its next call). Targets are the actors distrl
replaces: env runners (PPO's and APPO's), DD-PPO workers, Ape-X actors and replay shards, AlphaZero
self-play workers, league match runners, learners, replay actors and the policy store;
in a run that has a policy store (APPO, the league) the first kill is the store's.
The league checkpoints every 5 iterations (clean runs too): a restarted learner resumes
its optimizer from the last checkpoint.

Each run's output goes to files (a chatty run must not block on a full pipe) and each
run is bounded at ``--seconds`` + BOUND_MARGIN_S: one still going then is killed and
reported as a failure with its last lines, as is one that exits with an error.

    python bench/chaos.py [--algos ppo appo ddppo apex league alphazero] [--seconds 90]
        [--period 20]

Prints one JSON line per run, then the summary: per algorithm kills, restarts, the
chaos run's result and the clean runs' results.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

TARGETS = ("EnvRunner", "DDPPOWorker", "_RemoteActor", "ReplayShard", "MatchRunner",
           "PolicyLearner", "ReplayActor", "PolicyStore", "SelfPlayer")
CARTPOLE = ["--tuned", "cartpole", "--stop-return", "None"]
RUNS = {  # algorithm -> train flags (no early stop: every run lasts --seconds)
    "ppo": ["ppo", *CARTPOLE, "--num-env-runners", "2"],
    "appo": ["appo", *CARTPOLE, "--num-env-runners", "2"],
    "ddppo": ["ddppo", *CARTPOLE],
    "apex": ["apex", *CARTPOLE, "--num-replay-buffer-shards", "2"],
    "league": ["league", "--tuned", "connect_four", "--stop-win-rate", "None",
               "--league-eval-interval", "0", "--num-env-runners", "2",
               "--num-cpus-per-env-runner", "0.5", "--num-cpus-per-learner", "0.5",
               "--checkpoint-every", "5"],
    # Two self-play workers (the tuned entry); a killed one is replaced and its share of
    # the call played again.
    "alphazero": ["alphazero", "--tuned", "connect_four", "--num-cpus-per-worker", "0.5",
                  "--eval-interval", "0"],
}
GAMES = ("league", "alphazero")  # scored by win rate against random
STORES = ("appo", "league")  # runs with a policy store: their first kill is the store's
BOUND_MARGIN_S = 240.0
"""Ray's start, the last iteration, a checkpoint and shutdown: more than any finished run
here needs past --seconds (a run past max_time_s's own grace, 60 s, is cut by distrl)."""


def actors(root: psutil.Process) -> list[psutil.Process]:
    """The run's actor processes that distrl replaces when they die."""
    found = []
    for p in root.children(recursive=True):
        title = title_of(p)
        if any(title.startswith(f"ray::{t}") for t in TARGETS):
            found.append(p)
    return found


def pick(algo: str, victims: list[psutil.Process], kills: list[dict], rng: random.Random
         ) -> psutil.Process:
    """The store's process for the first kill of a run that has one, else at random."""
    stores = [v for v in victims if title_of(v).startswith("ray::PolicyStore")]
    return stores[0] if algo in STORES and not kills and stores else rng.choice(victims)


def title_of(p: psutil.Process) -> str:
    try:
        return (p.cmdline() or [""])[0]
    except psutil.Error:
        return ""


def train(algo: str, seed: int, seconds: float, period: float | None, logdir: Path
          ) -> dict:
    """One run; with ``period``, SIGKILL an actor every period seconds. A run that fails
    or outlives its bound is reported with ``failed`` and its last lines."""
    cmd = [sys.executable, "-m", "distrl", "train", *RUNS[algo], "--seed", str(seed),
           "--max-time-s", str(seconds), "--max-env-steps", "100000000",
           "--max-restarts", "1000", "--logdir", str(logdir), "--json", "--no-progress"]
    logdir.mkdir(parents=True, exist_ok=True)
    out, err = logdir / "stdout.txt", logdir / "stderr.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=stderr, text=True)
        kills, over = watch(algo, proc, seed, seconds, period, logdir / "metrics.jsonl")
    run = {"algo": algo, "seed": seed, "chaos": period is not None, "kills": len(kills),
           "killed": kills}
    if proc.returncode != 0:
        why = (f"over its bound ({seconds + BOUND_MARGIN_S:g} s)" if over
               else f"exit status {proc.returncode}")
        tail = (out.read_text() + err.read_text()).strip().splitlines()[-15:]
        return {**run, "failed": why, "last_lines": tail}
    result = json.loads(out.read_text().strip().splitlines()[-1])
    restarts = sum(v for k, v in result.items() if k.startswith("faults/restarts/"))
    return {**run, "restarts": int(restarts), "result": score(algo, logdir),
            "env_steps": result.get("env/steps_total")}


def watch(algo: str, proc: subprocess.Popen, seed: int, seconds: float,
          period: float | None, metrics: Path) -> tuple[list[dict], bool]:
    """Kill actors on schedule until the run ends; kill the run (and what it started)
    once it outlives seconds + BOUND_MARGIN_S. Returns the kills, and whether it did."""
    root, kills, rng = psutil.Process(proc.pid), [], random.Random(seed)
    started = None  # when the first iteration was logged: every actor is up by then
    bound = time.monotonic() + seconds + BOUND_MARGIN_S
    while proc.poll() is None:
        time.sleep(0.5)
        now = time.monotonic()
        if now > bound:
            for p in [*root.children(recursive=True), root]:
                with contextlib.suppress(psutil.Error):
                    p.kill()
            proc.wait()
            return kills, True
        if period is None:
            continue
        victims = actors(root)
        if started is None:
            started = now if metrics.is_file() and metrics.stat().st_size else None
            continue
        due = started + period * (len(kills) + 1)
        if now < due or due > started + seconds - period or not victims:
            continue
        victim = pick(algo, victims, kills, rng)
        title = title_of(victim)
        try:
            victim.kill()
        except psutil.Error:  # it ended on its own meanwhile: pick again next round
            continue
        kills.append({"t": round(now - started, 1), "actor": title})
    return kills, False


def score(algo: str, logdir: Path) -> float:
    """The learning result: greedy mean return of 20 episodes, or for a game (league,
    AlphaZero) the main agent's win rate against a random player over 200 games."""
    episodes = "200" if algo in GAMES else "20"
    out = subprocess.run([sys.executable, "-m", "distrl", "eval", str(logdir), "--episodes",
                          episodes, "--json"], capture_output=True, text=True, check=True)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    return report["win_rate"] if algo in GAMES else report["episode_return_mean"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--algos", nargs="+", default=list(RUNS))
    ap.add_argument("--seconds", type=float, default=90.0)
    ap.add_argument("--period", type=float, default=20.0)
    args = ap.parse_args()
    summary = {}
    with tempfile.TemporaryDirectory() as tmp:
        for algo in args.algos:
            runs = []
            for seed, period in ((0, None), (1, None), (2, None), (0, args.period)):
                logdir = Path(tmp, f"{algo}_{seed}_{'chaos' if period else 'clean'}")
                runs.append(train(algo, seed, args.seconds, period, logdir))
                print(json.dumps(runs[-1]), flush=True)
            failed = [r for r in runs if "failed" in r]
            if failed:
                kind = {True: "chaos", False: "clean"}
                summary[algo] = {"failed": [f"seed {r['seed']} {kind[r['chaos']]}: "
                                            f"{r['failed']}" for r in failed]}
                continue
            clean = [r["result"] for r in runs if not r["chaos"]]
            chaos = runs[-1]
            summary[algo] = {
                "kills": chaos["kills"], "restarts": chaos["restarts"],
                "return" if algo not in GAMES else "win_rate": chaos["result"],
                "clean_return" if algo not in GAMES else "clean_win_rate": clean,
                "restarts_equal_kills": chaos["restarts"] == chaos["kills"],
                "within_clean_spread": min(clean) <= chaos["result"] <= max(clean),
                "not_worse_than_clean": chaos["result"] >= min(clean)}
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
