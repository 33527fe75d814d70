"""Seat: one agent's steps in one episode of a match (league.matches), and the PPO
samples they become when the episode ends: GAE over the seat's own steps, or the rest of
the game from each step for a state critic (ModelConfig.state_critic), and the reach of
each step's game (Magnet.counterfactual).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import gymnasium as gym
import numpy as np
import torch

from distrl.core.returns import gae
from distrl.core.sampling import env_action_fn
from distrl.models.distributions import Categorical, DiagGaussian


@dataclass
class Node:
    """One node of a game, for state critics: a player's move or a chance outcome."""

    states: dict[str, np.ndarray]  # learning agent -> the env's critic_states here
    probs: np.ndarray  # [critic_outcomes] the mover's (or chance's) distribution
    choice: int  # the move or outcome taken
    rewards: dict[str, float] = field(default_factory=dict)  # paid on the way out


@dataclass
class Seat:
    """One agent's steps in one episode, played by one policy."""

    policy_id: str
    action_space: gym.Space
    obs: list[np.ndarray] = field(default_factory=list)
    masks: list[np.ndarray] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    logp: list[float] = field(default_factory=list)
    dist_inputs: list[np.ndarray] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    total: float = 0.0  # the agent's episode return
    terminated: bool = False
    early: float = 0.0  # reward before the agent's first action (added to that action)
    # A recurrent policy's memory of this (game, seat): its (h, c) now, and per step the
    # state it acted from and the previous action and reward it saw (zero at the first).
    state: tuple[torch.Tensor, torch.Tensor] | None = None
    states_in: list[np.ndarray] = field(default_factory=list)
    prev_actions: list[np.ndarray] = field(default_factory=list)
    prev_rewards: list[float] = field(default_factory=list)
    # A state critic's inputs (ModelConfig.state_critic): the game's nodes (one list, shared
    # by its seats), where this seat's steps are in it, and which agent the seat plays.
    game: list[Node] = field(default_factory=list)
    node_ids: list[int] = field(default_factory=list)
    agent: str = ""
    others_logp: list[float] = field(default_factory=list)  # Magnet.counterfactual

    def __post_init__(self) -> None:
        discrete = isinstance(self.action_space, gym.spaces.Discrete)
        self.dist = Categorical if discrete else DiagGaussian
        self.to_env = env_action_fn(self.action_space)

    def __setstate__(self, state: dict) -> None:
        """A seat pickled before some field existed (a game in progress in an older
        checkpoint) gets that field's default."""
        self.__init__(state["policy_id"], state["action_space"])
        self.__dict__.update(state)

    def credit(self, reward: float) -> None:
        self.total += reward
        if self.rewards:
            self.rewards[-1] += reward
        else:
            self.early += reward

    def previous(self) -> tuple[np.ndarray, float]:
        """The action and reward before the seat's next step (zeros before its first)."""
        if self.actions:
            return self.actions[-1], self.rewards[-1]
        return np.zeros(self.action_space.shape, self.action_space.dtype), 0.0

    def to_arrays(self, gamma: float, lambda_: float, max_seq_len: int = 20
                  ) -> dict[str, np.ndarray]:
        """The seat's samples with GAE over its own steps. A truncated seat bootstraps
        from its last value: its next observation never came (the episode stopped).
        A recurrent seat's steps are one sequence per ``max_seq_len`` steps, each with
        the state it started from (core/sequences.py's layout). A seat that recorded
        game nodes leaves its advantages (zeros here) to the learner's state critic."""
        values = np.asarray(self.values, np.float32)
        steps = len(self.rewards)
        if self.node_ids:  # the learner's state critic computes them (PolicyTrainer)
            adv = targets = np.zeros((steps, 1), np.float32)
        else:
            rewards = np.asarray(self.rewards, np.float32)[:, None]
            rewards[0] += self.early
            last = 0.0 if self.terminated else values[-1]
            term = np.zeros((steps, 1), bool)
            trunc = np.zeros((steps, 1), bool)
            (term if self.terminated else trunc)[-1] = True
            adv, targets = gae(rewards, np.append(values, last)[:, None], term, trunc, gamma,
                               lambda_)
        out = {"obs": np.stack(self.obs), "actions": np.stack(self.actions),
               "logp": np.asarray(self.logp, np.float32), "values": values,
               "dist_inputs": np.stack(self.dist_inputs), "advantages": adv[:, 0],
               "value_targets": targets[:, 0]}
        if self.masks:
            out["action_mask"] = np.stack(self.masks)
        if self.states_in:
            starts = np.arange(steps) % max_seq_len == 0
            out.update(seq_starts=starts, state_in=np.stack(self.states_in)[starts],
                       prev_actions=np.stack(self.prev_actions),
                       prev_rewards=np.asarray(self.prev_rewards, np.float32))
        if self.node_ids:
            out.update(self._critic_arrays())
        if self.others_logp:  # the seat's own earlier moves, then the others' and chance
            own = np.cumsum([0.0, *self.logp[:-1]])
            out["reach_logp"] = np.stack([own, self.others_logp], 1).astype(np.float32)
        return out

    def _critic_arrays(self) -> dict[str, np.ndarray]:
        """Each step's rest of the game, from the step's own node on, padded to the first
        step's: the seat's critic states, the movers' (or chance's) distributions, the
        choices (-1: no node) and the seat's rewards on the way out of each node."""
        if not self.terminated:
            raise ValueError("a state critic (ModelConfig.state_critic) needs games that "
                             "end by termination; this seat was truncated.")
        nodes = self.game[self.node_ids[0]:]
        length = len(nodes)
        offsets = np.asarray(self.node_ids) - self.node_ids[0]
        idx = offsets[:, None] + np.arange(length)
        rows, cols = np.nonzero(idx < length)
        src = idx[rows, cols]
        states = np.zeros((len(offsets), length, nodes[0].states[self.agent].size), np.float32)
        probs = np.zeros((len(offsets), length, nodes[0].probs.size), np.float32)
        choice = np.full((len(offsets), length), -1, np.int64)
        rewards = np.zeros((len(offsets), length), np.float32)
        states[rows, cols] = np.stack([n.states[self.agent] for n in nodes])[src]
        probs[rows, cols] = np.stack([n.probs for n in nodes])[src]
        choice[rows, cols] = np.array([n.choice for n in nodes])[src]
        rewards[rows, cols] = np.array([n.rewards.get(self.agent, 0.0) for n in nodes])[src]
        return {"critic_obs": states, "critic_probs": probs, "critic_choice": choice,
                "critic_rewards": rewards}
