"""Memory of a league's policies: distrl's per-node PolicyStore vs RLlib's PolicyMap in
every env runner (RLlib issue #21459), same scenario in one run.

P policies of 1.06M parameters (fcnet 1024x1024, shared value layers: 4.2 MB of float32
each), 4 env runners, a random opponent each episode. RLlib: PPO on MultiAgentCartPole
with a random policy mapping, one training iteration. distrl: each runner plays
single-agent CartPole episodes, each with a policy drawn from the store (the store is
what is measured, not the game). USS/RSS of every process, from psutil, and the object
store's use; distrl alone also at P=1024, and the cost of switching policies.

    python bench/league_memory.py [--p 2 16 64 128] [--distrl-only-p 1024] [--skip-rllib]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time

from _extra import need

MiB = 2**20
HIDDENS = (1024, 1024)
RUNNERS = 4


def usage(pid: int) -> dict:
    """USS and RSS of a process, object-store pages left out of both.

    A page of Ray's shared-memory file that only one process maps (the one that wrote
    it, until a reader maps it too) counts in that process's USS; the object store is
    reported once, on its own, so those pages are subtracted here.
    """
    import psutil

    proc = psutil.Process(pid)
    info = proc.memory_full_info()
    shm = [m for m in proc.memory_maps(grouped=True) if m.path.startswith("/dev/shm/plasma")]
    private = sum(m.private_clean + m.private_dirty for m in shm)
    shm_rss = sum(m.rss for m in shm)
    return {"uss_mb": (info.uss - private) / MiB, "rss_mb": (info.rss - shm_rss) / MiB,
            "shm_rss_mb": shm_rss / MiB}


def plasma_mb() -> float:
    from ray._private.internal_api import memory_summary  # no public API for this

    return float(re.search(r"Plasma memory usage (\d+) MiB", memory_summary(stats_only=True))[1])


def distrl_one(p: int, episodes_fixed: int) -> dict:
    import gymnasium as gym
    import numpy as np
    import ray
    import torch

    from distrl.models.config import ModelConfig
    from distrl.store.policy_cache import PolicySpec, flatten_policy
    from distrl.store.remote import PolicyReader, head_store, publish

    @ray.remote(num_cpus=0)
    class Runner:
        """Plays CartPole episodes, each with a policy from the store."""

        def __init__(self, head, seed):
            torch.set_num_threads(1)
            self.reader = PolicyReader(head, max_cached_policies=100_000)
            self.env = gym.make("CartPole-v1")
            self.rng = np.random.default_rng(seed)
            self.seed = seed

        def pid(self):
            return os.getpid()

        def episode(self, policy_id, seed=None):
            policy = self.reader.policy(policy_id)
            obs, _ = self.env.reset(seed=int(self.rng.integers(1 << 30)) if seed is None else seed)
            steps, done = 0, False
            with torch.inference_mode():
                while not done:
                    logits, _ = policy(torch.from_numpy(obs)[None])
                    obs, _, term, trunc, _ = self.env.step(int(logits.argmax()))
                    steps, done = steps + 1, term or trunc
            return steps

        def map_all(self, ids):
            """First use of each policy: returns the per-policy switch (map) times."""
            times = []
            for pid in self.rng.permutation(ids):
                t0 = time.perf_counter()
                self.reader.policy(str(pid))
                times.append(time.perf_counter() - t0)
            return times

        def throughput(self, ids, episodes, blocks=10):
            """Env steps/s with one opponent throughout vs a new one each episode.

            Blocks of the two modes alternate (machine noise hits both alike) and replay
            the same episode seeds with equal weights, so both play the same steps and
            the difference is the switch: another buffer, cold in the CPU caches. Returns
            the median rate over blocks per mode.
            """
            rates = {"fixed": [], "new_each_episode": []}
            for block in range(blocks):
                for mode, rate in rates.items():
                    steps, t0 = 0, time.perf_counter()
                    for seed in range(episodes):
                        i = 0 if mode == "fixed" else block * episodes + seed
                        pid = ids[i % len(ids)]
                        self.reader.refresh([pid])  # the per-episode "is it newer?" check
                        steps += self.episode(pid, seed)
                    rate.append(steps / (time.perf_counter() - t0))
            paired = [n / f for n, f in zip(rates["new_each_episode"], rates["fixed"],
                                                strict=True)]
            return {**{mode: statistics.median(r) for mode, r in rates.items()},
                    "paired_ratio_median": statistics.median(paired), "blocks": rates}

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    head = head_store()
    spec = PolicySpec(gym.spaces.Box(-np.inf, np.inf, (4,), np.float32),
                      gym.spaces.Discrete(2), ModelConfig(hiddens=HIDDENS, vf_share_layers=True))
    base = flatten_policy(spec.build())
    ids = [f"p{i}" for i in range(p)]
    t0 = time.perf_counter()
    for pid in ids:
        # Each publish is its own object in the store (Ray never deduplicates), but equal
        # weights make every policy play the same episode for a seed, so the throughput
        # comparison below measures the switch and not episode lengths.
        publish(head, pid, base, spec)
    publish_s = time.perf_counter() - t0
    runners = [Runner.remote(head, i) for i in range(RUNNERS)]
    ray.get([r.episode.remote(ids[0]) for r in runners])  # skeletons built
    pids = ray.get([r.pid.remote() for r in runners])
    store_pid = ray.get(head.__ray_call__.remote(lambda self: os.getpid()))
    before = [usage(x)["uss_mb"] for x in pids]
    switch = [t for ts in ray.get([r.map_all.remote(ids) for r in runners]) for t in ts]
    runner_mem = [usage(x) for x in pids]
    tput = ray.get(runners[0].throughput.remote(ids, episodes_fixed))
    driver, store, plasma = usage(os.getpid()), usage(store_pid), plasma_mb()
    ray.shutdown()
    total = driver["uss_mb"] + store["uss_mb"] + sum(m["uss_mb"] for m in runner_mem) + plasma
    return {
        "system": "distrl", "p": p, "runner_uss_mb": [m["uss_mb"] for m in runner_mem],
        "runner_rss_mb": [m["rss_mb"] for m in runner_mem],
        "runner_uss_growth_mb": [a["uss_mb"] - b for a, b in zip(runner_mem, before, strict=True)],
        "driver_uss_mb": driver["uss_mb"], "store_actor_uss_mb": store["uss_mb"],
        "learner_uss_mb": 0.0, "object_store_mb": plasma, "total_uss_mb": total,
        "publish_s": publish_s, "switch_ms_median": 1e3 * statistics.median(switch),
        "steps_per_s_fixed": tput["fixed"], "steps_per_s_new_opponent": tput["new_each_episode"],
        "new_opponent_ratio_paired": tput["paired_ratio_median"],
        "throughput_blocks": tput["blocks"],
    }


def rllib_one(p: int) -> dict:
    import random

    import ray
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.examples.envs.classes.multi_agent import MultiAgentCartPole

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    ids = [f"p{i}" for i in range(p)]
    config = (
        PPOConfig()
        .environment(MultiAgentCartPole, env_config={"num_agents": 2})
        .env_runners(num_env_runners=RUNNERS, num_cpus_per_env_runner=0)
        .multi_agent(policies=set(ids),
                     policy_mapping_fn=lambda agent_id, episode, **kw: random.choice(ids))
        .rl_module(model_config={"fcnet_hiddens": list(HIDDENS), "vf_share_layers": True})
        .training(train_batch_size_per_learner=2000, minibatch_size=250, num_epochs=1)
    )
    t0 = time.perf_counter()
    algo = config.build_algo()
    algo.train()
    train_s = time.perf_counter() - t0
    pids = algo.env_runner_group.foreach_env_runner(lambda r: os.getpid(), local_env_runner=False)
    runner_mem = [usage(x) for x in pids]
    driver, plasma = usage(os.getpid()), plasma_mb()  # the learner runs in the driver
    algo.stop()
    ray.shutdown()
    total = driver["uss_mb"] + sum(m["uss_mb"] for m in runner_mem) + plasma
    return {
        "system": "rllib", "p": p, "runner_uss_mb": [m["uss_mb"] for m in runner_mem],
        "runner_rss_mb": [m["rss_mb"] for m in runner_mem],
        "driver_uss_mb": driver["uss_mb"], "learner_uss_mb": None,
        "object_store_mb": plasma, "total_uss_mb": total, "build_and_train_s": train_s,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--p", type=int, nargs="+", default=[2, 16, 64, 128])
    ap.add_argument("--distrl-only-p", type=int, nargs="*", default=[1024])
    ap.add_argument("--skip-rllib", action="store_true")
    ap.add_argument("--episodes", type=int, default=20, help="per throughput block")
    ap.add_argument("--one", choices=["distrl", "rllib"])
    args = ap.parse_args()
    if args.one:
        one = distrl_one(args.p[0], args.episodes) if args.one == "distrl" else rllib_one(args.p[0])
        print(json.dumps(one))
        return
    if not args.skip_rllib:
        need("ray.rllib")
    rows = []
    jobs = [("distrl", p) for p in args.p + args.distrl_only_p]
    jobs += [] if args.skip_rllib else [("rllib", p) for p in args.p]
    for system, p in jobs:
        out = subprocess.run([sys.executable, __file__, "--one", system, "--p", str(p),
                              "--episodes", str(args.episodes)],
                             capture_output=True, text=True)
        if out.returncode != 0:
            print(out.stderr[-3000:], file=sys.stderr)
            raise SystemExit(f"{system} P={p} failed")
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)
    print(json.dumps(summary(rows)))


def summary(rows: list[dict]) -> dict:
    def mean_uss(system: str, p: int) -> float | None:
        hit = [r for r in rows if r["system"] == system and r["p"] == p]
        return statistics.mean(hit[0]["runner_uss_mb"]) if hit else None

    def total(system: str, p: int) -> float | None:
        hit = [r for r in rows if r["system"] == system and r["p"] == p]
        return hit[0]["total_uss_mb"] if hit else None

    out: dict = {"per_p": {f"{r['system']}_p{r['p']}": r for r in rows}}
    d_growth = mean_uss("distrl", 128) - mean_uss("distrl", 2)
    out["distrl_runner_uss_growth_mb_p2_to_p128"] = d_growth
    if mean_uss("rllib", 128) is not None:
        r_growth = mean_uss("rllib", 128) - mean_uss("rllib", 2)
        out["rllib_runner_uss_growth_mb_p2_to_p128"] = r_growth
        out["uss_per_runner_growth_ratio"] = d_growth / r_growth
        out["total_uss_ratio_p128"] = total("distrl", 128) / total("rllib", 128)
    big = [r for r in rows if r["system"] == "distrl" and r["p"] >= 1024]
    out["distrl_p1024_ran"] = bool(big)
    d128 = [r for r in rows if r["system"] == "distrl" and r["p"] == 128]
    if d128:
        r = d128[0]
        out["switch_ms_median_p128"] = r["switch_ms_median"]
        out["new_opponent_throughput_ratio_p128"] = r["new_opponent_ratio_paired"]
    return out


if __name__ == "__main__":
    main()
