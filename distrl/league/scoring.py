"""Evaluation games of a league: outcomes, win/draw/loss rates, NashConv, and
`distrl eval` of a saved league (evaluate_league).
"""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path
from typing import Any

import numpy as np
import torch

from distrl.core.checkpoint import Checkpoint, space_from_json
from distrl.core.config import from_json
from distrl.core.evaluation import MAX_PARALLEL, rounds
from distrl.league.config import LeagueConfig
from distrl.league.games import make_multiagent_env, nash_conv
from distrl.league.matches import (
    RANDOM,
    LocalPolicy,
    MatchLoop,
    MatchResult,
    RandomPolicy,
    ScriptedPolicy,
)
from distrl.models.distributions import mask_logits
from distrl.models.recurrent import actor_critic


def outcome(result: MatchResult, a: str, b: str) -> float:
    """1, 0.5 or 0 for policy a against policy b by their seats' returns."""
    ra = max(r for ag, r in result.returns.items() if result.policies[ag] == a)
    rb = max(r for ag, r in result.returns.items() if result.policies[ag] == b)
    return 1.0 if ra > rb else 0.5 if ra == rb else 0.0


def play_matches(game: Any, env_config: dict[str, Any], policies: Any, greedy: set[str],
                 pid: str, opponent: str, games: int, seed: int = 0) -> list[MatchResult]:
    """``games`` games of ``pid`` against ``opponent``, split evenly over the seats, on
    envs of their own, in the rounds single-agent evaluation plays (core.evaluation.
    rounds: every env's first game of a round counts, so long games weigh as much as
    short ones). Policies in ``greedy`` act greedily; seeds are fixed, so evaluations
    are comparable."""
    if games <= 0:
        raise ValueError(f"`games` ({games}) must be > 0.")
    probe = make_multiagent_env(game, env_config)
    agents = list(probe.possible_agents)
    probe.close()
    results = []
    for seat in range(len(agents)):
        n = games // len(agents) + (seat < games % len(agents))
        if n == 0:
            continue
        mapping = {a: pid if k == seat else opponent for k, a in enumerate(agents)}
        generator = torch.Generator().manual_seed(seed * 100 + seat)
        for r, size in enumerate(rounds(n)):
            first_seed = 10_000 * (seed + 1) + 1_000 * seat + MAX_PARALLEL * r
            results += _one_game_per_env(game, env_config, size, mapping, first_seed,
                                         policies, greedy, generator)
    return results


def _one_game_per_env(game: Any, env_config: dict[str, Any], size: int,
                      mapping: dict[str, str], seed: int, policies: Any, greedy: set[str],
                      generator: torch.Generator) -> list[MatchResult]:
    """The first finished game of each of ``size`` fresh envs (envs that finish early
    play on until the last one has its game; those extra games are not counted)."""
    envs = [make_multiagent_env(game, env_config) for _ in range(size)]
    try:
        loop = MatchLoop(envs, lambda i: mapping, seed=seed)
        first: dict[int, MatchResult] = {}
        while len(first) < size:
            batch = loop.collect(policies.__getitem__, set(), 0, 1.0, 1.0, generator,
                                 greedy=greedy, min_episodes=1)
            for result in batch.results:
                first.setdefault(result.env, result)
        return [first[i] for i in range(size)]
    finally:
        for env in envs:
            env.close()


def win_draw_loss(results: list[MatchResult], pid: str, opponent: str) -> np.ndarray:
    """Fractions of the games pid won, drew and lost against opponent."""
    counts = np.zeros(3)
    for r in results:
        counts[[1.0, 0.5, 0.0].index(outcome(r, pid, opponent))] += 1
    return counts / max(len(results), 1)


def evaluate_league(checkpoint: str | Path, policy: str = "main_0", opponent: str = RANDOM,
                    games: int = 200, seed: int = 0, stochastic: bool = False
                    ) -> dict[str, Any]:
    """Win, draw and loss rates of a saved league's ``policy`` against ``opponent``
    (random, another of its policies, or ``module:callable``, a ScriptedPolicy's act
    function), half of the games in each seat; for OpenSpiel
    games also the policy's exact NashConv (both seats played by it)."""
    ckpt = Checkpoint(checkpoint)
    if ckpt.algo != "league":
        raise ValueError(f"{str(ckpt.path)!r} holds a {ckpt.algo!r} run; --policy and "
                         "--opponent apply to league checkpoints.")
    if policy == opponent:
        raise ValueError(f"--policy and --opponent are both {policy!r}: a policy against "
                         "itself has no winner to count; pick another opponent.")
    run = ckpt.json("run", "config.json")["run"]
    config = from_json(LeagueConfig, ckpt.json("run", "config.json")["config"])
    spec = ckpt.json("policy", "policy.json")
    obs_space, act_space = space_from_json(spec["obs_space"]), space_from_json(spec["act_space"])
    weights = ckpt.tensors("learner", "state.pt")["weights"]
    policies: dict[str, Any] = {RANDOM: RandomPolicy(int(act_space.n))}
    for pid in {policy, opponent} - {RANDOM}:
        if ":" in pid:
            policies[pid] = scripted_policy(pid)
            continue
        if pid not in weights:
            raise ValueError(f"no policy {pid!r} in this league; it has {sorted(weights)}.")
        module = actor_critic(obs_space, act_space, config.model)
        module.load_state_dict(weights[pid])
        policies[pid] = LocalPolicy(module.requires_grad_(False))
    greedy = set() if stochastic else {policy, opponent} - {RANDOM}
    rates = win_draw_loss(play_matches(run["env"], run["env_config"], policies, greedy,
                                       policy, opponent, games, seed), policy, opponent)
    out = {"policy": policy, "opponent": opponent, "games": games,
           "win_rate": rates[0], "draw_rate": rates[1], "loss_rate": rates[2]}
    if str(run["env"]).startswith("openspiel:"):
        nash_conv = policy_nash_conv(run["env"], run["env_config"], policies[policy])
        if nash_conv is not None:
            out["nash_conv"] = nash_conv
    return out


def scripted_policy(spec: str) -> ScriptedPolicy:
    """``module:callable`` as a ScriptedPolicy: ``callable(obs, action_mask) -> action``."""
    module_name, name = spec.split(":", 1)
    try:
        act = getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"opponent {spec!r}: {err}. Give random, a policy id of the "
                         "league, or module:callable with callable(obs, action_mask) -> "
                         "action importable here.") from None
    if not callable(act) or not _takes_two_arguments(act):
        raise ValueError(f"opponent {spec!r} must be a callable(obs, action_mask) -> action.")
    return ScriptedPolicy(act, spec)


def _takes_two_arguments(fn: Any) -> bool:
    try:
        inspect.signature(fn).bind(None, None)
    except TypeError:
        return False
    except ValueError:  # a builtin without a signature: let the call decide
        return True
    return True


def policy_nash_conv(game: str, env_config: dict[str, Any], policy: Any) -> float | None:
    """OpenSpiel's exact NashConv of the policy (its action probabilities); None for a
    recurrent policy, whose probabilities depend on the seat's history, which OpenSpiel's
    tabular policies (one observation per info state) do not replay."""
    if getattr(policy, "recurrent", False):
        return None
    env = make_multiagent_env(game, env_config)

    def probs(obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            logits, _ = policy(torch.as_tensor(obs[None]))
        return torch.softmax(mask_logits(logits, torch.as_tensor(mask[None]).bool()),
                             -1)[0].numpy()

    try:
        return nash_conv(env.game, probs)
    finally:
        env.close()

