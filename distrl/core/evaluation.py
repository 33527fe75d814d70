"""Evaluate a policy: whole episodes on env instances of their own, greedy by default.

``evaluate``/``run_episodes`` read only a checkpoint's weights-only parts (policy/ and
run/): nothing is unpickled, so a downloaded checkpoint is safe to evaluate.
``evaluation_metrics`` is what the training loop logs every evaluation_interval.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from distrl.core.checkpoint import Checkpoint
from distrl.core.config import RunConfig, from_json
from distrl.core.sampling import StepContext, env_action_fn, first_context, scales_actions
from distrl.core.video import episode_video
from distrl.envs.errors import EnvErrors
from distrl.envs.make import (
    EnvSpec,
    env_name,
    env_spaces,
    episode_limit,
    is_atari,
    make_atari,
    make_vec_env,
    resolve_env,
    time_limited,
)
from distrl.models.actor_critic import ActorCritic
from distrl.models.builders import builder_for
from distrl.models.config import ModelConfig
from distrl.models.distributions import mask_logits
from distrl.models.q_network import QNetwork
from distrl.models.recurrent import LSTMActor

PolicyNet = ActorCritic | QNetwork
MAX_PARALLEL = 16
VIDEO_EXTRA = "pip install 'distrl[video]' (moviepy writes the MP4s)"


@dataclass
class Episodes:
    """Returns and lengths of finished episodes, in the order they were started."""

    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)


def run_episodes(checkpoint: str | Path, episodes: int = 10, seed: int = 0,
                 env: EnvSpec | None = None, env_config: dict[str, Any] | None = None,
                 explore: bool = False, video_dir: str | None = None,
                 render: bool = False, max_episode_steps: int | None = None) -> Episodes:
    """evaluate() with lengths, MP4s of every episode in ``video_dir`` (gymnasium's
    RecordVideo), or a window (``render``, render_mode="human"). Episodes are truncated
    after ``max_episode_steps`` (default: the run's)."""
    if episodes <= 0:
        raise ValueError(f"`episodes` ({episodes}) must be > 0.")
    ckpt = Checkpoint(checkpoint)
    if ckpt.policy_ids:
        raise ValueError(f"{str(ckpt.path)!r} holds a {ckpt.algo!r} run: its policies play "
                         "games, not episodes. Use `distrl eval RUN --opponent "
                         "random|ID|module:callable` or distrl.evaluate().")
    model = load_policy(ckpt)
    saved = ckpt.run_config()
    env = saved_env(saved, env)
    env_config = saved.get("env_config", {}) if env_config is None else env_config
    limit = saved.get("max_episode_steps") if max_episode_steps is None else max_episode_steps
    check_spaces(ckpt, env, env_config)
    limit = episode_limit(env, env_config, limit)
    if video_dir is None and not render:
        return play(model, env, env_config, episodes, seed, explore, limit)
    return _play_one_by_one(model, env, env_config, episodes, seed, explore, video_dir, limit)


def check_spaces(ckpt: Checkpoint, env: EnvSpec, env_config: dict[str, Any]) -> None:
    """One line naming both sides when ``env``'s spaces are not those the run's policy was
    trained on, rather than a shape error from inside the network."""
    policy = ckpt.policy()
    obs_space, act_space = env_spaces(env, env_config)
    if _fits(policy.obs_space, obs_space) and _fits(policy.act_space, act_space):
        return
    raise ValueError(f"the run's policy was trained on observation space {policy.obs_space} "
                     f"and action space {policy.act_space}; env {env_name(env)!r} has "
                     f"observation space {obs_space} and action space {act_space}. Evaluate "
                     "on an env with the run's spaces.")


def _fits(trained: gym.Space, given: gym.Space) -> bool:
    """A network made for ``trained`` takes ``given`` (a Box's bounds may differ)."""
    if isinstance(trained, gym.spaces.Box) and isinstance(given, gym.spaces.Box):
        return trained.shape == given.shape
    return trained == given


def saved_env(saved: dict[str, Any], env: Any | None) -> Any:
    """``env`` if given, else the run's saved env (``saved``: Checkpoint.run_config()),
    which a factory env is not: only the trusted resume state holds it, and evaluation
    never unpickles."""
    if env is not None:
        return env
    if saved["env"] is None:
        raise ValueError(
            f"the run trained on a factory env ({saved['env_name']}), which only the trusted "
            "resume state holds; pass it: distrl.evaluate(RUN, env=<factory>) from Python, "
            "or train on a 'module:callable' env, which is saved as a string.")
    return saved["env"]


def missed_last(every: int, iteration: int) -> bool:
    """Evaluations every ``every`` iterations (0: none) missed the run's last one: its
    final evaluation is due."""
    return bool(every) and iteration % every != 0


def evaluation_metrics(model: PolicyNet, run: RunConfig) -> dict[str, float]:
    """The eval/ metrics of one evaluation during training (seeds fixed per run, so
    evaluations at different iterations are comparable)."""
    t0 = time.perf_counter()
    eps = play(model, run.env, run.env_config, run.evaluation_duration, run.seed + 1_000_003,
               run.evaluation_explore, run.max_episode_steps)
    return {"eval/episode_return_mean": float(np.mean(eps.returns)),
            "eval/episode_len_mean": float(np.mean(eps.lengths)),
            "eval/episodes": len(eps.returns), "eval/time_s": time.perf_counter() - t0}


def load_policy(ckpt: Checkpoint, policy_id: str | None = None) -> PolicyNet:
    """The checkpoint's policy network, from JSON and tensors only; ``policy_id``: one of
    a game run's policies (every one has the saved policy's architecture)."""
    spec = ckpt.policy()
    model = builder_for(spec.builder)(spec.obs_space, spec.act_space,
                                      from_json(ModelConfig, spec.model))
    model.load_state_dict(ckpt.policy_weights() if policy_id is None
                          else _game_policy_weights(ckpt, policy_id))
    return model.requires_grad_(False)


def _game_policy_weights(ckpt: Checkpoint, policy_id: str) -> dict[str, torch.Tensor]:
    weights = ckpt.learner_state().get("weights") if ckpt.policy_ids else None
    if not isinstance(weights, dict):
        raise ValueError(f"{str(ckpt.path)!r} holds a {ckpt.algo!r} run with one policy; "
                         f"policy ids ({policy_id!r}) name the policies of game runs.")
    if policy_id not in weights:
        raise ValueError(f"no policy {policy_id!r} in this run; it has {sorted(weights)}.")
    return weights[policy_id]


def rounds(episodes: int) -> list[int]:
    """How evaluation plays ``episodes`` episodes, single-agent and league alike: in
    rounds of up to MAX_PARALLEL envs, each env playing exactly one episode per round. A
    count per env fixed before any episode ends is what keeps the estimate unbiased:
    keeping the first episodes to finish would over-count short ones."""
    if episodes <= 0:
        raise ValueError(f"`episodes` ({episodes}) must be > 0.")
    full, rest = divmod(episodes, MAX_PARALLEL)
    return [MAX_PARALLEL] * full + ([rest] if rest else [])


def play(model: PolicyNet, env: EnvSpec, env_config: dict[str, Any], episodes: int,
         seed: int, explore: bool = False, max_episode_steps: int | None = None) -> Episodes:
    """``episodes`` episodes in rounds (see rounds)."""
    out = Episodes()
    for n in rounds(episodes):
        envs = make_vec_env(env, n, env_config, clip_rewards=False,  # the real score
                            max_episode_steps=max_episode_steps)
        try:
            _play(model, envs, seed + len(out.returns), explore, out, EnvErrors(env_name(env)))
        finally:
            envs.close()
    return out


def _play_one_by_one(model: PolicyNet, env: EnvSpec, env_config: dict[str, Any],
                     episodes: int, seed: int, explore: bool, video_dir: str | None,
                     max_episode_steps: int | None) -> Episodes:
    render_mode = "rgb_array" if video_dir else "human"
    out = Episodes()
    for k in range(episodes):
        single = _single_env(env, env_config, render_mode, max_episode_steps)
        if video_dir:
            single = _record(single, video_dir, f"episode-{k}")
        envs = gym.vector.SyncVectorEnv([lambda single=single: single])
        try:
            _play(model, envs, seed + k, explore, out, EnvErrors(env_name(env)))
        finally:
            envs.close()
    return out


def _single_env(env: EnvSpec, env_config: dict[str, Any], render_mode: str,
                max_episode_steps: int | None) -> gym.Env:
    maker = resolve_env(env)
    try:
        with EnvErrors(env_name(env)):
            if is_atari(env):
                return time_limited(lambda: make_atari(
                    env, clip_rewards=False, render_mode=render_mode, **env_config),
                    max_episode_steps)
            if isinstance(maker, str):
                limit = {"max_episode_steps": max_episode_steps} if max_episode_steps else {}
                return gym.make(maker, render_mode=render_mode, **{**env_config, **limit})
            return time_limited(lambda: maker(render_mode=render_mode, **env_config),
                                max_episode_steps)
    except TypeError as err:
        raise ValueError(f"cannot make the env with render_mode={render_mode!r} ({err}); "
                         "a factory must accept a render_mode keyword to be shown or "
                         "recorded.") from None


def _record(env: gym.Env, video_dir: str, prefix: str) -> gym.Env:
    try:
        return episode_video(env, video_dir, prefix)
    except gym.error.DependencyNotInstalled as err:
        env.close()
        raise ValueError(f"recording videos needs moviepy: {VIDEO_EXTRA} ({err})") from None


def policy_actions(model: PolicyNet, obs: torch.Tensor, explore: bool,
                   generator: torch.Generator | None, memory: LSTMActor | None,
                   context: StepContext, mask: torch.Tensor | None = None) -> torch.Tensor:
    """The network's actions for a batch: greedy (argmax, Gaussian mean, argmax Q) unless
    ``explore``; a recurrent one through ``memory`` (it advances); ``mask``: legal actions."""
    if isinstance(model, QNetwork):
        if explore:
            raise ValueError("a Q-network (Ape-X) has no stochastic policy: evaluate it "
                             "greedily (drop --stochastic / evaluation_explore).")
        return mask_logits(model(obs), mask).argmax(-1).cpu()
    dist_inputs = (model(obs)[0] if memory is None else memory.step(obs, context)[0]).cpu()
    dist_inputs = mask_logits(dist_inputs, mask)
    return model.dist.sample(dist_inputs, generator) if explore else model.dist.greedy(dist_inputs)


def _play(model: PolicyNet, envs: gym.vector.VectorEnv, seed: int, explore: bool,
          out: Episodes, user_code: EnvErrors) -> None:
    n = envs.num_envs
    device = next(model.parameters()).device  # the learner's, during training
    to_env_action = env_action_fn(envs.single_action_space, scales_actions(model))
    generator = torch.Generator().manual_seed(seed)
    with user_code:
        obs, _ = envs.reset(seed=seed)
    total, length = np.zeros(n), np.zeros(n, dtype=np.int64)
    running = np.ones(n, dtype=bool)
    # A recurrent policy's memory: each env plays one episode, so it never resets.
    memory = LSTMActor(model, n) if getattr(model, "recurrent", False) else None
    context = first_context(envs.single_action_space, n)
    with torch.inference_mode():
        while running.any():
            actions = policy_actions(model, torch.as_tensor(obs, device=device), explore,
                                     generator, memory, context)
            with user_code:
                obs, rewards, terminated, truncated, _ = envs.step(
                    to_env_action(actions.numpy()))
            context = StepContext(np.zeros(n, bool), actions.numpy(),
                                  np.asarray(rewards, np.float32))
            total += np.where(running, rewards, 0.0)
            length += running
            running &= ~(terminated | truncated)
    out.returns += total.tolist()
    out.lengths += length.tolist()
