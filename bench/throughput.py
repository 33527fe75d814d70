"""Sampling throughput on Pong (EnvPool), side by side in one run on this machine: what
the simulator does alone, the ceilings for sampling, distrl's sampler with no learning (in
process, and 2 Ray env runners; each also double-buffered, ``_async``: two pools of half
the envs, one stepping while the policy acts on the other), and APPO, PPO (also with
overlap: runners sample the next batch while the learner trains) and Ape-X end to end.

    python bench/throughput.py [--seconds 60] [--envs 16] [--repeats 3]

A ceiling holds what its sampler has: the same processes, one torch thread each, the
same envs and EnvPool threads, the tuned Atari network's forward, sampling actions, and
nothing else (no Ray, no bookkeeping): ``ceiling_1proc`` one process, ``ceiling_2proc``
two processes of half the envs each; ``_async`` is the double-buffered loop for that
budget (EnvPool's own async mode: half the envs step while the policy acts on the other
half's observations, send/recv). ``sampler_to_ceiling_1proc`` divides the best
in-process sampler by the best one-process ceiling; ``sampler_to_ceiling_2proc`` the best
2-runner sampler by the best two-process ceiling. ``appo_to_ppo_frames_equal_work`` is APPO
against PPO with the same epochs and minibatches (the tuned Atari entry's);
``appo_1_epoch_to_ppo_4_epochs_frames`` is APPO with IMPALA's one pass against that PPO.

Frames are Atari frames (4 per env step: frame skip 4). Each system runs in a fresh
subprocess for ``--seconds`` (after its start-up); the set runs ``--repeats`` times,
interleaved. The last line is JSON: each system's median frames/s, its spread (min and
max over the repeats) and frames/s per core; each ratio's median over the repeats, its
spread and ``equal`` when the spread holds 1.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).parent / "out"
ENV = "envpool:Pong-v5"
FRAME_SKIP = 4
SYSTEMS = ("envpool_random", "ceiling_1proc", "ceiling_1proc_async", "ceiling_2proc",
           "ceiling_2proc_async", "sampler", "sampler_async", "sampler_ray2",
           "sampler_async_ray2", "appo_ray2", "appo_equal_work_ray2", "appo_async_ray2",
           "ppo_ray2", "ppo_overlap_ray2", "apex_ray2")
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


def ceiling(seconds: float, envs: int, double: bool = False) -> float:
    """EnvPool (its threads as distrl's sampler makes it) and the tuned Atari network's
    forward (1 torch thread), sampling actions, in one loop; ``double``: EnvPool's async
    mode, acting on half the envs while the other half steps."""
    import envpool
    import torch

    from distrl.models.recurrent import actor_critic
    from distrl.tuned import tuned

    batch = envs // 2 if double else envs
    pool = envpool.make("Pong-v5", env_type="gymnasium", num_envs=envs, batch_size=batch)
    model = actor_critic(pool.observation_space, pool.action_space, tuned("atari").config.model)
    pool.async_reset()

    def step() -> int:
        obs, *_, info = pool.recv()
        with torch.inference_mode():
            logits, _ = model(torch.from_numpy(obs))
            actions = torch.distributions.Categorical(logits=logits).sample()
        pool.send(actions.numpy(), info["env_id"])
        return batch

    return timed(step, seconds)


def ceiling_2proc(seconds: float, envs: int, double: bool = False) -> float:
    """Two processes, each the one-process ceiling on half the envs (as 2 Ray runners
    split them), summed."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn"),
                             initializer=_one_thread) as pool:
        parts = [pool.submit(ceiling, seconds, envs // 2, double) for _ in range(2)]
        return sum(p.result() for p in parts)


def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


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
               vector_mode: str = "auto", equal_work: bool = False) -> float:
    """Env steps/s of a whole run (learning included) with 2 Ray env runners; PPO with
    ``overlap`` samples the next batch while it trains; APPO makes one pass over each
    batch unless ``equal_work`` (then PPO's epochs and minibatches)."""
    import dataclasses

    from distrl import RunConfig
    from distrl.registry import ALGORITHMS
    from distrl.tuned import tuned

    logdir = OUT / f"runs/throughput_{algo}{'_overlap' if overlap else ''}_{vector_mode}"
    logdir = logdir.with_name(logdir.name + ("_equal" if equal_work else ""))
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
        if algo == "appo" and not equal_work:  # IMPALA's single pass over each batch
            config = dataclasses.replace(config, num_epochs=1)
        if overlap:
            config = dataclasses.replace(config, overlap=True)
    result = ALGORITHMS[algo].train()(config, RunConfig(
        env=ENV, max_time_s=seconds, max_env_steps=10**9, logdir=str(logdir),
        progress=False, vector_mode=vector_mode))
    return result["env/steps_total"] / result["time/total_s"]


def one(system: str, seconds: float, envs: int) -> dict:
    _one_thread()
    ceilings = {"ceiling_1proc": ceiling, "ceiling_2proc": ceiling_2proc}
    samplers = {"sampler": sampler, "sampler_ray2": sampler_ray2}
    mode = "async" if ASYNC in system else "auto"
    name = system.replace(ASYNC, "")
    if name == "envpool_random":
        steps_per_s = envpool_random(seconds, envs)
    elif name in ceilings:
        steps_per_s = ceilings[name](seconds, envs, double=mode == "async")
    elif name in samplers:
        steps_per_s = samplers[name](seconds, envs, mode)
    elif name == "ppo_overlap_ray2":
        steps_per_s = end_to_end("ppo", seconds, envs, overlap=True)
    elif name == "appo_equal_work_ray2":
        steps_per_s = end_to_end("appo", seconds, envs, equal_work=True)
    else:
        steps_per_s = end_to_end(name.removesuffix("_ray2"), seconds, envs, vector_mode=mode)
    return {"system": system, "frames_per_s": FRAME_SKIP * steps_per_s}


RATIOS = {  # name -> (numerator systems, denominator systems): the best of each side
    "sampler_to_ceiling_1proc": (("sampler", "sampler_async"),
                                 ("ceiling_1proc", "ceiling_1proc_async")),
    "sampler_to_ceiling_2proc": (("sampler_ray2", "sampler_async_ray2"),
                                 ("ceiling_2proc", "ceiling_2proc_async")),
    "sampler_to_ceiling_1proc_sync": (("sampler",), ("ceiling_1proc",)),
    "sampler_to_ceiling_1proc_async": (("sampler_async",), ("ceiling_1proc_async",)),
    "appo_to_ppo_frames_equal_work": (("appo_equal_work_ray2",), ("ppo_ray2",)),
    "appo_1_epoch_to_ppo_4_epochs_frames": (("appo_ray2",), ("ppo_ray2",)),
    "ppo_overlap_to_ppo": (("ppo_overlap_ray2",), ("ppo_ray2",)),
    "async_to_sync_sampler": (("sampler_async",), ("sampler",)),
    "async_to_sync_sampler_ray2": (("sampler_async_ray2",), ("sampler_ray2",)),
    "async_to_sync_appo_ray2": (("appo_async_ray2",), ("appo_ray2",)),
}


def summarize(rounds: list[dict[str, float]]) -> dict:
    """Each system's median frames/s and spread over the rounds; each ratio's per round,
    its median, spread and whether the spread holds 1 (``equal``)."""
    out: dict = {}
    for system in rounds[0]:
        rates = [r[system] for r in rounds]
        out[f"{system}_frames_per_s"] = statistics.median(rates)
        out[f"{system}_spread"] = [min(rates), max(rates)]
        # Every system here may use every core (EnvPool's threads): per core is per machine core.
        out[f"{system}_frames_per_s_per_core"] = statistics.median(rates) / os.cpu_count()
    for ratio, (top, bottom) in RATIOS.items():
        if not set(top + bottom) <= rounds[0].keys():
            continue
        values = [max(r[s] for s in top) / max(r[s] for s in bottom) for r in rounds]
        out[ratio] = statistics.median(values)
        out[f"{ratio}_spread"] = [min(values), max(values)]
        out[f"{ratio}_equal"] = min(values) <= 1.0 <= max(values)
    return out


def main() -> None:
    from distrl.envs.envpool_vec import ale_v5_differences

    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--envs", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS))
    ap.add_argument("--one", choices=SYSTEMS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.seconds, args.envs)))
        return
    rounds = []
    for repeat in range(args.repeats):
        rates = {}
        for system in args.systems:
            out = subprocess.run([sys.executable, __file__, "--one", system, "--seconds",
                                  str(args.seconds), "--envs", str(args.envs)],
                                 capture_output=True, text=True, check=True)
            trial = json.loads(out.stdout.strip().splitlines()[-1])
            print(json.dumps({**trial, "repeat": repeat}), flush=True)
            rates[system] = trial["frames_per_s"]
        rounds.append(rates)
    print(json.dumps({**summarize(rounds), "envs": args.envs, "seconds": args.seconds,
                      "repeats": args.repeats, "cores": os.cpu_count(),
                      "differs_from_ale_v5": ale_v5_differences(ENV)}))


if __name__ == "__main__":
    main()
