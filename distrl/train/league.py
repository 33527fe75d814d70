"""train_league: PPO learners in an AlphaStar-style league on a multi-agent game.

Each iteration the games (a MatchLoop) are seated by the league's matchmaking at every
reset; every learner trains on its own moves with the shared PPO update; finished games
fill the payoff table; learners that qualify are frozen as snapshots (and exploiters
reset); every league_eval_interval iterations the main agents play evaluation games
against a uniformly random player, the only source of win rates and Elo.

This driver plays every game in its own process (num_env_runners=0).
"""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from distrl.algos.league import League, LeagueConfig
from distrl.algos.ppo import ppo_update, update_kl_coeff
from distrl.checkpoint import Checkpoint, space_from_json
from distrl.config import RunConfig, from_json
from distrl.learner import Learner
from distrl.loop import Start, drive, policy_files, save_run, start_run
from distrl.matches import RANDOM, LocalPolicy, MatchLoop, MatchResult, RandomPolicy
from distrl.multiagent import make_multiagent_env, nash_conv, policy_obs_space
from distrl.nets import ActorCritic, mask_logits
from distrl.types import PPOBatch


def train_league(config: LeagueConfig | None = None, run: RunConfig | None = None
                 ) -> dict[str, Any]:
    """Train a league until a stop condition holds; returns the final metrics and the
    checkpoint (whose policy is main_0's, for `distrl eval`)."""
    start = start_run("league", config or LeagueConfig(), run or RunConfig(),
                      check_env=_check_game)
    _check_run(start.run)
    league_run = LeagueRun(start)
    return drive(start, league_run.progress, league_run.iterate, league_run.save,
                 league_run.close, 0.0, lambda: league_run.policies["main_0"].module,
                 league_run.should_stop)


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
    """The league's state in one process: learners, frozen snapshots, the games."""

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
        self.learners: dict[str, Learner] = {}
        self.policies: dict[str, LocalPolicy] = {RANDOM: RandomPolicy(int(self.act_space.n))}
        self.kl_coeffs: dict[str, float] = {}
        self.steps: dict[str, int] = {}
        for pid, role in self.config.learner_ids():
            self.league.add_learner(pid, role)
            self._new_learner(pid)
        self.progress = start.progress()
        if start.ckpt is not None:
            self._restore()
        envs = [make_multiagent_env(run.env, run.env_config) for _ in range(self.config.num_envs)]
        self.games = MatchLoop(envs, self._choose, run.seed)

    def _new_learner(self, pid: str) -> None:
        model = ActorCritic(self.obs_space, self.act_space, self.config.model)
        self.learners[pid] = Learner(model, self.config.lr_at(0), self.config.grad_clip)
        self.policies[pid] = LocalPolicy(model)
        self.kl_coeffs[pid] = self.config.kl_coeff
        self.steps.setdefault(pid, 0)

    def _choose(self, env_index: int) -> dict[str, str]:
        """A random learner, its opponent by the league, and a random seat for it."""
        learners = self.league.learners()
        learner = learners[int(self.rng.integers(len(learners)))]
        opponent = self.league.get_match(learner, self.rng)
        seat = int(self.rng.integers(len(self.agents)))
        return {a: learner if k == seat else opponent for k, a in enumerate(self.agents)}

    def iterate(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        learners = self.league.learners()
        batch = self.games.collect(self.policies.__getitem__, set(learners),
                                   self.config.train_batch_size * len(learners),
                                   self.config.gamma, self.config.gae_lambda, self.generator)
        t1 = time.perf_counter()
        metrics: dict[str, Any] = {}
        for pid, rollout in batch.rollouts.items():
            self.steps[pid] += rollout.size
            metrics.update(self._update(pid, rollout))
        for result in batch.results:
            ids = sorted(set(result.policies.values()))
            if len(ids) == 2:
                self.league.record(ids[0], ids[1], outcome(result, ids[0], ids[1]))
        metrics.update(self._snapshots())
        t2 = time.perf_counter()
        # main_0's seats (two per self-play game), each with its game's length.
        seats = [(r, res.length) for res in batch.results for a, r in res.returns.items()
                 if res.policies[a] == "main_0"]
        main_returns = np.array([r for r, _ in seats], np.float32)
        lengths = np.array([n for _, n in seats], np.int64)
        metrics = {**self.progress.add(batch.env_steps, main_returns, lengths), **metrics,
                   "time/sample_s": t1 - t0, "time/learn_s": t2 - t1,
                   "env/steps_per_s": batch.env_steps / (t2 - t0),
                   "league/matches_per_s": len(batch.results) / (t2 - t0),
                   "league/num_policies": len(self.policies) - 1}
        every = self.config.league_eval_interval
        if every and self.progress.iteration % every == 0:
            metrics.update(self.evaluate())
        return metrics

    def _update(self, pid: str, rollout: Any) -> dict[str, float]:
        cfg, learner = self.config, self.learners[pid]
        learner.set_lr(cfg.lr_at(self.steps[pid]))
        out = ppo_update(learner, PPOBatch.from_rollout(rollout), cfg, self.kl_coeffs[pid],
                         cfg.entropy_coeff_at(self.steps[pid]), self.generator)
        if cfg.use_kl_loss:
            self.kl_coeffs[pid] = update_kl_coeff(self.kl_coeffs[pid], out["kl"], cfg.kl_target)
        return {f"learner/{pid}/{k}": v for k, v in out.items()}

    def _snapshots(self) -> dict[str, Any]:
        """Freeze qualifying learners (a copy of the weights), reset exploiters."""
        taken = []
        for pid in self.league.learners():
            if not self.league.ready_to_snapshot(pid, self.steps[pid]):
                continue
            snap = self.league.snapshot(pid, self.steps[pid])
            frozen = copy.deepcopy(self.policies[pid].module).requires_grad_(False)
            self.policies[snap] = LocalPolicy(frozen)
            taken.append(snap)
            if self.league.should_reset(pid, self.rng):
                self._new_learner(pid)
        return {"league/snapshots_taken": len(taken)}

    def evaluate(self) -> dict[str, float]:
        """Each main agent plays league_eval_games greedy games against the random
        player, half in each seat; the results move the Elo ratings."""
        out: dict[str, float] = {}
        for pid in self.league.learners("main_agent"):
            wins = draws = 0
            games = self.config.league_eval_games
            for seat in range(len(self.agents)):
                n = games // len(self.agents) + (seat < games % len(self.agents))
                results = _play(self, pid, seat, n)
                for r in results:
                    o = outcome(r, pid, RANDOM)
                    wins, draws = wins + (o == 1.0), draws + (o == 0.5)
                    self.league.elo.update(pid, RANDOM, o)
            out[f"league/win_rate/{pid}_vs_random"] = wins / games
            out[f"league/draw_rate/{pid}_vs_random"] = draws / games
        out.update({f"league/elo/{p}": r for p, r in self.league.elo.ratings.items()})
        return out

    def should_stop(self, metrics: dict[str, Any]) -> str | None:
        target = self.config.stop_win_rate
        rates = [v for k, v in metrics.items() if k.startswith("league/win_rate/main_")]
        if target is not None and rates and min(rates) >= target:
            return "stop_win_rate"
        return None

    def save(self) -> Path:
        main = self.policies["main_0"].module
        weights = {pid: p.module.state_dict() for pid, p in self.policies.items()
                   if pid != RANDOM}
        optim = {pid: learner.get_state()["optimizer"] for pid, learner in self.learners.items()}
        return save_run(self.start, self.progress,
                        policy_files(main.state_dict(), self.obs_space, self.act_space,
                                     self.config.model),
                        {"weights": weights, "optimizer": optim,
                         "generator": self.generator.get_state()}, [],
                        {"league": self.league.to_json(), "kl_coeffs": self.kl_coeffs,
                         "steps": self.steps, "rng": self.rng.bit_generator.state})

    def _restore(self) -> None:
        state = self.start.algo_state()
        self.league = League.from_json(state["league"])
        self.kl_coeffs, self.steps = dict(state["kl_coeffs"]), dict(state["steps"])
        self.rng.bit_generator.state = state["rng"]
        saved = self.start.ckpt.tensors("learner", "state.pt")
        self.generator.set_state(saved["generator"])
        for pid, weights in saved["weights"].items():
            if pid in self.learners:
                self.learners[pid].set_state({"model": weights,
                                              "optimizer": saved["optimizer"][pid]})
            else:  # a frozen snapshot
                module = ActorCritic(self.obs_space, self.act_space, self.config.model)
                module.load_state_dict(weights)
                self.policies[pid] = LocalPolicy(module.requires_grad_(False))

    def close(self) -> None:
        for env in self.games.envs:
            env.close()


def _play(run: LeagueRun, pid: str, seat: int, games: int) -> list[MatchResult]:
    return play_matches(run.start.run.env, run.start.run.env_config, run.policies,
                        {pid}, pid, RANDOM, seat, games)


def play_matches(game: Any, env_config: dict[str, Any], policies: dict[str, Any],
                 greedy: set[str], pid: str, opponent: str, seat: int, games: int,
                 seed: int = 0) -> list[MatchResult]:
    """``games`` games of ``pid`` in ``seat`` against ``opponent`` on envs of their own
    (policies in ``greedy`` act greedily; fixed seeds, so evaluations are comparable)."""
    if games == 0:
        return []
    agents = make_multiagent_env(game, env_config).possible_agents
    mapping = {a: pid if k == seat else opponent for k, a in enumerate(agents)}
    envs = [make_multiagent_env(game, env_config) for _ in range(min(games, 16))]
    loop = MatchLoop(envs, lambda i: mapping, seed=10_000 * (seed + 1) + 100 * seat)
    generator = torch.Generator().manual_seed(seed * 100 + seat)
    batch = loop.collect(policies.__getitem__, set(), 0, 1.0, 1.0, generator,
                         greedy=greedy, min_episodes=games)
    for env in envs:
        env.close()
    return batch.results[:games]


def evaluate_league(checkpoint: str | Path, policy: str = "main_0", opponent: str = RANDOM,
                    games: int = 200, seed: int = 0, stochastic: bool = False
                    ) -> dict[str, Any]:
    """Win, draw and loss rates of a saved league's ``policy`` against ``opponent``
    (random or another of its policies), half of the games in each seat; for OpenSpiel
    games also the policy's exact NashConv (both seats played by it)."""
    ckpt = Checkpoint(checkpoint)
    if ckpt.algo != "league":
        raise ValueError(f"{str(ckpt.path)!r} holds a {ckpt.algo!r} run; --policy and "
                         "--opponent apply to league checkpoints.")
    run = ckpt.json("run", "config.json")["run"]
    config = from_json(LeagueConfig, ckpt.json("run", "config.json")["config"])
    spec = ckpt.json("policy", "policy.json")
    obs_space, act_space = space_from_json(spec["obs_space"]), space_from_json(spec["act_space"])
    weights = ckpt.tensors("learner", "state.pt")["weights"]
    policies: dict[str, Any] = {RANDOM: RandomPolicy(int(act_space.n))}
    for pid in {policy, opponent} - {RANDOM}:
        if pid not in weights:
            raise ValueError(f"no policy {pid!r} in this league; it has {sorted(weights)}.")
        module = ActorCritic(obs_space, act_space, config.model)
        module.load_state_dict(weights[pid])
        policies[pid] = LocalPolicy(module.requires_grad_(False))
    greedy = set() if stochastic else {policy, opponent} - {RANDOM}
    seats = len(make_multiagent_env(run["env"], run["env_config"]).possible_agents)
    counts = np.zeros(3)
    for seat in range(seats):
        n = games // seats + (seat < games % seats)
        for r in play_matches(run["env"], run["env_config"], policies, greedy, policy,
                              opponent, seat, n, seed):
            counts[[1.0, 0.5, 0.0].index(outcome(r, policy, opponent))] += 1
    out = {"policy": policy, "opponent": opponent, "games": games,
           "win_rate": counts[0] / games, "draw_rate": counts[1] / games,
           "loss_rate": counts[2] / games}
    if str(run["env"]).startswith("openspiel:"):
        out["nash_conv"] = _nash_conv(run["env"], run["env_config"], policies[policy])
    return out


def _nash_conv(game: str, env_config: dict[str, Any], policy: Any) -> float:
    """OpenSpiel's exact NashConv of the policy (its action probabilities)."""
    env = make_multiagent_env(game, env_config)

    def probs(obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            logits, _ = policy(torch.as_tensor(obs[None]))
        return torch.softmax(mask_logits(logits, torch.as_tensor(mask[None]).bool()),
                             -1)[0].numpy()

    return nash_conv(env.game, probs)
