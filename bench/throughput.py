"""Sampling throughput on Pong (EnvPool), side by side in one run on this machine: what
the simulator does alone, the ceiling for sampling (EnvPool stepping with the policy's
batched forward in one tight loop: no Ray, no bookkeeping), distrl's sampler with no
learning (in process, and 2 Ray env runners; each also double-buffered, ``_async``: two
pools of half the envs, one stepping while the policy acts on the other), and APPO, PPO
(also with overlap: runners sample the next batch while the learner trains) and Ape-X end
to end (APPO also double-buffered).

    python bench/throughput.py [--seconds 60] [--envs 16]

Frames are Atari frames (4 per env step: frame skip 4). Each system runs in a fresh
subprocess for ``--seconds`` (after its start-up), one torch thread per process. The
last line is JSON with every frames/s and the ratios ``sampler_to_ceiling`` (distrl's
best sampler / the ceiling), ``appo_to_ppo_frames`` (APPO / PPO end to end),
``ppo_overlap_to_ppo`` (PPO with overlap / PPO end to end) and ``async_to_sync_<system>``
(double-buffered / as it is, for each system run both ways).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).parent / "out"
ENV = "envpool:Pong-v5"
FRAME_SKIP = 4
SYSTEMS = ("envpool_random", "ceiling", "sampler", "sampler_async", "sampler_ray2",
           "sampler_async_ray2", "appo_ray2", "appo_async_ray2", "ppo_ray2", "ppo_overlap_ray2",
           "apex_ray2")
ASYNC = "_async"  # in a system's name: --vector-mode async (sampling.DoubleBuffered)


def timed(step, seconds: float) -> float:
    """Env steps per second of ``step()`` (returning steps) over ``seconds``."""
    step()  # warm-up (allocations, first frames)
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        steps += step()
    return steps / (time.perf_counter() - t0)


def envpool_random(seconds: float, envs: int) -> float:
    import envpool
    import numpy as np

    pool = envpool.make("Pong-v5", env_type="gymnasium", num_envs=envs, batch_size=envs,
                        num_threads=2)
    pool.reset()
    rng = np.random.default_rng(0)
    return timed(lambda: (pool.step(rng.integers(0, 6, envs)), envs)[1], seconds)


def ceiling(seconds: float, envs: int) -> float:
    """EnvPool (its threads as distrl's sampler makes it) and the tuned Atari network's
    forward (1 torch thread), sampling actions, in one loop: what a sampler on these
    cores cannot beat."""
    import envpool
    import torch

    from distrl.models.recurrent import actor_critic
    from distrl.tuned import tuned

    pool = envpool.make("Pong-v5", env_type="gymnasium", num_envs=envs, batch_size=envs)
    model = actor_critic(pool.observation_space, pool.action_space, tuned("atari").config.model)
    obs, _ = pool.reset()
    state = {"obs": obs}

    def step() -> int:
        with torch.inference_mode():
            logits, _ = model(torch.from_numpy(state["obs"]))
            actions = torch.distributions.Categorical(logits=logits).sample()
        state["obs"] = pool.step(actions.numpy())[0]
        return envs

    return timed(step, seconds)


def sampler(seconds: float, envs: int, vector_mode: str = "auto") -> float:
    """distrl's EnvRunner (what PPO and APPO sample with), no learning."""
    from distrl.ppo.env_runner import EnvRunner
    from distrl.tuned import tuned

    runner = EnvRunner(ENV, envs, tuned("atari").config.model, 0.99, 0.95, seed=0,
                       vector_mode=vector_mode)
    return timed(lambda: runner.fragment(32).env_steps, seconds)


def sampler_ray2(seconds: float, envs: int, vector_mode: str = "auto") -> float:
    """Two Ray env runners (envs/2 each) kept busy, no learning."""
    from distrl.appo.remote import RaySampler
    from distrl.core.config import RunConfig
    from distrl.core.sampling import seed_for
    from distrl.ppo.env_runner import EnvRunner
    from distrl.runtime.cluster import init_ray
    from distrl.tuned import tuned

    init_ray(None, 2)
    model = tuned("atari").config.model

    def kwargs(i: int, restart: int) -> dict:
        return dict(env=ENV, num_envs=envs // 2, model=model, gamma=0.99, lambda_=0.95,
                    seed=seed_for(0, i, restart), vector_mode=vector_mode)

    group = RaySampler(kwargs, 2, 1.0, RunConfig(), steps_per_env=32, max_queued=2)
    local = EnvRunner(ENV, 1, model, 0.99, 0.95, seed=0)  # for a set of weights to act with
    group.publish({k: v.numpy().copy() for k, v in local.model.state_dict().items()}, 0)
    rate = timed(lambda: sum(f.env_steps for f in group.take(2)), seconds)
    group.close()
    return rate


def end_to_end(algo: str, seconds: float, envs: int, overlap: bool = False,
               vector_mode: str = "auto") -> float:
    """Env steps/s of a whole run (learning included) with 2 Ray env runners; PPO with
    ``overlap`` samples the next batch while it trains."""
    import dataclasses

    from distrl import RunConfig
    from distrl.registry import ALGORITHMS
    from distrl.tuned import tuned

    logdir = OUT / f"runs/throughput_{algo}{'_overlap' if overlap else ''}_{vector_mode}"
    shutil.rmtree(logdir, ignore_errors=True)
    base = tuned("atari").config
    config_cls = ALGORITHMS[algo].config
    if algo == "apex":
        config = config_cls(num_workers=2, num_envs_per_worker=envs // 2,
                            model=dataclasses.replace(base.model, vf_share_layers=False))
    else:
        fields = {f.name for f in dataclasses.fields(config_cls)}
        shared = {k: v for k, v in dataclasses.asdict(base).items()
                  if k in fields and k != "model"}
        config = config_cls(**{**shared, "model": base.model, "num_env_runners": 2,
                               "num_envs_per_env_runner": envs // 2,
                               "train_batch_size": 32 * envs})
        if algo == "appo":  # IMPALA's single pass over each batch (RLlib's APPO default)
            config = dataclasses.replace(config, num_epochs=1)
        if overlap:
            config = dataclasses.replace(config, overlap=True)
    result = ALGORITHMS[algo].train()(config, RunConfig(
        env=ENV, max_time_s=seconds, max_env_steps=10**9, logdir=str(logdir),
        progress=False, vector_mode=vector_mode))
    return result["env/steps_total"] / result["time/total_s"]


def one(system: str, seconds: float, envs: int) -> dict:
    import torch

    torch.set_num_threads(1)
    runs = {"envpool_random": envpool_random, "ceiling": ceiling}
    samplers = {"sampler": sampler, "sampler_ray2": sampler_ray2}
    mode = "async" if ASYNC in system else "auto"
    name = system.replace(ASYNC, "")
    if name in runs:
        steps_per_s = runs[name](seconds, envs)
    elif name in samplers:
        steps_per_s = samplers[name](seconds, envs, mode)
    elif name == "ppo_overlap_ray2":
        steps_per_s = end_to_end("ppo", seconds, envs, overlap=True)
    else:
        steps_per_s = end_to_end(name.removesuffix("_ray2"), seconds, envs, vector_mode=mode)
    return {"system": system, "frames_per_s": FRAME_SKIP * steps_per_s}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--envs", type=int, default=16)
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS))
    ap.add_argument("--one", choices=SYSTEMS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.seconds, args.envs)))
        return
    rates = {}
    for system in args.systems:
        out = subprocess.run([sys.executable, __file__, "--one", system, "--seconds",
                              str(args.seconds), "--envs", str(args.envs)],
                             capture_output=True, text=True, check=True)
        trial = json.loads(out.stdout.strip().splitlines()[-1])
        print(json.dumps(trial), flush=True)
        rates[f"{system}_frames_per_s"] = trial["frames_per_s"]
    best = max((rate for name, rate in rates.items() if name.startswith("sampler")), default=0)
    from distrl.envs.envpool_vec import ale_v5_differences

    summary = {**rates, "envs": args.envs, "seconds": args.seconds,
               "differs_from_ale_v5": ale_v5_differences(ENV)}
    for name in rates:
        if ASYNC in name and name.replace(ASYNC, "") in rates:
            system = name.replace(ASYNC, "").removesuffix("_frames_per_s")
            summary[f"async_to_sync_{system}"] = rates[name] / rates[name.replace(ASYNC, "")]
    if "ceiling_frames_per_s" in rates:
        summary["sampler_to_ceiling"] = best / rates["ceiling_frames_per_s"]
    if {"appo_ray2_frames_per_s", "ppo_ray2_frames_per_s"} <= rates.keys():
        summary["appo_to_ppo_frames"] = (rates["appo_ray2_frames_per_s"]
                                         / rates["ppo_ray2_frames_per_s"])
    if {"ppo_overlap_ray2_frames_per_s", "ppo_ray2_frames_per_s"} <= rates.keys():
        summary["ppo_overlap_to_ppo"] = (rates["ppo_overlap_ray2_frames_per_s"]
                                         / rates["ppo_ray2_frames_per_s"])
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
