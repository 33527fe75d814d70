"""Ape-X on ALE/Pong-v5 with 2 actors for a fixed time: sampled env frames/s (4 per env
step: frame skip), learner updates/s at batch 512, bytes per stored transition, and the
peak RSS of every process (driver with the learner thread, actors, replay shards).
A record, not a race: there is no peer and no bar on a 2-core machine.

    python bench/apex_atari.py [--seconds 180] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import json
import time

import ray
import torch

from distrl import ApexConfig, ModelConfig, RunConfig
from distrl.apex.roles import DQNLearner
from distrl.apex.train import make_engine
from distrl.envs.make import env_spaces
from distrl.runtime.cluster import peak_rss_mb

ENV = "ALE/Pong-v5"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=180.0)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    torch.set_num_threads(1)
    config = ApexConfig(num_workers=2, capacity=100_000, num_replay_buffer_shards=2,
                        learning_starts=5_000, train_batch_size=512,
                        model=ModelConfig(hiddens=(512,), activation="relu"))
    obs_space, act_space = env_spaces(ENV)
    learner = DQNLearner(obs_space, act_space, config, torch.device(args.device))
    engine, ray_start_s = make_engine(config, RunConfig(env=ENV), learner, obs_space)
    try:
        warm = engine.iterate(min_time_s=0.0, min_env_steps=config.learning_starts)
        updates0, t0 = learner.updates, time.perf_counter()
        steps = sampled = 0
        while time.perf_counter() - t0 < args.seconds:
            out = engine.iterate(min_time_s=5.0, min_env_steps=0)
            steps, sampled = steps + out["env_steps"], sampled + out["sampled"]
        dt = time.perf_counter() - t0
        metrics = engine.metrics()
        rss = {"driver": peak_rss_mb(),
               "actors": ray.get([a.peak_rss_mb.remote() for a in engine.actors.actors]),
               "shards": ray.get([s.peak_rss_mb.remote() for s in engine.shards.actors])}
    finally:
        engine.close()
    print(json.dumps({
        "env": ENV, "seconds": dt, "device": args.device, "warmup_env_steps": warm["env_steps"],
        "env_frames_per_s": 4 * steps / dt, "env_steps_per_s": steps / dt,
        "learner_updates_per_s": (learner.updates - updates0) / dt,
        "replayed_transitions_per_s": sampled / dt, "train_batch_size": config.train_batch_size,
        "bytes_per_transition": metrics["replay/bytes_per_transition"],
        "naive_bytes_per_transition": 2 * 4 * 84 * 84, "replay_size": metrics["replay/size"],
        "peak_rss_mb": rss, "ray_start_s": ray_start_s}))


if __name__ == "__main__":
    main()
