"""train_league: PPO learners in an AlphaStar-style league on a multi-agent game.

Each iteration the games are seated by the league's matchmaking at every reset; every
learner trains on its own moves with the shared PPO update (PolicyTrainer); finished
games fill the payoff table; learners that qualify are frozen as snapshots (and
exploiters reset); every league_eval_interval iterations the main agents play evaluation
games against a uniformly random player (and the league's members), the only source of
win rates and Elo.

LeagueRun decides; its players play and learn: LocalPlayers in this process
(num_env_runners=0), or runtime.league.RayPlayers (Ray env runners reading the policy
store, DistributedLearners)."""

from __future__ import annotations

import copy
import importlib
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from distrl.algos.league import League, LeagueConfig
from distrl.algos.ppo import PolicyTrainer
from distrl.checkpoint import Checkpoint, space_from_json
from distrl.config import RunConfig, from_json
from distrl.loop import Start, drive, policy_files, save_run, start_run
from distrl.matches import (
    RANDOM,
    LocalPolicy,
    MatchLoop,
    MatchResult,
    RandomPolicy,
    ScriptedPolicy,
)
from distrl.multiagent import make_multiagent_env, nash_conv, policy_obs_space
from distrl.nets import ActorCritic, mask_logits
from distrl.types import Rollout


def train_league(config: LeagueConfig | None = None, run: RunConfig | None = None
                 ) -> dict[str, Any]:
    """Train a league until a stop condition holds; returns the final metrics and the
    checkpoint (whose policy is main_0's, for `distrl eval`)."""
    league_run = start_league(config or LeagueConfig(), run or RunConfig())
    return drive(league_run.start, league_run.progress, league_run.iterate, league_run.save,
                 league_run.close, 0.0, league_run.main_module, league_run.should_stop)


def start_league(config: LeagueConfig, run: RunConfig) -> LeagueRun:
    """A league ready to iterate (restored when run.resume is set): what train_league
    drives, for callers that step it themselves (bench/league_scale.py)."""
    start = start_run("league", config, run, check_env=_check_game)
    _check_run(start.run)
    return LeagueRun(start)


def _check_game(env: Any) -> None:
    make_multiagent_env(env).close()


def _check_run(run: RunConfig) -> None:
    if run.evaluation_interval or run.stop_return is not None:
        raise ValueError("a league is evaluated by matches, not by episodes of one agent: "
                         "use --league-eval-interval, --league-eval-games and "
                         "--stop-win-rate instead of --evaluation-interval/--stop-return.")


def outcome(result: MatchResult, a: str, b: str) -> float:
    """1, 0.5 or 0 for policy a against policy b by their seats' returns."""
    ra = max(r for ag, r in result.returns.items() if result.policies[ag] == a)
    rb = max(r for ag, r in result.returns.items() if result.policies[ag] == b)
    return 1.0 if ra > rb else 0.5 if ra == rb else 0.0


class LeagueRun:
    """The league's driver: matchmaking, the payoff table, snapshots, evaluation and
    checkpoints. Who plays and learns is its ``players``: LocalPlayers in this process,
    or RayPlayers (env runners reading the policy store, DistributedLearners)."""

    def __init__(self, start: Start):
        self.start, self.config, run = start, start.config, start.run
        game = make_multiagent_env(run.env, run.env_config)
        agent = game.possible_agents[0]
        self.agents = list(game.possible_agents)
        self.obs_space = policy_obs_space(game.observation_space(agent))
        self.act_space = game.action_space(agent)
        game.close()
        self.league = League(self.config.rules)
        self.rng = np.random.default_rng(run.seed)
        self.generator = torch.Generator().manual_seed(run.seed)
        for pid, role in self.config.learner_ids():
            self.league.add_learner(pid, role)
        self.progress = start.progress()
        state = start.algo_state() if start.ckpt is not None else None
        if state is not None:
            self.league = League.from_json(state["league"])
            self.rng.bit_generator.state = state["rng"]
        self.players = self._players(start.ckpt is not None and
                                     start.ckpt.tensors("learner", "state.pt"))

    def _players(self, saved: dict[str, Any] | None) -> Any:
        """Start the learners (restoring saved weights) and the games."""
        run, cfg = self.start.run, self.config
        spaces = (self.obs_space, self.act_space)
        if cfg.num_env_runners:
            from distrl.runtime.league import RayPlayers

            players: Any = RayPlayers(cfg, *spaces, run, self._choose)
        else:
            players = LocalPlayers(cfg, *spaces, run, self._choose, self.generator)
        if saved:
            self.generator.set_state(saved["generator"])
            players.set_state(saved)
        return players

    def _choose(self, env_index: int = 0) -> dict[str, str]:
        """A random learner, its opponent by the league, and a random seat for it."""
        learners = self.league.learners()
        learner = learners[int(self.rng.integers(len(learners)))]
        opponent = self.league.get_match(learner, self.rng)
        seat = int(self.rng.integers(len(self.agents)))
        return {a: learner if k == seat else opponent for k, a in enumerate(self.agents)}

    def iterate(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        learners = self.league.learners()
        results, env_steps = self.players.play(learners,
                                               self.config.train_batch_size * len(learners))
        t1 = time.perf_counter()
        metrics: dict[str, Any] = {}
        for pid, out in self.players.train().items():
            metrics.update({f"learner/{pid}/{k}": v for k, v in out.items()})
        for result in results:
            ids = sorted(set(result.policies.values()))
            if len(ids) == 2:
                self.league.record(ids[0], ids[1], outcome(result, ids[0], ids[1]))
        metrics.update(self._snapshots())
        t2 = time.perf_counter()
        # main_0's seats (two per self-play game), each with its game's length.
        seats = [(r, res.length) for res in results for a, r in res.returns.items()
                 if res.policies[a] == "main_0"]
        main_returns = np.array([r for r, _ in seats], np.float32)
        lengths = np.array([n for _, n in seats], np.int64)
        metrics = {**self.progress.add(env_steps, main_returns, lengths), **metrics,
                   "time/sample_s": t1 - t0, "time/learn_s": t2 - t1,
                   "env/steps_per_s": env_steps / (t2 - t0),
                   "league/matches_per_s": len(results) / (t2 - t0),
                   "league/num_policies": len(self.league.players),
                   **self.players.metrics()}
        every = self.config.league_eval_interval
        if every and self.progress.iteration % every == 0:
            metrics.update(self.evaluate())
        return metrics

    def _snapshots(self) -> dict[str, Any]:
        """Freeze qualifying learners (a copy of the weights), reset exploiters."""
        taken = []
        steps = self.players.env_steps()
        for pid in self.league.learners():
            if not self.league.ready_to_snapshot(pid, steps[pid]):
                continue
            snap = self.league.snapshot(pid, steps[pid])
            self.players.freeze(pid, snap)
            taken.append(snap)
            if self.league.should_reset(pid, self.rng):
                self.players.reset(pid)
        return {"league/snapshots_taken": len(taken)}

    def evaluate(self) -> dict[str, float]:
        """Each main agent plays league_eval_games greedy games against the random
        player and league_eval_member_games against every other learner and its own
        newest snapshot, half in each seat; the results move the Elo ratings. On
        OpenSpiel games also its exact NashConv (of its sampling policy)."""
        out: dict[str, float] = {}
        policies, run = self.players.acting(), self.start.run
        for pid in self.league.learners("main_agent"):
            for opponent, games in self._eval_opponents(pid):
                results = play_matches(run.env, run.env_config, policies,
                                       {pid, opponent} - {RANDOM}, pid, opponent, games)
                for r in results:
                    self.league.elo.update(pid, opponent, outcome(r, pid, opponent))
                rates = win_draw_loss(results, pid, opponent)
                out[f"league/win_rate/{pid}_vs_{opponent}"] = rates[0]
                out[f"league/draw_rate/{pid}_vs_{opponent}"] = rates[1]
            if str(run.env).startswith("openspiel:"):
                out[f"league/nash_conv/{pid}"] = _nash_conv(run.env, run.env_config,
                                                            policies[pid])
        out.update({f"league/elo/{p}": r for p, r in self.league.elo.ratings.items()})
        return out

    def _eval_opponents(self, pid: str) -> list[tuple[str, int]]:
        games = self.config.league_eval_member_games
        members = [o for o in self.league.learners() if o != pid]
        members += self.league.snapshots(parent=pid)[-1:]
        return [(RANDOM, self.config.league_eval_games)] + [(o, games) for o in members
                                                            if games]

    def should_stop(self, metrics: dict[str, Any]) -> str | None:
        target = self.config.stop_win_rate
        rates = [v for k, v in metrics.items()
                 if k.startswith("league/win_rate/main_") and k.endswith("_vs_random")]
        if target is not None and rates and min(rates) >= target:
            return "stop_win_rate"
        return None

    def main_module(self) -> torch.nn.Module:
        return self.players.module("main_0")

    def save(self) -> Path:
        state = self.players.get_state()
        main = state["weights"]["main_0"]
        return save_run(self.start, self.progress,
                        policy_files(main, self.obs_space, self.act_space, self.config.model),
                        {**state, "generator": self.generator.get_state()}, [],
                        {"league": self.league.to_json(), "rng": self.rng.bit_generator.state})

    def close(self) -> None:
        self.players.close()


class LocalPlayers:
    """Every learner, snapshot and game in the driver's process (num_env_runners=0)."""

    def __init__(self, cfg: LeagueConfig, obs_space: gym.Space, act_space: gym.Space,
                 run: RunConfig, choose: Any, generator: torch.Generator):
        self.cfg, self.spaces, self.generator = cfg, (obs_space, act_space), generator
        self.trainers = {pid: PolicyTrainer(obs_space, act_space, cfg, magnet=cfg.magnet)
                         for pid, _ in cfg.learner_ids()}
        self.policies: dict[str, Any] = {RANDOM: RandomPolicy(int(act_space.n))}
        self.policies.update({pid: LocalPolicy(t.model) for pid, t in self.trainers.items()})
        envs = [make_multiagent_env(run.env, run.env_config) for _ in range(cfg.num_envs)]
        self.games = MatchLoop(envs, choose, run.seed)
        self.pending: dict[str, Rollout] = {}

    def play(self, learners: list[str], min_samples: int) -> tuple[list[MatchResult], int]:
        """Games until the learners' finished seats hold min_samples moves."""
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
                            if pid != RANDOM},
                "trainers": {pid: _without_model(t.get_state())
                             for pid, t in self.trainers.items()}}

    def set_state(self, saved: dict[str, Any]) -> None:
        for pid, weights in saved["weights"].items():
            if pid in self.trainers:
                self.trainers[pid].set_state({**saved["trainers"][pid], "model": weights})
            else:  # a frozen snapshot
                module = ActorCritic(*self.spaces, self.cfg.model)
                module.load_state_dict(weights)
                self.policies[pid] = LocalPolicy(module.requires_grad_(False))

    def close(self) -> None:
        for env in self.games.envs:
            env.close()


def _without_model(state: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in state.items() if k != "model"}


def play_matches(game: Any, env_config: dict[str, Any], policies: Any, greedy: set[str],
                 pid: str, opponent: str, games: int, seed: int = 0) -> list[MatchResult]:
    """``games`` games of ``pid`` against ``opponent``, split evenly over the seats, on
    envs of their own (policies in ``greedy`` act greedily; fixed seeds, so evaluations
    are comparable)."""
    agents = make_multiagent_env(game, env_config).possible_agents
    results = []
    for seat in range(len(agents)):
        n = games // len(agents) + (seat < games % len(agents))
        if n == 0:
            continue
        mapping = {a: pid if k == seat else opponent for k, a in enumerate(agents)}
        envs = [make_multiagent_env(game, env_config) for _ in range(min(n, 16))]
        loop = MatchLoop(envs, lambda i, m=mapping: m, seed=10_000 * (seed + 1) + 100 * seat)
        generator = torch.Generator().manual_seed(seed * 100 + seat)
        batch = loop.collect(policies.__getitem__, set(), 0, 1.0, 1.0, generator,
                             greedy=greedy, min_episodes=n)
        for env in envs:
            env.close()
        results += batch.results[:n]
    return results


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
        module = ActorCritic(obs_space, act_space, config.model)
        module.load_state_dict(weights[pid])
        policies[pid] = LocalPolicy(module.requires_grad_(False))
    greedy = set() if stochastic else {policy, opponent} - {RANDOM}
    rates = win_draw_loss(play_matches(run["env"], run["env_config"], policies, greedy,
                                       policy, opponent, games, seed), policy, opponent)
    out = {"policy": policy, "opponent": opponent, "games": games,
           "win_rate": rates[0], "draw_rate": rates[1], "loss_rate": rates[2]}
    if str(run["env"]).startswith("openspiel:"):
        out["nash_conv"] = _nash_conv(run["env"], run["env_config"], policies[policy])
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
    if not callable(act):
        raise ValueError(f"opponent {spec!r} is not callable.")
    return ScriptedPolicy(act, spec)


def _nash_conv(game: str, env_config: dict[str, Any], policy: Any) -> float:
    """OpenSpiel's exact NashConv of the policy (its action probabilities)."""
    env = make_multiagent_env(game, env_config)

    def probs(obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            logits, _ = policy(torch.as_tensor(obs[None]))
        return torch.softmax(mask_logits(logits, torch.as_tensor(mask[None]).bool()),
                             -1)[0].numpy()

    return nash_conv(env.game, probs)
