"""train_alphazero: self-play with PUCT search on a two-player board game (docs/alphazero.md).

Each move of every game is chosen by a search (alphazero.search) whose leaves the
network evaluates; the positions, the searches' visit distributions and the games'
outcomes fill a replay, on which the network takes updates_per_move gradient steps per
move of the games. Self-play runs in this process (num_workers=0) or on Ray self-play
workers (alphazero.remote), each with its own games and a copy of the network; the
learner stays in the driver, on RunConfig.device (its steps took 18% of a tuned
connect-four run's time: docs/alphazero.md).

Games are OpenSpiel games (``openspiel:connect_four``) or PettingZoo games with an
OpenSpiel twin (``pettingzoo:connect_four_v3``): search runs on OpenSpiel states, the
network sees what the env would show (games.observe_states), so the saved policy plays in
``distrl eval --opponent ...`` and against league policies like any other.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch

from distrl.alphazero.config import AlphaZeroConfig
from distrl.alphazero.loss import alphazero_loss
from distrl.alphazero.self_play import (
    LocalSelfPlayers,
    Replay,
    SelfPlayer,
    check_turn_visible,
    mirrored,
    search_game,
)
from distrl.core.callbacks import Callbacks
from distrl.core.config import RunConfig
from distrl.core.evaluation import missed_last
from distrl.core.learner import Learner
from distrl.core.loop import Start, drive, learner_device, policy_files, save_run, start_run
from distrl.core.sampling import seed_for
from distrl.games.games import make_multiagent_env, policy_obs_space
from distrl.games.policies import RANDOM, LocalPolicy
from distrl.games.scoring import outside_policy, play_matches, win_draw_loss
from distrl.models.recurrent import actor_critic

PLAYER = "main_0"
"""The network's id in evaluations and in the checkpoint (as a league's main agent), so
``distrl eval`` reads both alike."""
CALL_EVALUATIONS = 8 * 128 * 50
"""Leaf evaluations a Ray worker's call may hold (8 moves of 128 games at 50
simulations: a few seconds on a core), so that a call's time stays far below
actor_timeout_s however large an iteration; an iteration makes several calls."""


def train_alphazero(config: AlphaZeroConfig | None = None, run: RunConfig | None = None, *,
                    callbacks: Callbacks | None = None) -> dict[str, Any]:
    """Self-play until a stop condition holds; returns the final metrics and the checkpoint.
    ``callbacks``: your functions, called between iterations (distrl.Callbacks)."""
    # No env check here: AlphaZeroRun makes the env first, with its env_config (a
    # module:callable game may need one).
    start = start_run("alphazero", config or AlphaZeroConfig(), run or RunConfig(),
                      check_env=lambda env: None)
    if start.run.evaluation_interval or start.run.stop_return is not None:
        raise ValueError("AlphaZero is evaluated by games against eval_opponent, not by "
                         "episodes of one agent: use --eval-interval, --eval-games and "
                         "--eval-opponent instead of --evaluation-interval/--stop-return.")
    az = AlphaZeroRun(start)
    result = drive(start, az, callbacks)
    return {**az.evaluated, **result}  # the last evaluation's, when not the last


class AlphaZeroRun:
    """The network, its learner, the replay and the self-players of one run. In process
    the network takes its steps after every move of the games; with num_workers each
    call has every worker play a few moves of its games (_rounds) with the newest
    weights, then the steps owed for them follow, until the iteration's moves are made."""

    def __init__(self, start: Start):
        self.start, self.cfg, run = start, start.config, start.run
        self.env = make_multiagent_env(run.env, run.env_config)
        agent = self.env.possible_agents[0]
        self.obs_space = policy_obs_space(self.env.observation_space(agent))
        self.act_space = self.env.action_space(agent)
        self._check_mirror()
        check_turn_visible(search_game(self.env), self.env.observe_states)
        self.device = learner_device(run.device)
        self.model = actor_critic(self.obs_space, self.act_space, self.cfg.model).to(self.device)
        self.learner = Learner(self.model, self.cfg.lr_at(0), self.cfg.grad_clip)
        self.replay = Replay(self.cfg.replay_capacity, self.obs_space.shape,
                             int(self.act_space.n), self.obs_space.dtype,
                             average=self.cfg.average_positions)
        self.rng = np.random.default_rng(run.seed)
        self.progress = start.progress()
        self.evaluated: dict[str, float] = {}  # the last evaluation's metrics
        if start.ckpt is not None:
            self.learner.set_state(start.ckpt.learner_state()["learner"])
            self.replay.set_state(start.ckpt.replay_state())
            self.rng.bit_generator.state = start.algo_state()["rng"]
        self.players, self.ray_start_s = self._players()  # last: Ray only once all else holds

    def _players(self) -> tuple[Any, float]:
        cfg, run = self.cfg, self.start.run
        if not cfg.num_workers:
            player = SelfPlayer(run.env, run.env_config, cfg, run.seed, self.model, self.rng)
            return LocalSelfPlayers(player), 0.0
        from distrl.alphazero.remote import RaySelfPlayers

        resumed = self.progress.iteration

        def kwargs(index: int, restart: int) -> dict[str, Any]:
            return dict(env=run.env, env_config=run.env_config, config=cfg,
                        seed=seed_for(run.seed, index, restart, resumed))

        players = RaySelfPlayers(kwargs, cfg.num_workers, cfg.num_cpus_per_worker, run)
        return players, players.ray_start_s

    def _check_mirror(self) -> None:
        shape, n = self.obs_space.shape, getattr(self.act_space, "n", None)
        if self.cfg.mirror and not (shape is not None and len(shape) >= 2 and shape[1] == n):
            raise ValueError(f"mirror flips a board [rows, columns, ...] with one action per "
                             f"column; this game observes {shape} and has {n} actions: "
                             "leave mirror off.")

    def iterate(self) -> dict[str, Any]:
        cfg = self.cfg
        moves, returns, lengths, losses = 0, [], [], []
        while moves < cfg.moves_per_iteration:
            rounds = self._rounds(moves)
            weights = self.learner.weights() if cfg.num_workers else None
            for obs, policy, outcome, result in self.players.play(weights, rounds):
                self.replay.add(obs, policy, outcome)
                if cfg.mirror:
                    self.replay.add(*mirrored(obs, policy), outcome)
                returns.append(result[0])
                lengths.append(len(outcome))
            batches = rounds * self.players.size  # num_games moves each
            moves += cfg.num_games * batches
            if self.replay.size >= max(cfg.learning_starts, cfg.train_batch_size):
                self.learner.set_lr(cfg.lr_at(self.progress.env_steps + moves))
                losses += [self._update() for _ in range(cfg.updates_per_move * batches)]
        metrics = self.progress.add(moves, np.array(returns, np.float32),
                                    np.array(lengths, np.int64))
        metrics["replay/size"] = self.replay.size
        if losses:
            metrics["learner/policy_loss"] = float(np.mean([p for p, _ in losses]))
            metrics["learner/value_loss"] = float(np.mean([v for _, v in losses]))
            metrics["learner/lr"] = self.learner.opt.param_groups[0]["lr"]
        every = cfg.eval_interval
        if every and self.progress.iteration % every == 0:
            self.evaluated = self.evaluate()
            metrics.update(self.evaluated)
        return {**metrics, **self.players.metrics()}

    def _rounds(self, moves: int) -> int:
        """Moves of every game in the next call: one in process (steps follow each);
        with workers, the rounds the iteration still owes (its moves_per_iteration shared
        by the workers, rounded up), at most CALL_EVALUATIONS leaf evaluations a call."""
        cfg = self.cfg
        if not cfg.num_workers:
            return 1
        owed = -(-(cfg.moves_per_iteration - moves) // (cfg.num_games * cfg.num_workers))
        return max(1, min(owed, CALL_EVALUATIONS // (cfg.num_games * cfg.num_simulations)))

    def _update(self) -> tuple[float, float]:
        """One step on cross-entropy to the search policies plus squared value error."""
        obs, policy, outcome = (t.to(self.device) for t in
                                self.replay.sample(self.cfg.train_batch_size, self.rng))
        loss, parts = alphazero_loss(*self.model(obs), policy, outcome)
        self.learner.step(loss, len(outcome))
        return float(parts["policy_loss"]), float(parts["value_loss"])

    def evaluate(self) -> dict[str, float]:
        """eval_games greedy games of the network (no search) against eval_opponent and,
        when that is a bot, against the random player too (cheap: no search on either
        side), so every run logs eval/win_rate_vs_random."""
        run = self.start.run
        model = self.model if self.device.type == "cpu" else copy.deepcopy(self.model).cpu()
        out: dict[str, float] = {}
        for opponent in dict.fromkeys((self.cfg.eval_opponent, RANDOM)):
            policies = {PLAYER: LocalPolicy(model),
                        opponent: outside_policy(opponent, run.env, run.env_config, run.seed,
                                                 int(self.act_space.n))}
            results = play_matches(run.env, run.env_config, policies, {PLAYER}, PLAYER,
                                   opponent, self.cfg.eval_games, run.seed)
            win, draw, _ = win_draw_loss(results, PLAYER, opponent)
            out[f"eval/win_rate_vs_{opponent}"] = float(win)
            out[f"eval/draw_rate_vs_{opponent}"] = float(draw)
        return out

    def final_evaluation(self) -> dict[str, float]:
        if not missed_last(self.cfg.eval_interval, self.progress.iteration):
            return {}
        self.evaluated = self.evaluate()
        return self.evaluated

    def policy(self) -> torch.nn.Module:
        return self.model

    def should_stop(self, metrics: dict[str, Any]) -> str | None:
        return None  # the run's own stop conditions only

    def close(self) -> None:
        self.players.close()

    def save(self) -> Any:
        weights = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}
        return save_run(self.start, self.progress,
                        policy_files(weights, self.obs_space, self.act_space, self.cfg.model),
                        {"weights": {PLAYER: weights}, "learner": self.learner.get_state()},
                        [], {"rng": self.rng.bit_generator.state},
                        more={"replay": {"state.pt": self.replay.get_state()}})
