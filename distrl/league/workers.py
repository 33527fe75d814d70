"""Who plays and learns in a league: the Workers protocol LeagueRun drives, and its
in-process implementation (LocalWorkers; league/remote.py has RayWorkers).
"""

from __future__ import annotations

import copy
import zlib
from collections.abc import Mapping
from typing import Any, Protocol

import gymnasium as gym
import torch

from distrl.core.config import RunConfig
from distrl.core.sampling import seed_for
from distrl.core.types import Rollout
from distrl.envs.make import env_name
from distrl.games.games import make_multiagent_env
from distrl.games.matches import MatchLoop, MatchResult
from distrl.games.policies import LocalPolicy, outside_players
from distrl.league.config import LeagueConfig
from distrl.league.trainer import LeagueTrainer
from distrl.models.recurrent import actor_critic


class Workers(Protocol):
    """Who plays and learns for a LeagueRun: LocalWorkers (this process) or
    league.remote.RayWorkers (Ray env runners reading the policy store, and
    DistributedLearners). LeagueRun keeps every rule; workers only move games, samples
    and weights."""

    def play(self, learners: list[str], min_samples: int) -> tuple[list[MatchResult], int]:
        """Games seated by the league until every learner's finished seats hold
        ``min_samples`` of its moves; (finished games, env steps)."""
        ...

    def train(self) -> dict[str, dict[str, float]]:
        """One PPO update per learner on its samples of the last play; metrics by id."""
        ...

    def env_steps(self) -> dict[str, int]:
        """Env steps each learner has trained on."""
        ...

    def freeze(self, pid: str, snap: str) -> None:
        """A frozen copy of learner ``pid``'s weights, playable as policy ``snap``."""
        ...

    def reset(self, pid: str) -> None:
        """Learner ``pid`` starts again from fresh weights (an exploiter's reset)."""
        ...

    def acting(self) -> Mapping[str, Any]:
        """Every policy by id, as evaluation games act with it."""
        ...

    def module(self, pid: str) -> torch.nn.Module:
        """A copy of a policy's network, for evaluation in the driver."""
        ...

    def metrics(self) -> dict[str, float]: ...

    def get_state(self) -> dict[str, Any]:
        """{"weights": every policy's state dict, "trainers": each learner's state}."""
        ...

    def set_state(self, saved: dict[str, Any]) -> None: ...

    def games_state(self) -> list[bytes | None]:
        """The games in progress (a trusted pickle each), for an exact resume; empty
        where they are not saved (Ray: a resumed league seats fresh games)."""
        ...

    def set_games_state(self, states: list[bytes | None]) -> None: ...

    def close(self) -> None: ...


class LocalWorkers:
    """Every learner, snapshot and game in the driver's process (num_env_runners=0)."""

    def __init__(self, cfg: LeagueConfig, obs_space: gym.Space, act_space: gym.Space,
                 run: RunConfig, choose: Any, generator: torch.Generator):
        self.cfg, self.spaces, self.generator = cfg, (obs_space, act_space), generator
        self.trainers = {pid: LeagueTrainer(obs_space, act_space, cfg, magnet=cfg.magnet,
                                            seed=learner_seed(run.seed, pid))
                         for pid, _ in cfg.learner_ids()}
        envs = [make_multiagent_env(run.env, run.env_config) for _ in range(cfg.num_envs)]
        self.policies = outside_players(int(act_space.n), cfg.rules.bots, envs[0], run.seed)
        self.policies.update({pid: LocalPolicy(t.model) for pid, t in self.trainers.items()})
        self.games = MatchLoop(envs, choose, run.seed, cfg.model.max_seq_len,
                               cfg.state_critic, cfg.magnet.counterfactual)
        self.env_name = env_name(run.env)
        self.pending: dict[str, Rollout] = {}

    def play(self, learners: list[str], min_samples: int) -> tuple[list[MatchResult], int]:
        """Games until every learner's finished seats hold min_samples of its moves."""
        batch = self.games.collect(self.policies.__getitem__, set(learners), min_samples,
                                   self.cfg.gamma, self.cfg.gae_lambda, self.generator)
        self.pending = batch.rollouts
        return batch.results, batch.env_steps

    def train(self) -> dict[str, dict[str, float]]:
        """One PPO update per learner on its samples of the last play."""
        pending, self.pending = self.pending, {}
        return {pid: self.trainers[pid].update(r, self.generator) for pid, r in pending.items()}

    def env_steps(self) -> dict[str, int]:
        return {pid: t.env_steps for pid, t in self.trainers.items()}

    def freeze(self, pid: str, snap: str) -> None:
        frozen = copy.deepcopy(self.trainers[pid].model).requires_grad_(False)
        self.policies[snap] = LocalPolicy(frozen)

    def reset(self, pid: str) -> None:
        self.trainers[pid].reset()
        self.policies[pid] = LocalPolicy(self.trainers[pid].model)

    def acting(self) -> Any:
        return self.policies

    def module(self, pid: str) -> torch.nn.Module:
        return self.policies[pid].module

    def metrics(self) -> dict[str, float]:
        return {}

    def get_state(self) -> dict[str, Any]:
        """Weights of every policy; optimizer, KL coefficient and steps of learners."""
        return {"weights": {pid: p.module.state_dict() for pid, p in self.policies.items()
                            if isinstance(p, LocalPolicy)},
                "trainers": {pid: _without_model(t.get_state())
                             for pid, t in self.trainers.items()}}

    def set_state(self, saved: dict[str, Any]) -> None:
        for pid, weights in saved["weights"].items():
            if pid in self.trainers:
                self.trainers[pid].set_state({**saved["trainers"][pid], "model": weights})
            else:  # a frozen snapshot
                module = actor_critic(*self.spaces, self.cfg.model)
                module.load_state_dict(weights)
                self.policies[pid] = LocalPolicy(module.requires_grad_(False))

    def games_state(self) -> list[bytes | None]:
        return [self.games.get_state(self.env_name)]

    def set_games_state(self, states: list[bytes | None]) -> None:
        if len(states) == 1:
            self.games.set_state(states[0])

    def close(self) -> None:
        for env in self.games.envs:
            env.close()


def learner_seed(seed: int, policy_id: str) -> int:
    """A learner's seed from the run's and its policy id: the same learner starts from
    the same weights whatever order learners are made in, in process and on Ray."""
    return seed_for(seed, zlib.crc32(policy_id.encode()))


def _without_model(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in state.items() if k != "model"}

