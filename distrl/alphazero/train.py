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
from distrl.alphazero.search import Node, add_noise, expand_roots, search
from distrl.core.config import RunConfig
from distrl.core.learner import Learner
from distrl.core.loop import Start, drive, learner_device, policy_files, save_run, start_run
from distrl.core.sampling import seed_for
from distrl.league.games import import_extra, make_multiagent_env, policy_obs_space
from distrl.league.policies import LocalPolicy
from distrl.league.scoring import outside_policy, play_matches, win_draw_loss
from distrl.models.recurrent import actor_critic

PLAYER = "main_0"
"""The network's id in evaluations and in the checkpoint (as a league's main agent), so
``distrl eval`` reads both alike."""


def train_alphazero(config: AlphaZeroConfig | None = None, run: RunConfig | None = None
                    ) -> dict[str, Any]:
    """Self-play until a stop condition holds; returns the final metrics and the checkpoint."""
    start = start_run("alphazero", config or AlphaZeroConfig(), run or RunConfig(),
                      check_env=lambda env: make_multiagent_env(env).close())
    if start.run.evaluation_interval or start.run.stop_return is not None:
        raise ValueError("AlphaZero is evaluated by games against eval_opponent, not by "
                         "episodes of one agent: use --eval-interval, --eval-games and "
                         "--eval-opponent instead of --evaluation-interval/--stop-return.")
    az = AlphaZeroRun(start)
    return drive(start, az.progress, az.iterate, az.save, az.players.close, az.ray_start_s,
                 lambda: az.model, lambda metrics: None)


def search_game(env: Any) -> Any:
    """The OpenSpiel game the env's positions are searched in; a ValueError unless it is
    a two-player zero-sum game of perfect information without chance."""
    pyspiel = import_extra("pyspiel", "open_spiel")
    if not hasattr(env, "openspiel_state"):
        raise ValueError(f"AlphaZero searches OpenSpiel states; {type(env).__name__} has none: "
                         "use --env openspiel:<game> or a PettingZoo game with an OpenSpiel "
                         "twin (pettingzoo:connect_four_v3).")
    env.reset(seed=0)
    game = env.openspiel_state().get_game()
    kind = game.get_type()
    ok = (game.num_players() == 2 and kind.chance_mode == pyspiel.GameType.ChanceMode.DETERMINISTIC
          and kind.information == pyspiel.GameType.Information.PERFECT_INFORMATION
          and kind.utility in (pyspiel.GameType.Utility.ZERO_SUM,
                               pyspiel.GameType.Utility.CONSTANT_SUM))
    if not ok:
        raise ValueError(f"AlphaZero searches two-player zero-sum games of perfect information "
                         f"without chance; {kind.short_name!r} is not one (for poker and other "
                         "hidden-information games train a league with a magnet).")
    return game


class Replay:
    """The newest ``capacity`` positions: observation, search policy, value target for
    the player to move (``outcome``: the game's, mixed with the search's by
    value_target_mix), as a ring of numpy arrays."""

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], num_actions: int,
                 obs_dtype: Any = np.float32):
        # In the env's own dtype: connect four's int8 planes take a quarter of float32's.
        self.obs = np.zeros((capacity, *obs_shape), obs_dtype)
        self.policy = np.zeros((capacity, num_actions), np.float32)
        self.outcome = np.zeros(capacity, np.float32)
        self.size = self.next = 0

    def add(self, obs: np.ndarray, policy: np.ndarray, outcome: np.ndarray) -> None:
        for o, p, z in zip(obs, policy, outcome, strict=True):
            self.obs[self.next], self.policy[self.next], self.outcome[self.next] = o, p, z
            self.next = (self.next + 1) % len(self.obs)
            self.size = min(self.size + 1, len(self.obs))

    def sample(self, n: int, rng: np.random.Generator) -> tuple[torch.Tensor, ...]:
        idx = rng.integers(self.size, size=n)
        return (torch.from_numpy(self.obs[idx]).float(), torch.from_numpy(self.policy[idx]),
                torch.from_numpy(self.outcome[idx]))

    def get_state(self) -> dict[str, Any]:
        n = self.size
        return {"obs": torch.from_numpy(self.obs[:n].copy()),
                "policy": torch.from_numpy(self.policy[:n].copy()),
                "outcome": torch.from_numpy(self.outcome[:n].copy()), "next": self.next}

    def set_state(self, state: dict[str, Any]) -> None:
        n = len(state["outcome"])
        self.obs[:n], self.policy[:n] = state["obs"].numpy(), state["policy"].numpy()
        self.outcome[:n], self.size, self.next = state["outcome"].numpy(), n, int(state["next"])


def mirrored(obs: np.ndarray, policy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions [B, rows, columns, ...] and policies [B, columns] flipped left to right."""
    return obs[:, :, ::-1].copy(), policy[:, ::-1].copy()


class SelfPlay:
    """``num_games`` games, each move chosen by a search from the game's position (the
    searched subtree of the move played is kept for the next one)."""

    def __init__(self, game: Any, observe: Any, cfg: AlphaZeroConfig, rng: np.random.Generator):
        self.game, self.observe, self.cfg, self.rng = game, observe, cfg, rng
        self.roots = [Node(game.new_initial_state()) for _ in range(cfg.num_games)]
        self.records: list[list[tuple[np.ndarray, np.ndarray, int, float]]] = [
            [] for _ in self.roots]

    def move(self, evaluate: Any) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, list]]:
        """One move in every game; each game that ended: its positions, search policies,
        value targets for the player to move (value_target_mix) and returns."""
        cfg = self.cfg
        expand_roots(self.roots, evaluate)
        for root in self.roots:
            add_noise(root, cfg.dirichlet_alpha, cfg.dirichlet_fraction, self.rng)
        search(self.roots, evaluate, cfg.num_simulations, cfg.puct_c)
        observed = self.observe([root.state for root in self.roots])
        ended = []
        for i, root in enumerate(self.roots):
            policy = root.policy()
            explore = root.state.move_number() < cfg.temperature_moves
            action = (int(self.rng.choice(len(policy), p=policy)) if explore
                      else int(policy.argmax()))
            self.records[i].append((observed[i], policy, root.player, root.value()))
            child = root.child(action)
            if not child.state.is_terminal():
                self.roots[i] = child
                continue
            returns = child.state.returns()
            obs, policies, players, searched = zip(*self.records[i], strict=True)
            outcome = np.array([returns[p] for p in players], np.float32)
            mix = cfg.value_target_mix
            target = (1 - mix) * outcome + mix * np.array(searched, np.float32)
            ended.append((np.stack(obs), np.stack(policies), target, returns))
            self.records[i] = []
            self.roots[i] = Node(self.game.new_initial_state())
        return ended


class SelfPlayer:
    """Self-play on its own games with its own copy of the network (or the learner's
    network itself, in process): the same object in the driver and in a Ray actor."""

    def __init__(self, env: Any, env_config: dict[str, Any], config: AlphaZeroConfig,
                 seed: int, model: torch.nn.Module | None = None,
                 rng: np.random.Generator | None = None):
        self.env = make_multiagent_env(env, env_config)
        agent = self.env.possible_agents[0]
        self.model = model or actor_critic(policy_obs_space(self.env.observation_space(agent)),
                                           self.env.action_space(agent), config.model)
        self.games = SelfPlay(search_game(self.env), self.env.observe_states, config,
                              rng or np.random.default_rng(seed))

    def evaluate(self, states: list[Any]) -> tuple[np.ndarray, np.ndarray]:
        device = next(self.model.parameters()).device  # the learner's, in process
        obs = torch.as_tensor(self.env.observe_states(states), dtype=torch.float32)
        with torch.no_grad():
            logits, values = self.model(obs.to(device))
        return logits.cpu().numpy(), values.cpu().numpy()

    def play(self, weights: dict[str, np.ndarray] | None, rounds: int) -> list[tuple]:
        """``rounds`` moves in each game (with ``weights`` loaded first, if given); the
        games that ended (SelfPlay.move)."""
        if weights is not None:
            self.model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
        return [game for _ in range(rounds) for game in self.games.move(self.evaluate)]


class LocalSelfPlayers:
    """One SelfPlayer in the driver, acting with the learner's own network."""

    size = 1

    def __init__(self, player: SelfPlayer):
        self.player = player

    def play(self, weights: dict[str, np.ndarray] | None, rounds: int) -> list[tuple]:
        return self.player.play(weights, rounds)

    def metrics(self) -> dict[str, float]:
        return {}

    def close(self) -> None:
        pass


class AlphaZeroRun:
    """The network, its learner, the replay and the self-players of one run. In process
    the network takes its steps after every move of the games; with num_workers each
    worker plays its share of an iteration's moves with the iteration's first weights,
    then the steps owed for them follow."""

    def __init__(self, start: Start):
        self.start, self.cfg, run = start, start.config, start.run
        self.env = make_multiagent_env(run.env, run.env_config)
        agent = self.env.possible_agents[0]
        self.obs_space = policy_obs_space(self.env.observation_space(agent))
        self.act_space = self.env.action_space(agent)
        search_game(self.env)
        self._check_mirror()
        self.device = learner_device(run.device)
        self.model = actor_critic(self.obs_space, self.act_space, self.cfg.model).to(self.device)
        self.learner = Learner(self.model, self.cfg.lr, self.cfg.grad_clip)
        self.replay = Replay(self.cfg.replay_capacity, self.obs_space.shape,
                             int(self.act_space.n), self.obs_space.dtype)
        self.rng = np.random.default_rng(run.seed)
        self.progress = start.progress()
        if start.ckpt is not None:
            self.learner.set_state(start.ckpt.tensors("learner", "state.pt")["learner"])
            self.replay.set_state(start.ckpt.tensors("replay", "state.pt"))
            self.rng.bit_generator.state = start.algo_state()["rng"]
        self.players, self.ray_start_s = self._players()
        workers = self.cfg.num_workers
        self.rounds = 1 if not workers else max(
            1, -(-self.cfg.moves_per_iteration // (self.cfg.num_games * workers)))

    def _players(self) -> tuple[Any, float]:
        cfg, run = self.cfg, self.start.run
        if not cfg.num_workers:
            player = SelfPlayer(run.env, run.env_config, cfg, run.seed, self.model, self.rng)
            return LocalSelfPlayers(player), 0.0
        from distrl.alphazero.remote import RaySelfPlayers
        from distrl.runtime.cluster import init_ray

        ray_start_s = init_ray(run.address, cfg.num_workers * cfg.num_cpus_per_worker)
        resumed = self.progress.iteration

        def kwargs(index: int, restart: int) -> dict[str, Any]:
            return dict(env=run.env, env_config=run.env_config, config=cfg,
                        seed=seed_for(run.seed, index, restart, resumed))

        return RaySelfPlayers(kwargs, cfg.num_workers, cfg.num_cpus_per_worker, run), ray_start_s

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
            weights = self.learner.weights() if cfg.num_workers else None
            for obs, policy, outcome, result in self.players.play(weights, self.rounds):
                self.replay.add(obs, policy, outcome)
                if cfg.mirror:
                    self.replay.add(*mirrored(obs, policy), outcome)
                returns.append(result[0])
                lengths.append(len(outcome))
            batches = self.rounds * self.players.size  # num_games moves each
            moves += cfg.num_games * batches
            if self.replay.size >= max(cfg.learning_starts, cfg.train_batch_size):
                losses += [self._update() for _ in range(cfg.updates_per_move * batches)]
        metrics = self.progress.add(moves, np.array(returns, np.float32),
                                    np.array(lengths, np.int64))
        metrics["replay/size"] = self.replay.size
        if losses:
            metrics["learner/policy_loss"] = float(np.mean([p for p, _ in losses]))
            metrics["learner/value_loss"] = float(np.mean([v for _, v in losses]))
        every = cfg.eval_interval
        if every and self.progress.iteration % every == 0:
            metrics.update(self.evaluate())
        return {**metrics, **self.players.metrics()}

    def _update(self) -> tuple[float, float]:
        """One step on cross-entropy to the search policies plus squared value error."""
        obs, policy, outcome = (t.to(self.device) for t in
                                self.replay.sample(self.cfg.train_batch_size, self.rng))
        logits, values = self.model(obs)
        policy_loss = -(policy * torch.log_softmax(logits, -1)).sum(-1).mean()
        value_loss = ((values - outcome) ** 2).mean()
        self.learner.step(policy_loss + value_loss, len(outcome))
        return float(policy_loss.detach()), float(value_loss.detach())

    def evaluate(self) -> dict[str, float]:
        """eval_games greedy games of the network (no search) against eval_opponent."""
        run, opponent = self.start.run, self.cfg.eval_opponent
        model = self.model if self.device.type == "cpu" else copy.deepcopy(self.model).cpu()
        policies = {PLAYER: LocalPolicy(model),
                    opponent: outside_policy(opponent, run.env, run.env_config, run.seed,
                                             int(self.act_space.n))}
        results = play_matches(run.env, run.env_config, policies, {PLAYER}, PLAYER, opponent,
                               self.cfg.eval_games, run.seed)
        win, draw, _ = win_draw_loss(results, PLAYER, opponent)
        return {f"eval/win_rate_vs_{opponent}": float(win),
                f"eval/draw_rate_vs_{opponent}": float(draw)}

    def save(self) -> Any:
        weights = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}
        return save_run(self.start, self.progress,
                        policy_files(weights, self.obs_space, self.act_space, self.cfg.model),
                        {"weights": {PLAYER: weights}, "learner": self.learner.get_state()},
                        [], {"rng": self.rng.bit_generator.state},
                        more={"replay": {"state.pt": self.replay.get_state()}})
