"""Per-component costs for a scale model's arithmetic, each measured on this machine:

1. env step (single env, random legal actions, resets included): CartPole-v1, PettingZoo
   connect four (distrl's multi-agent adapter) and ALE/Pong-v5 through distrl's
   make_atari (skipped, with a note on stderr, when ale_py does not import);
2. inference (forward under torch.no_grad) at batch 1 and 64: PPO's ActorCritic for
   CartPole and Ape-X's QNetwork for Atari frames;
3. learner updates: one PPO minibatch step (ppo_loss + Learner.step) at 512 on the
   CartPole ActorCritic, one DQN update (DQNLearner.update: dqn_loss, backward, Adam) at
   512 on the Atari QNetwork;
4. replay: PrioritizedReplay's add(50-transition fragment), sample(512) and
   update_priorities(512) on a buffer filled with ``--replay-size`` CartPole transitions,
   and the bytes a stored Atari transition costs;
5. weight bytes (float32, flatten_policy: what a broadcast or a policy-store slot holds)
   and 6. parameter counts and gradient bytes (what an all-reduce moves) of each model.

Times are medians of ``--repeats`` timed runs, after one untimed warm-up, with torch on
``--threads`` threads (default 1). One JSON line per component on stdout, progress on
stderr, and last a JSON object with every figure (flat keys, floats; units in the names:
``_us`` microseconds, ``_per_s`` per second, ``_bytes``).

    python bench/components.py [--quick] [--repeats 5] [--replay-size 100000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from distrl.apex.config import ApexConfig
from distrl.apex.replay import PrioritizedReplay
from distrl.apex.roles import DQNLearner
from distrl.core.learner import Learner
from distrl.core.types import NStepFragment, PPOBatch, Transitions
from distrl.models.config import ModelConfig
from distrl.models.distributions import mask_logits
from distrl.models.q_network import QNetwork
from distrl.models.recurrent import actor_critic
from distrl.ppo.config import PPOHyperparams
from distrl.ppo.loss import ppo_loss
from distrl.store.policy_cache import flatten_policy

sys.path.insert(0, str(Path(__file__).parent))
from replay_throughput import FRAGMENT, cartpole_fragment  # the same 50-step fragments

CARTPOLE = "CartPole-v1"
CONNECT_FOUR = "pettingzoo:connect_four_v3"
PONG = "ALE/Pong-v5"
ATARI_OBS = gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)  # 4 stacked 84x84 grey frames
ATARI_ACT = gym.spaces.Discrete(6)  # Pong's action set
BATCH = 512  # learner minibatch, replay sample and priority update
ALPHA, BETA = 0.6, 0.4
Figures = dict[str, float]


@dataclass(frozen=True)
class Budget:
    """Iterations per timed repeat."""

    env_steps: int
    pong_steps: int
    infer_calls: int  # small models, and the QNetwork at batch 1
    infer_calls_big: int  # the QNetwork at batch 64
    ppo_updates: int
    dqn_updates: int
    replay_calls: int


FULL = Budget(env_steps=5_000, pong_steps=1_000, infer_calls=500, infer_calls_big=10,
              ppo_updates=20, dqn_updates=2, replay_calls=200)
QUICK = Budget(env_steps=500, pong_steps=100, infer_calls=50, infer_calls_big=2,
               ppo_updates=3, dqn_updates=1, replay_calls=20)


def median_seconds(fn: Callable[[], object], calls: int, repeats: int) -> float:
    """Median over ``repeats`` of the seconds per call of ``calls`` calls; one warm-up."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls)
    return statistics.median(times)


def per_call(us_key: str, seconds: float, rate_key: str, items: int = 1) -> Figures:
    """Microseconds per call and items per second under the two keys."""
    return {us_key: seconds * 1e6, rate_key: items / seconds}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# 1. Env steps -----------------------------------------------------------------------------


def gym_stepper(env: gym.Env, steps: int, seed: int) -> Callable[[], None]:
    """A function that plays ``steps`` random steps of a gymnasium env (resetting at an
    episode's end, inside the timing: a reset's cost is spread over its episode)."""
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    n = int(env.action_space.n)

    def run() -> None:
        for a in rng.integers(0, n, steps):
            _, _, terminated, truncated, _ = env.step(int(a))
            if terminated or truncated:
                env.reset()
    return run


def multiagent_stepper(env, steps: int, seed: int) -> Callable[[], None]:
    """The same for distrl's multi-agent protocol: the mover's random legal action."""
    rng = np.random.default_rng(seed)
    obs = env.reset(seed=seed)[0]

    def run() -> None:
        nonlocal obs
        for u in rng.random(steps):
            if not obs:  # game over
                obs = env.reset()[0]
            agent, o = next(iter(obs.items()))
            legal = np.flatnonzero(o["action_mask"])
            obs = env.step({agent: int(legal[int(u * len(legal))])})[0]
    return run


def env_steps(budget: Budget, repeats: int) -> Figures:
    from distrl.games.games import make_multiagent_env

    out: Figures = {}
    cartpole = gym.make(CARTPOLE)
    sec = median_seconds(gym_stepper(cartpole, budget.env_steps, 0), 1, repeats)
    out |= per_call("env_cartpole_step_us", sec / budget.env_steps, "env_cartpole_steps_per_s")
    c4 = make_multiagent_env(CONNECT_FOUR)
    sec = median_seconds(multiagent_stepper(c4, budget.env_steps, 0), 1, repeats)
    out |= per_call("env_connect4_step_us", sec / budget.env_steps, "env_connect4_steps_per_s")
    try:
        import ale_py  # noqa: F401
    except ImportError as err:
        log(f"env: skipping {PONG} ({err})")
        return out
    from distrl.envs.make import make_atari

    pong = make_atari(PONG)
    sec = median_seconds(gym_stepper(pong, budget.pong_steps, 0), 1, repeats)
    out |= per_call("env_pong_step_us", sec / budget.pong_steps, "env_pong_steps_per_s")
    out["env_pong_frames_per_step"] = float(pong.get_wrapper_attr("frame_skip"))
    return out


# 2. Inference -----------------------------------------------------------------------------


def cartpole_spaces() -> tuple[gym.Space, gym.Space]:
    env = gym.make(CARTPOLE)
    return env.observation_space, env.action_space


def random_obs(space: gym.Box, n: int, generator: torch.Generator) -> torch.Tensor:
    """``n`` observations of ``space``'s shape and dtype: uint8 frames or normal floats."""
    if space.dtype == np.uint8:
        return torch.randint(0, 256, (n, *space.shape), dtype=torch.uint8, generator=generator)
    return torch.randn((n, *space.shape), generator=generator)


def inference(models: dict[str, torch.nn.Module], spaces: dict[str, gym.Space],
              budget: Budget, repeats: int) -> Figures:
    out: Figures = {}
    g = torch.Generator().manual_seed(0)
    cases = [("cartpole_ac", 1, budget.infer_calls), ("cartpole_ac", 64, budget.infer_calls),
             ("atari_q", 1, budget.infer_calls), ("atari_q", 64, budget.infer_calls_big)]
    for name, batch, calls in cases:
        model, obs = models[name], random_obs(spaces[name], batch, g)

        def forward(model=model, obs=obs) -> None:
            with torch.no_grad():
                model(obs)
        sec = median_seconds(forward, calls, repeats)
        key = f"infer_{name}_b{batch}"
        out |= per_call(f"{key}_us", sec, f"{key}_samples_per_s", batch)
    return out


# 3. Learner updates -----------------------------------------------------------------------


def ppo_minibatch_step(budget: Budget, repeats: int) -> Figures:
    """One minibatch step as ppo_update takes it: rows drawn, forward, ppo_loss, Adam."""
    cfg = PPOHyperparams(minibatch_size=BATCH)
    obs_space, act_space = cartpole_spaces()
    torch.manual_seed(0)
    model = actor_critic(obs_space, act_space, cfg.model)
    learner = Learner(model, cfg.lr_at(0), cfg.grad_clip)
    g = torch.Generator().manual_seed(0)
    obs = random_obs(obs_space, BATCH, g)
    with torch.no_grad():
        dist_inputs, values = model(obs)
    actions = model.dist.sample(dist_inputs, g)
    batch = PPOBatch(obs=obs, actions=actions, logp=model.dist.log_prob(dist_inputs, actions),
                     dist_inputs=dist_inputs, values=values,
                     advantages=torch.randn(BATCH, generator=g),
                     value_targets=values + torch.randn(BATCH, generator=g))

    def step() -> None:
        mb = batch.index(torch.randperm(BATCH, generator=g))
        d, v = model(mb.obs)
        loss, _ = ppo_loss(mask_logits(d, mb.action_mask), v, mb, cfg, model.dist,
                           cfg.kl_coeff, cfg.entropy_coeff_at(0))
        learner.step(loss, len(mb))
    sec = median_seconds(step, budget.ppo_updates, repeats)
    key = f"learn_ppo_cartpole_mb{BATCH}"
    return per_call(f"{key}_us", sec, f"{key}_samples_per_s", BATCH)


def dqn_update(budget: Budget, repeats: int) -> Figures:
    """One Ape-X learner update (online forward of obs and next obs, target forward,
    dqn_loss, backward, Adam) on a batch of random Atari transitions."""
    config = ApexConfig()
    torch.manual_seed(0)
    learner = DQNLearner(ATARI_OBS, ATARI_ACT, config, torch.device("cpu"))
    rng = np.random.default_rng(0)
    batch = Transitions(obs=rng.integers(0, 256, (BATCH, *ATARI_OBS.shape), np.uint8),
                        actions=rng.integers(0, ATARI_ACT.n, BATCH),
                        rewards=rng.choice(np.array([-1, 0, 1], np.float32), BATCH),
                        next_obs=rng.integers(0, 256, (BATCH, *ATARI_OBS.shape), np.uint8),
                        discounts=np.full(BATCH, config.gamma**config.n_step, np.float32))
    is_weights = rng.random(BATCH, dtype=np.float32)
    sec = median_seconds(lambda: learner.update(batch, is_weights), budget.dqn_updates,
                         repeats)
    key = f"learn_dqn_atari_b{BATCH}"
    return per_call(f"{key}_us", sec, f"{key}_samples_per_s", BATCH)


# 4. Replay --------------------------------------------------------------------------------


def replay_ops(size: int, budget: Budget, repeats: int) -> Figures:
    rng = np.random.default_rng(0)
    replay = PrioritizedReplay(size, (4,), np.float32, alpha=ALPHA)
    frag = cartpole_fragment(rng)
    for _ in range(size // FRAGMENT):
        replay.add(frag, rng.random(FRAGMENT))
    add = median_seconds(lambda: replay.add(frag, rng.random(FRAGMENT)),
                         budget.replay_calls, repeats)
    sample = median_seconds(lambda: replay.sample(BATCH, BETA, rng), budget.replay_calls,
                            repeats)
    ids, td = replay.sample(BATCH, BETA, rng)[1], rng.random(BATCH)  # all still stored
    update = median_seconds(lambda: replay.update_priorities(ids, td), budget.replay_calls,
                            repeats)
    rate = "transitions_per_s"
    return {**per_call(f"replay_add{FRAGMENT}_us", add, f"replay_add_{rate}", FRAGMENT),
            **per_call(f"replay_sample{BATCH}_us", sample, f"replay_sample_{rate}", BATCH),
            **per_call(f"replay_update{BATCH}_us", update, f"replay_update_{rate}", BATCH),
            "replay_size": float(len(replay)),
            "replay_cartpole_bytes_per_transition": replay.bytes_per_transition()}


def atari_replay_bytes(capacity: int = 10_000) -> Figures:
    """Bytes per slot of a replay of stacked Atari frames filled (three times round) by
    fragments of 50 steps, each with its 3 extra stack frames and the next obs at its end,
    as the actors send them."""
    rng = np.random.default_rng(1)
    stack, frame = ATARI_OBS.shape[0], ATARI_OBS.shape[1:]
    replay = PrioritizedReplay(capacity, ATARI_OBS.shape, np.uint8, frame_stack=stack)
    frames = rng.integers(0, 256, (FRAGMENT + stack, *frame), dtype=np.uint8)
    stacks = np.arange(FRAGMENT + 1)[:, None] + np.arange(stack)[None]  # sliding windows
    frag = NStepFragment(frames=frames, obs_idx=stacks[:-1], next_idx=stacks[1:],
                         actions=np.zeros(FRAGMENT, np.int64),
                         rewards=np.zeros(FRAGMENT, np.float32),
                         discounts=np.ones(FRAGMENT, np.float32))
    for _ in range(3 * capacity // FRAGMENT):
        replay.add(frag)
    naive = 2 * int(np.prod(ATARI_OBS.shape)) * ATARI_OBS.dtype.itemsize  # obs + next obs
    return {"replay_atari_bytes_per_transition": replay.bytes_per_transition(),
            "replay_atari_naive_bytes_per_transition": float(naive)}


# 5-6. Weight and gradient sizes -----------------------------------------------------------


def build_models() -> tuple[dict[str, torch.nn.Module], dict[str, gym.Space]]:
    """The measured networks (each with its algorithm's default ModelConfig; atari_ac_tuned:
    distrl.tuned's PPO Atari entry) and their observation spaces."""
    from distrl.games.games import make_multiagent_env, policy_obs_space
    from distrl.tuned import tuned

    cp_obs, cp_act = cartpole_spaces()
    c4 = make_multiagent_env(CONNECT_FOUR)
    c4_obs = policy_obs_space(c4.observation_space("player_0"))
    c4_act = c4.action_space("player_0")
    apex = ApexConfig()
    torch.manual_seed(0)
    models = {
        "cartpole_ac": actor_critic(cp_obs, cp_act, ModelConfig()),
        "connect4_ac": actor_critic(c4_obs, c4_act, ModelConfig()),
        "atari_q": QNetwork(ATARI_OBS, ATARI_ACT, apex.model, apex.dueling),
        "atari_ac": actor_critic(ATARI_OBS, ATARI_ACT, ModelConfig()),
        "atari_ac_tuned": actor_critic(ATARI_OBS, ATARI_ACT, tuned("atari").config.model),
    }
    spaces = {"cartpole_ac": cp_obs, "connect4_ac": c4_obs, "atari_q": ATARI_OBS,
              "atari_ac": ATARI_OBS, "atari_ac_tuned": ATARI_OBS}
    return models, spaces


def sizes(models: dict[str, torch.nn.Module]) -> Figures:
    out: Figures = {}
    for name, model in models.items():
        params = list(model.parameters())
        out[f"weights_{name}_bytes"] = float(flatten_policy(model).nbytes)
        out[f"grad_{name}_params"] = float(sum(p.numel() for p in params))
        out[f"grad_{name}_bytes"] = float(sum(p.numel() * p.element_size() for p in params))
    return out


# ------------------------------------------------------------------------------------------


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer repeats and iterations")
    ap.add_argument("--repeats", type=int, default=None, help="timed repeats (default 5; "
                    "quick: 2)")
    ap.add_argument("--replay-size", type=int, default=None, help="CartPole transitions in "
                    "the timed replay (default 100000; quick: 10000)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads")
    args = ap.parse_args()
    budget = QUICK if args.quick else FULL
    repeats = args.repeats or (2 if args.quick else 5)
    replay_size = args.replay_size or (10_000 if args.quick else 100_000)
    torch.set_num_threads(args.threads)

    models, spaces = build_models()
    components: list[tuple[str, Callable[[], Figures]]] = [
        ("sizes", lambda: sizes(models)),
        ("env_step", lambda: env_steps(budget, repeats)),
        ("inference", lambda: inference(models, spaces, budget, repeats)),
        ("learn_ppo", lambda: ppo_minibatch_step(budget, repeats)),
        ("learn_dqn", lambda: dqn_update(budget, repeats)),
        ("replay", lambda: replay_ops(replay_size, budget, repeats)),
        ("replay_atari_bytes", atari_replay_bytes),
    ]
    everything: Figures = {"torch_threads": float(torch.get_num_threads()),
                           "repeats": float(repeats), "quick": float(args.quick)}
    for name, measure in components:
        t0 = time.perf_counter()
        figures = measure()
        log(f"{name}: done in {time.perf_counter() - t0:.1f} s")
        print(json.dumps({"component": name, **figures}), flush=True)
        everything |= figures
    print(json.dumps(everything))


if __name__ == "__main__":
    main()
