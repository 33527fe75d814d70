"""DD-PPO on CPU: env steps/s with 1 and 2 workers (weak scaling: each worker brings the
same 16 envs x 32 steps per round), time to a mean-100 return of 475 on CartPole-v1 for
1 and 2 workers and for PPO with one central learner and 2 env runners (the same 2 CPUs),
and the throughput with a straggler worker, preemption on vs off.

Every trial runs in a fresh subprocess with its own embedded Ray, interleaved so that
machine noise hits every system alike; Ray and worker start-up are left out of the
timings. One JSON line per trial, the summary as the last line.

    python bench/ddppo_scaling.py [--seeds 0 1 2] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

OUT = Path(__file__).parent / "out"
TARGET = 475.0
THROUGHPUT_ROUNDS = 60
STRAGGLER_ROUNDS = 30
STRAGGLER_SLEEP_S = 5e-4  # per env step on the slow worker (a CartPole step: ~10-20 us)


def straggler_env(token_dir: str):
    """CartPole; in the one worker process that claims the token, every step also sleeps.
    (The driver builds an env too, to read the spaces: it never claims.)"""
    def make():
        import gymnasium as gym
        import ray

        env = gym.make("CartPole-v1")
        if ray.get_runtime_context().get_actor_id() is None:
            return env
        path = os.path.join(token_dir, "slow")
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            os.write(fd, str(os.getpid()).encode())
            os.close(fd)
        except FileExistsError:
            pass
        if Path(path).read_text() == str(os.getpid()):
            env = gym.wrappers.TransformReward(env, lambda r: time.sleep(STRAGGLER_SLEEP_S) or r)
        return env
    return make


def trial(kind: str, workers: int, seed: int) -> dict:
    import ray

    from distrl.core.config import RunConfig
    from distrl.ddppo.train import train_ddppo
    from distrl.ppo.train import train_ppo
    from distrl.tuned import tuned

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    logdir = tempfile.mkdtemp(prefix="ddppo_bench_")
    run = RunConfig(seed=seed, logdir=logdir, progress=False, max_env_steps=300_000)
    cfg = replace(tuned("cartpole", "ddppo").config, num_workers=workers)
    per_round = cfg.worker_batch_size * workers
    if kind == "to475_ppo":
        t = tuned("cartpole")
        r = train_ppo(t.for_runners(2), replace(run, stop_return=TARGET))
    elif kind == "to475":
        r = train_ddppo(cfg, replace(run, stop_return=TARGET))
    elif kind == "throughput":
        r = train_ddppo(cfg, replace(run, max_env_steps=THROUGHPUT_ROUNDS * per_round))
    else:  # straggler_on / straggler_off, 2 workers
        threshold = 0.5 if kind == "straggler_on" else 1.0
        cfg = replace(cfg, preemption_threshold=threshold)
        r = train_ddppo(cfg, replace(run, env=straggler_env(tempfile.mkdtemp()),
                                     max_env_steps=STRAGGLER_ROUNDS * per_round))
    rows = [json.loads(x) for x in Path(logdir, "metrics.jsonl").read_text().splitlines()]
    ray.shutdown()
    return {
        "kind": kind, "workers": workers, "seed": seed,
        "reached": r["stopped_by"] == "stop_return", "train_s": r["time/total_s"],
        "env_steps": r["env/steps_total"], "steps_per_s": r["env/steps_total"] / r["time/total_s"],
        "allreduce_s": sum(x.get("ddppo/allreduce_s", 0.0) for x in rows),
        "preempted_steps": sum(x.get("ddppo/preempted_steps", 0) for x in rows),
        "rounds": len(rows),
    }


PLAN_THROUGHPUT = [("throughput", 1), ("throughput", 2)]
PLAN_TO475 = [("to475", 1), ("to475", 2), ("to475_ppo", 2)]
PLAN_STRAGGLER = [("straggler_on", 2), ("straggler_off", 2)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--one", nargs=3, metavar=("KIND", "WORKERS", "SEED"))
    args = ap.parse_args()
    if args.one:
        kind, workers, seed = args.one
        print(json.dumps(trial(kind, int(workers), int(seed))))
        return
    jobs = [(k, w, rep) for rep in range(args.repeats) for k, w in PLAN_THROUGHPUT]
    jobs += [(k, w, s) for s in args.seeds for k, w in PLAN_TO475]
    jobs += [(k, w, rep) for rep in range(args.repeats) for k, w in PLAN_STRAGGLER]
    trials = []
    for kind, workers, seed in jobs:
        out = subprocess.run([sys.executable, __file__, "--one", kind, str(workers), str(seed)],
                             capture_output=True, text=True, check=True)
        trials.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(trials[-1]), flush=True)
    OUT.mkdir(exist_ok=True)
    (OUT / "ddppo_scaling_trials.json").write_text(json.dumps(trials))
    print(json.dumps(summary(trials)))


def summary(trials: list[dict]) -> dict:
    def of(kind: str, workers: int, key: str) -> list:
        return [t[key] for t in trials if t["kind"] == kind and t["workers"] == workers]

    def rate(kind: str, workers: int) -> float:  # pooled over repeats: total steps / time
        return sum(of(kind, workers, "env_steps")) / sum(of(kind, workers, "train_s"))

    w1, w2 = rate("throughput", 1), rate("throughput", 2)
    on, off = rate("straggler_on", 2), rate("straggler_off", 2)
    to475 = {name: of(kind, w, "train_s") for name, kind, w in (
        ("w1", "to475", 1), ("w2", "to475", 2), ("ppo_ray2", "to475_ppo", 2))}
    return {
        "steps_per_s_w1": w1, "steps_per_s_w2": w2, "scaling_efficiency": w2 / (2 * w1),
        "allreduce_share_w2": sum(of("throughput", 2, "allreduce_s"))
        / sum(of("throughput", 2, "train_s")),
        "time_to_475_s_w1": statistics.median(to475["w1"]),
        "time_to_475_s_w2": statistics.median(to475["w2"]),
        "time_to_475_s_ppo_ray2": statistics.median(to475["ppo_ray2"]),
        "steps_to_475_w1": of("to475", 1, "env_steps"),
        "steps_to_475_w2": of("to475", 2, "env_steps"),
        "steps_to_475_ppo_ray2": of("to475_ppo", 2, "env_steps"),
        "steps_per_s_to475_ppo_ray2": rate("to475_ppo", 2),
        "steps_per_s_to475_w2": rate("to475", 2),
        "all_reached": all(t["reached"] for t in trials if t["kind"].startswith("to475")),
        "straggler_steps_per_s_preemption_on": on, "straggler_steps_per_s_preemption_off": off,
        "preemption_speedup": on / off,
        "straggler_preempted_samples_per_round": sum(of("straggler_on", 2, "preempted_steps"))
        / sum(of("straggler_on", 2, "rounds")),
    }


if __name__ == "__main__":
    main()
