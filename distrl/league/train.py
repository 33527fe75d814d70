"""train_league: PPO learners in an AlphaStar-style league on a multi-agent game.

Each iteration the games are seated by the league's matchmaking at every reset; every
learner trains on its own moves with the shared PPO update (LeagueTrainer); finished
games fill the payoff table; learners that qualify are frozen as snapshots (and
exploiters reset); every league_eval_interval iterations the main agents play evaluation
games against a uniformly random player (and the league's members), the only source of
win rates and Elo, and once more at the end when the last iteration had none.

LeagueRun decides; its workers play and learn: LocalWorkers in this process
(num_env_runners=0), or league.remote.RayWorkers (Ray env runners reading the policy
store, DistributedLearners)."""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from distrl.core.callbacks import Callbacks
from distrl.core.config import RunConfig
from distrl.core.evaluation import missed_last
from distrl.core.loop import Start, drive, policy_files, save_run, start_run
from distrl.games.games import make_multiagent_env, policy_obs_space
from distrl.games.nash import AveragePolicy, table_nash_conv
from distrl.games.policies import RANDOM
from distrl.games.scoring import nash_conv_game, outcome, play_matches, policy_table, win_draw_loss
from distrl.games.tabular import AVERAGE, table_files, table_policy
from distrl.league.config import LeagueConfig
from distrl.league.rules import League
from distrl.league.workers import LocalWorkers, Workers


def train_league(config: LeagueConfig | None = None, run: RunConfig | None = None, *,
                 callbacks: Callbacks | None = None) -> dict[str, Any]:
    """Train a league until a stop condition holds; returns the final metrics and the
    checkpoint (whose policy is main_0's, for `distrl eval`). ``callbacks``: your
    functions, called between iterations (distrl.Callbacks)."""
    league_run = start_league(config or LeagueConfig(), run or RunConfig())
    result = drive(league_run.start, league_run, callbacks)
    return {**league_run.evaluated, **result}  # the last evaluation's, when not the last


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


def _check_learners(league: League, config: LeagueConfig) -> None:
    """A resumed league plays by the config's rules, but keeps its learners: a new count
    would add trainers the saved league never schedules (or drop saved ones)."""
    saved = sorted(league.learners())
    wanted = sorted(pid for pid, _ in config.learner_ids())
    if saved != wanted:
        raise ValueError(f"a resumed league keeps its learners ({', '.join(saved)}); these "
                         f"rules ask for {', '.join(wanted)}. Drop the num_main_agents / "
                         "num_main_exploiters / num_league_exploiters flags, or start a new run.")


class LeagueRun:
    """The league's driver: matchmaking, the payoff table, snapshots, evaluation and
    checkpoints. Who plays and learns is its ``workers``: LocalWorkers in this process,
    or RayWorkers (env runners reading the policy store, DistributedLearners)."""

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
        self.ray_start_s = 0.0  # Ray starts inside RayWorkers' set-up, not timed apart
        self.averages: dict[str, AveragePolicy] = {}  # main agent -> recent evaluations
        self.evaluated: dict[str, Any] = {}  # the last evaluation's metrics
        state = start.algo_state() if start.ckpt is not None else None
        if state is not None:
            self.league = League.from_json(state["league"], self.config.rules)
            _check_learners(self.league, self.config)
        self.workers = self._workers(start.ckpt is not None and
                                     start.ckpt.learner_state())
        if state is not None:  # after the workers, whose first games drew from it
            self.rng.bit_generator.state = state["rng"]

    def _workers(self, saved: dict[str, Any] | None) -> Workers:
        """Start the learners (restoring saved weights) and the games."""
        run, cfg = self.start.run, self.config
        spaces = (self.obs_space, self.act_space)
        if cfg.num_env_runners:
            from distrl.league.remote import RayWorkers

            workers: Workers = RayWorkers(cfg, *spaces, run, self._choose)
        else:
            workers = LocalWorkers(cfg, *spaces, run, self._choose, self.generator)
        if saved:
            self.generator.set_state(saved["generator"])
            workers.set_state(saved)
            workers.set_games_state(self.start.ckpt.runner_states())
        return workers

    def _choose(self, env_index: int = 0, learner: str | None = None) -> dict[str, str]:
        """A learner (random unless given), its opponent by the league, and a random
        seat for it."""
        if learner is None:
            learners = self.league.learners()
            learner = learners[int(self.rng.integers(len(learners)))]
        opponent = self.league.get_match(learner, self.rng)
        seat = int(self.rng.integers(len(self.agents)))
        return {a: learner if k == seat else opponent for k, a in enumerate(self.agents)}

    def iterate(self) -> dict[str, Any]:
        t0 = time.perf_counter()
        learners = self.league.learners()
        results, env_steps = self.workers.play(learners, self.config.train_batch_size)
        t1 = time.perf_counter()
        metrics: dict[str, Any] = {}
        for pid, out in self.workers.train().items():
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
                   **self.workers.metrics()}
        every = self.config.league_eval_interval
        if every and self.progress.iteration % every == 0:
            self.evaluated = self.evaluate()
            metrics.update(self.evaluated)
        return metrics

    def final_evaluation(self) -> dict[str, float]:
        """Off the record: Elo and the average policies move only at the scheduled
        evaluations, so a run stopped and resumed equals one that never stopped."""
        if not missed_last(self.config.league_eval_interval, self.progress.iteration):
            return {}
        self.evaluated = self.evaluate(record=False)
        return self.evaluated

    def _snapshots(self) -> dict[str, Any]:
        """Freeze qualifying learners (a copy of the weights), reset exploiters."""
        taken = []
        steps = self.workers.env_steps()
        for pid in self.league.learners():
            if not self.league.ready_to_snapshot(pid, steps[pid]):
                continue
            snap = self.league.snapshot(pid, steps[pid])
            self.workers.freeze(pid, snap)
            taken.append(snap)
            if self.league.should_reset(pid, self.rng):
                self.workers.reset(pid)
        return {"league/snapshots_taken": len(taken)}

    def evaluate(self, record: bool = True) -> dict[str, float]:
        """Each main agent plays league_eval_games greedy games against the random
        player and league_eval_member_games against every other learner and its own
        newest snapshot, half in each seat; the results move the Elo ratings (when
        ``record``). On OpenSpiel games also its exact NashConv (of its sampling
        policy)."""
        out: dict[str, float] = {}
        policies, run = self.workers.acting(), self.start.run
        openings = self.config.league_eval_random_opening_moves
        for pid in self.league.learners("main_agent"):
            for opponent, games in self._eval_opponents(pid):
                results = play_matches(run.env, run.env_config, policies,
                                       {pid, opponent} - {RANDOM}, pid, opponent, games,
                                       opening_moves=openings)
                for r in results if record else ():
                    self.league.elo.update(pid, opponent, outcome(r, pid, opponent))
                rates = win_draw_loss(results, pid, opponent)
                out[f"league/win_rate/{pid}_vs_{opponent}"] = rates[0]
                out[f"league/draw_rate/{pid}_vs_{opponent}"] = rates[1]
                out[f"league/distinct_games/{pid}_vs_{opponent}"] = len(
                    {r.history for r in results})
            out.update(self._nash_conv(pid, policies[pid], record))
        out.update({f"league/elo/{p}": r for p, r in self.league.elo.ratings.items()})
        return out

    def _nash_conv(self, pid: str, policy: Any, record: bool) -> dict[str, float]:
        """On OpenSpiel games: the policy's exact NashConv, and its average's over the
        last league_eval_average_window evaluations when that is on (this one among
        them when ``record``)."""
        game, window = self.nash_game, self.config.league_eval_average_window
        table = None if game is None else policy_table(game, policy)
        if table is None:
            return {}
        out = {f"league/nash_conv/{pid}": table_nash_conv(game, table)}
        if window and record:
            if pid not in self.averages:  # built once: it walks the game's tree
                self.averages[pid] = AveragePolicy(game, window)
            self.averages[pid].add(table)
        if pid in self.averages:  # the average the checkpoint saves
            out[f"league/nash_conv_avg/{pid}"] = self.averages[pid].nash_conv()
        return out

    @functools.cached_property
    def nash_game(self) -> Any | None:
        """The OpenSpiel game of the NashConv evaluations, or None when there are none
        (scoring.nash_conv_game): decided once, at the first evaluation."""
        run = self.start.run
        return nash_conv_game(run.env, run.env_config, self.config.nash_conv_max_states)

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

    def policy(self) -> torch.nn.Module:
        """The main agent's network (evaluation episodes)."""
        return self.workers.module("main_0")

    def save(self) -> Path:
        state = self.workers.get_state()
        main = state["weights"]["main_0"]
        return save_run(self.start, self.progress,
                        policy_files(main, self.obs_space, self.act_space, self.config.model),
                        {**state, "generator": self.generator.get_state()},
                        self.workers.games_state(),
                        {"league": self.league.to_json(), "rng": self.rng.bit_generator.state},
                        more=self._average_files())

    def _average_files(self) -> dict[str, Any]:
        """main_0's average policy (the one league/nash_conv_avg/main_0 judges) as the
        checkpoint's table policy ``average`` (games.tabular), when there is one."""
        average = self.averages.get("main_0")
        if average is None or average.last is None:
            return {}
        policy = table_policy(self.nash_game, average.table())
        return {} if policy is None else {AVERAGE: table_files(policy, "main_0",
                                                               len(average.parts))}

    def close(self) -> None:
        self.workers.close()

