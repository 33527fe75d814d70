"""A trained policy in your own code: ``policy = distrl.load_policy("runs/x")``, then
``action = policy.act(obs)``.

Runs of every algorithm load the same way (PPO, DD-PPO, Ape-X, league, AlphaZero) from a
checkpoint's weights-only parts (policy/ and run/, or a game run's learner tensors), so
nothing is unpickled and a downloaded run is safe to load. ``act`` picks what
``distrl eval`` picks: the greedy action (argmax, the Gaussian's mean, argmax Q) unless
``deterministic=False``, through the run's observation filter, as an action for the env
(Box actions clipped to the action space, Discrete ones shifted by its start).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from distrl.core import evaluation
from distrl.core.checkpoint import Checkpoint
from distrl.core.sampling import StepContext, env_action_fn, first_context, scales_actions
from distrl.games.games import split_obs
from distrl.games.tabular import TablePolicy, has_table, load_table
from distrl.models.distributions import Categorical
from distrl.models.recurrent import LSTMActor

MAIN = "main_0"
"""A game run's main agent: its default policy, also saved as the checkpoint's policy/."""


class RecurrentState(NamedTuple):
    """What a recurrent (LSTM) policy carries from one step to the next, per env. Pass
    the state ``act`` returned back into the next call; None starts fresh episodes."""

    memory: np.ndarray
    """The LSTM's (h, c) per env, [N, 2, state_size]."""
    prev_action: np.ndarray
    """The network's previous action per env (an input of lstm_use_prev_action)."""


class Policy:
    """A saved policy acting on observations (see ``act``). ``recurrent`` says whether
    it carries a state; ``observation_space`` and ``action_space`` are the network's
    (a game's "observation" part, without its action mask)."""

    def __init__(self, model: evaluation.PolicyNet | TableNet, ckpt: Checkpoint,
                 policy_id: str | None):
        spec = ckpt.policy()
        self.model, self.policy_id = model, policy_id
        self.observation_space, self.action_space = spec.obs_space, spec.act_space
        self.recurrent = bool(getattr(model, "recurrent", False))
        self._to_env = env_action_fn(self.action_space, scales_actions(model))

    def __repr__(self) -> str:
        return (f"Policy({type(self.model).__name__}, id={self.policy_id}, "
                f"obs={self.observation_space}, actions={self.action_space})")

    def act(self, obs: Any, state: RecurrentState | None = None, deterministic: bool = True,
            action_mask: Any = None, *, reward: Any = None, episode_start: Any = None) -> Any:
        """The action for one observation, or an array of actions for a batch ``[N, ...]``.

        A feed-forward policy returns the action(s). A recurrent one returns ``(action,
        state)``, as SB3's ``predict``: pass ``state`` back on the next step (None: every
        env starts an episode), with ``episode_start`` (bool per env) where an env was
        reset since, and ``reward``, the previous step's reward(s), when the policy was
        trained with ``lstm_use_prev_reward``. ``action_mask`` (1 = legal, per action)
        restricts Discrete actions; a game's observation dict ({"observation",
        "action_mask"}, or a list of them) brings its own."""
        x, mask, single = self._batch(obs, action_mask)
        memory, context = self._memory(state, len(x), reward, episode_start)
        with torch.inference_mode():
            actions = evaluation.policy_actions(
                self.model, torch.as_tensor(x), not deterministic, None, memory, context,
                None if mask is None else torch.as_tensor(mask).bool())
        out = self._to_env(actions.numpy())
        out = out[0] if single else out
        if memory is None:
            return out
        return out, RecurrentState(memory.get_state(), actions.numpy())

    def _batch(self, obs: Any, action_mask: Any) -> tuple[np.ndarray, Any, bool]:
        """(observations [N, ...], masks [N, n] or None, whether one observation came)."""
        obs, found = _split_game_obs(obs)
        action_mask = found if action_mask is None else action_mask
        space = self.observation_space
        x = np.asarray(obs, dtype=space.dtype if isinstance(space, gym.spaces.Box) else np.int64)
        single = x.shape == space.shape
        if not single and x.shape[1:] != space.shape:
            raise ValueError(f"an observation of shape {x.shape} for a policy of {space}: pass "
                             f"one of shape {space.shape} or a batch of shape (N, "
                             f"{', '.join(map(str, space.shape))}).")
        x = x[None] if single else x
        return x, self._mask(action_mask, len(x)), single

    def _mask(self, action_mask: Any, n: int) -> np.ndarray | None:
        if action_mask is None:
            return None
        if not isinstance(self.action_space, gym.spaces.Discrete):
            raise ValueError(f"action masks restrict Discrete actions; this policy's are "
                             f"{self.action_space}.")
        mask = np.asarray(action_mask, dtype=bool).reshape(-1, int(self.action_space.n))
        if len(mask) != n:
            raise ValueError(f"{len(mask)} action masks for {n} observations; pass one "
                             f"of {int(self.action_space.n)} entries per observation.")
        return mask

    def _memory(self, state: RecurrentState | None, n: int, reward: Any, episode_start: Any
                ) -> tuple[LSTMActor | None, StepContext]:
        """A recurrent policy's memory for this step and its step context, as evaluation
        keeps them (zeroed where an episode starts); (None, a first step) otherwise."""
        if not self.recurrent:
            if state is not None:
                raise ValueError("this policy is feed-forward: it has no state to pass.")
            return None, first_context(self.action_space, n)
        memory = LSTMActor(self.model, n)
        if state is None:
            return memory, first_context(self.action_space, n)
        if len(state.memory) != n:
            raise ValueError(f"a state of {len(state.memory)} envs for {n} observations.")
        if self.model.use_prev_reward and reward is None:
            raise ValueError("this policy was trained with lstm_use_prev_reward: pass the "
                             "previous step's reward, act(obs, state, reward=r).")
        memory.set_state(state.memory)
        first = np.zeros(n, bool) if episode_start is None else episode_start
        rewards = 0.0 if reward is None else reward
        return memory, StepContext(np.array(np.broadcast_to(np.asarray(first, bool), (n,))),
                                   state.prev_action,
                                   np.array(np.broadcast_to(np.asarray(rewards, np.float32), (n,))))


class TableNet:
    """A table policy (a league's saved ``average``) acting as a network does: its
    log-probabilities are the logits, so the greedy move is the most probable one."""

    dist = Categorical

    def __init__(self, table: TablePolicy):
        self.table = table

    def __call__(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.table(obs.cpu())


def _split_game_obs(obs: Any) -> tuple[Any, np.ndarray | None]:
    """A game's observation dict (or a list of them) as (observations, action masks)."""
    if isinstance(obs, dict):
        return split_obs(obs)
    if isinstance(obs, list | tuple) and obs and isinstance(obs[0], dict):
        parts = [split_obs(o) for o in obs]
        masks = None if parts[0][1] is None else np.stack([m for _, m in parts])
        return np.stack([o for o, _ in parts]), masks
    return obs, None


def load_policy(run: str | Path, policy: str | None = None) -> Policy:
    """The policy of a saved run (its logdir or checkpoint/ directory), to act with in
    your own code; ``policy``: a game run's policy id (league, AlphaZero; default
    ``main_0``, the main agent; ``average``: a league's saved average policy, a table over
    its game's information states). Reads tensors and JSON only, never a pickle."""
    ckpt = Checkpoint(run)
    game = bool(ckpt.policy_ids)
    pid = policy or (MAIN if game else None)
    if pid is not None and has_table(ckpt, pid) and pid not in ckpt.policy_ids:
        return Policy(TableNet(load_table(ckpt, pid)), ckpt, pid)
    # A game run's main agent is also its policy/ component: no other policy's tensors read.
    model = evaluation.load_policy(ckpt, None if game and pid == MAIN else pid)
    return Policy(model, ckpt, pid)
