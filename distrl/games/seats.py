"""Seat: one agent's steps in one episode of a match (games.matches), and the PPO
samples they become when the episode ends: GAE over the seat's own steps, or the rest of
the game from each step for a state critic (LeagueConfig.state_critic), and the reach of
each step's game (Magnet.counterfactual).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, fields

import gymnasium as gym
import numpy as np
import torch

from distrl.core.returns import gae
from distrl.core.sampling import env_action_fn
from distrl.models.distributions import Categorical, DiagGaussian


@dataclass
class Node:
    """One node of a game, for state critics: a player's move or a chance outcome."""

    state: np.ndarray  # [players, size] the env's critic_state() here
    probs: np.ndarray  # [critic_outcomes] the mover's (or chance's) distribution
    choice: int  # the move or outcome taken
    rewards: np.ndarray | None = None  # [players] paid on the way out (None: nothing)


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
    # A state critic's inputs (LeagueConfig.state_critic): the game's nodes (one list, shared
    # by its seats), where this seat's steps are in it, and which player the seat is.
    game: list[Node] = field(default_factory=list)
    node_ids: list[int] = field(default_factory=list)
    player: int = 0
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

    def advantages(self, gamma: float, lambda_: float) -> tuple[np.ndarray, np.ndarray]:
        """GAE over the seat's own steps: (advantages, value targets), [steps] each. A
        truncated seat bootstraps from its last value: its next observation never came
        (the episode stopped)."""
        values = np.asarray(self.values, np.float32)
        rewards = np.asarray(self.rewards, np.float32)[:, None]
        rewards[0] += self.early
        last = 0.0 if self.terminated else values[-1]
        term = np.zeros((len(values), 1), bool)
        trunc = np.zeros((len(values), 1), bool)
        (term if self.terminated else trunc)[-1] = True
        adv, targets = gae(rewards, np.append(values, last)[:, None], term, trunc, gamma,
                           lambda_)
        return adv[:, 0], targets[:, 0]


def seat_arrays(seats: list[Seat], gamma: float, lambda_: float, max_seq_len: int = 20
                ) -> dict[str, np.ndarray]:
    """The seats' samples (one policy's), rows seat after seat, named as Rollout's
    fields: each field stacked once for all seats (per-seat arrays cost more than
    Leduc's two-move seats). Advantages by GAE over each seat's own steps, or zeros for
    seats that recorded game nodes (the learner's state critic computes them). A
    recurrent seat's steps are one sequence per ``max_seq_len`` steps, each with the
    state it started from (core/sequences.py's layout)."""
    def flat(field: str) -> list:
        return [x for s in seats for x in getattr(s, field)]

    values = np.asarray(flat("values"), np.float32)
    if seats[0].node_ids:
        adv = targets = np.zeros(len(values), np.float32)
    else:
        adv, targets = (np.concatenate(x) for x in
                        zip(*(s.advantages(gamma, lambda_) for s in seats), strict=True))
    out = {"obs": np.stack(flat("obs")), "actions": np.stack(flat("actions")),
           "logp": np.asarray(flat("logp"), np.float32), "values": values,
           "dist_inputs": np.stack(flat("dist_inputs")), "advantages": adv,
           "value_targets": targets}
    if seats[0].masks:
        out["action_mask"] = np.stack(flat("masks"))
    if seats[0].states_in:
        starts = np.concatenate([np.arange(len(s.rewards)) % max_seq_len == 0 for s in seats])
        out.update(seq_starts=starts, state_in=np.stack(flat("states_in"))[starts],
                   prev_actions=np.stack(flat("prev_actions")),
                   prev_rewards=np.asarray(flat("prev_rewards"), np.float32))
    return out


@dataclass
class GameRows:
    """Per row of a game's Rollout (Rollout.game), what league learners read beyond
    PPO's fields. A state critic's nodes (LeagueConfig.state_critic): the rest of each
    step's game, from the step's own node on, padded to L nodes (rollouts with another L
    concatenate padded); and Magnet.counterfactual's reach of each move."""

    critic_obs: np.ndarray | None = None  # [B, L, state_size]
    critic_probs: np.ndarray | None = None  # [B, L, K] the mover's or chance's distribution
    critic_choice: np.ndarray | None = None  # [B, L] int64: the choice taken, -1 no node
    critic_rewards: np.ndarray | None = None  # [B, L] float32: the seat's, leaving each node
    # [B, L] float32: on a seat's first row, how many of its rows hold the node (0 on the
    # later rows, whose nodes repeat the first's): the critic fits each node once, weighted
    critic_weight: np.ndarray | None = None
    # Log-probability of the game so far under the seat's own earlier moves, and under
    # the other players and chance.
    reach_logp: np.ndarray | None = None  # [B, 2] float32

    @staticmethod
    def concat(parts: list[GameRows]) -> GameRows:
        out = {}
        for f in fields(GameRows):
            xs = [getattr(p, f.name) for p in parts]
            if any(x is None for x in xs):
                if any(x is not None for x in xs):
                    raise ValueError(f"cannot concatenate game rows with and without {f.name}")
                continue
            out[f.name] = concat_nodes(xs) if f.name.startswith("critic_") else np.concatenate(xs)
        return GameRows(**out)


def game_rows(seats: list[Seat], critic: bool) -> GameRows | None:
    """The seats' GameRows (rows in seat_arrays' order): the critic's nodes with
    ``critic``, the reach where the seats recorded the others' (None: neither)."""
    reach = None
    if seats[0].others_logp:  # the seat's own earlier moves, then the others' and chance
        own = [x for s in seats for x in itertools.accumulate(s.logp[:-1], initial=0.0)]
        others = [x for s in seats for x in s.others_logp]
        reach = np.stack([own, others], 1).astype(np.float32)
    if not critic and reach is None:
        return None
    return GameRows(**(critic_arrays(seats) if critic else {}), reach_logp=reach)


def concat_nodes(xs: list[np.ndarray]) -> np.ndarray:
    """np.concatenate of a state critic's nodes per row ([B, L, ...]) along rows, those of
    a shorter L padded to the longest, with -1 in integer arrays (no node). One copy into
    a preallocated array: np.pad per part cost more than the games."""
    length = max(x.shape[1] for x in xs)
    fill = -1 if np.issubdtype(xs[0].dtype, np.integer) else 0
    out = np.full((sum(len(x) for x in xs), length, *xs[0].shape[2:]), fill, xs[0].dtype)
    start = 0
    for x in xs:
        out[start:start + len(x), :x.shape[1]] = x
        start += len(x)
    return out


def critic_arrays(seats: list[Seat]) -> dict[str, np.ndarray]:
    """The state critic's inputs of the seats' steps, rows in the seats' order (as
    seat_arrays'): each step's rest of the game from its own node on, padded
    with no-nodes to the longest: the seat's critic states (its own player's information
    first, then the next players'), the movers' (or chance's) distributions, the choices
    (-1: no node), the seat's rewards on the way out of each node, and the critic's fit
    weights (GameRows.critic_weight: a later row's nodes repeat its seat's first row's, so
    the first row carries them, counted, and the fit sees each once). Every game's nodes
    are stacked once, however many of its seats learn, and the rows gathered in one go:
    per-seat arrays cost more than the games (Leduc's seats have two steps)."""
    if not all(s.terminated for s in seats):
        raise ValueError("a state critic (LeagueConfig.state_critic) needs games that "
                         "end by termination; a seat was truncated.")
    games = list({id(s.game): s.game for s in seats}.values())
    base = dict(zip(map(id, games), np.cumsum([0] + [len(g) for g in games]), strict=False))
    nodes = [n for g in games for n in g]
    start = np.concatenate([base[id(s.game)] + np.asarray(s.node_ids) for s in seats])
    end = np.concatenate([np.full(len(s.node_ids), base[id(s.game)] + len(s.game))
                          for s in seats])
    player = np.concatenate([np.full(len(s.node_ids), s.player) for s in seats])
    states = np.stack([n.state for n in nodes])  # [nodes, players, size]
    players = states.shape[1]
    # each player's view: its own row first, then the next players' (flattened)
    views = np.stack([states[:, (p + np.arange(players)) % players].reshape(len(nodes), -1)
                      for p in range(players)])
    rewards = np.zeros((len(nodes), players), np.float32)
    for k, node in enumerate(nodes):
        if node.rewards is not None:
            rewards[k] = node.rewards
    idx = start[:, None] + np.arange((end - start).max())
    live = idx < end[:, None]
    idx = np.where(live, idx, 0)
    first = np.repeat(np.cumsum([0] + [len(s.node_ids) for s in seats[:-1]]),
                      [len(s.node_ids) for s in seats])  # each row's seat's first row
    weight = np.zeros(live.shape, np.float32)
    np.add.at(weight, (first, start - start[first]), 1.0)  # a row's own node, on row first
    weight = np.cumsum(weight, 1) * live  # ... and every node after it
    return {"critic_obs": np.where(live[..., None], views[player[:, None], idx], 0),
            "critic_probs": np.where(live[..., None], np.stack([n.probs for n in nodes])[idx], 0),
            "critic_choice": np.where(live, np.array([n.choice for n in nodes])[idx], -1),
            "critic_rewards": np.where(live, rewards[idx, player[:, None]], 0).astype(np.float32),
            "critic_weight": weight}
