"""The self-play role of AlphaZero: games whose every move a PUCT search chooses
(games.search), played by a SelfPlayer with its own network; the same object in the
driver (LocalSelfPlayers) and in a Ray actor (alphazero.remote). The twin of
ppo/env_runner.py: it produces the data, the driver's learner consumes it."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from distrl.alphazero.config import AlphaZeroConfig
from distrl.games.games import make_multiagent_env, policy_obs_space
from distrl.games.search import Trees, search_game
from distrl.models.recurrent import actor_critic

PROBE_MOVES = 1_000
"""Moves of random games that check_turn_visible plays (about 0.1 s for connect four)."""


def check_turn_visible(game: Any, observe: Any, moves: int = PROBE_MOVES) -> None:
    """A ValueError where the network may not see whose turn it is: its value head
    predicts the outcome for the player to move, so positions that look alike to it with
    different players to move get targets of opposite sign. Seeded random games
    (``moves`` in all) look for two positions that the network sees alike with different
    players to move, or for a player moving twice in a row (checkers' multi-jumps): then
    the count of moves played no longer says whose turn it is. Either refuses the game
    unless its observation shows the mover: a view that differs between the seats
    (OpenSpiel's tensors of the two players), or an entry that tells the players to move
    apart in every probed position (chess's and go's to-play plane). A probe, not a
    proof (docs/alphazero.md)."""
    rng, views, movers, found, relative = np.random.default_rng(0), [], [], None, False
    state, last = game.new_initial_state(), None
    for _ in range(moves):
        if state.is_terminal():
            state, last = game.new_initial_state(), None
        player = state.current_player()
        relative = relative or _seat_view(state, 0) != _seat_view(state, 1)
        if found is None and player == last:
            found = f"player {player} moving twice in a row (move {state.move_number()})"
        views.append(observe([state])[0])
        movers.append(last := player)
        state.apply_action(int(rng.choice(state.legal_actions())))
    obs, players = np.stack(views).reshape(len(views), -1), np.array(movers)
    found = found or _lookalike(obs, players)
    if found and not relative and not _marks_mover(obs, players):
        name = game.get_type().short_name
        raise ValueError(f"AlphaZero needs to see whose turn it is, but {name!r} observes the "
                         f"board alike from both seats, marks no player to move, and random "
                         f"games found {found}: its value targets would contradict each "
                         "other. Train a game whose observation shows the player to move "
                         "(docs/alphazero.md).")


def _seat_view(state: Any, player: int) -> list[float]:
    kind = state.get_game().get_type()  # the tensor OpenSpielEnv observes
    return (state.information_state_tensor(player) if kind.provides_information_state_tensor
            else state.observation_tensor(player))


def _lookalike(obs: np.ndarray, players: np.ndarray) -> str | None:
    seen: dict[bytes, int] = {}
    for row, player in zip(obs, players.tolist(), strict=True):
        other = seen.setdefault(row.tobytes(), player)
        if other != player:
            return f"one observation with player {other} and with player {player} to move"
    return None


def _marks_mover(obs: np.ndarray, players: np.ndarray) -> bool:
    """Whether an entry holds one value whenever player 0 is to move and another
    whenever player 1 is (a to-play plane)."""
    a, b = obs[players == 0], obs[players == 1]
    if not (len(a) and len(b)):
        return False
    fixed = (a.min(0) == a.max(0)) & (b.min(0) == b.max(0)) & (a[0] != b[0])
    return bool(fixed.any())


class Replay:
    """The newest ``capacity`` positions: observation, search policy, value target for
    the player to move (``outcome``: the game's, mixed with the search's by
    value_target_mix), as a ring of numpy arrays. With ``average`` a sampled position's
    targets are the means over every row of the ring that holds the same observation
    (PositionMeans)."""

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], num_actions: int,
                 obs_dtype: Any = np.float32, average: bool = False):
        # In the env's own dtype: connect four's int8 planes take a quarter of float32's.
        self.obs = np.zeros((capacity, *obs_shape), obs_dtype)
        self.policy = np.zeros((capacity, num_actions), np.float32)
        self.outcome = np.zeros(capacity, np.float32)
        self.size = self.next = 0
        self.means = PositionMeans(capacity, num_actions) if average else None

    def add(self, obs: np.ndarray, policy: np.ndarray, outcome: np.ndarray) -> None:
        for o, p, z in zip(obs, policy, outcome, strict=True):
            row = self.next
            if self.means is not None and self.size == len(self.obs):  # the oldest leaves
                self.means.leave(row, self.obs[row].tobytes(), self.policy[row],
                                 self.outcome[row])
            self.obs[row], self.policy[row], self.outcome[row] = o, p, z
            if self.means is not None:
                self.means.enter(row, self.obs[row].tobytes(), self.policy[row],
                                 self.outcome[row])
            self.next = (row + 1) % len(self.obs)
            self.size = min(self.size + 1, len(self.obs))

    def sample(self, n: int, rng: np.random.Generator) -> tuple[torch.Tensor, ...]:
        idx = rng.integers(self.size, size=n)
        if self.means is None:
            policy, outcome = self.policy[idx], self.outcome[idx]
        else:
            policy, outcome = self.means.of(idx)
        return (torch.from_numpy(self.obs[idx]).float(), torch.from_numpy(policy),
                torch.from_numpy(outcome))

    def get_state(self) -> dict[str, Any]:
        n = self.size
        state = {"obs": torch.from_numpy(self.obs[:n].copy()),
                 "policy": torch.from_numpy(self.policy[:n].copy()),
                 "outcome": torch.from_numpy(self.outcome[:n].copy()), "next": self.next}
        if self.means is not None:
            state["means"] = self.means.get_state(n)
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        """The saved positions; the newest ``capacity`` of them where a resume changed the
        capacity. The ring keeps its layout where it fits (the same draws follow)."""
        n, start, capacity = len(state["outcome"]), int(state["next"]), len(self.obs)
        order = np.arange(n)
        if start < n:  # a full ring: its oldest row is at ``next``
            order = order if n == capacity else np.roll(order, -start)
        order = order[-capacity:]
        for mine, saved in ((self.obs, "obs"), (self.policy, "policy"),
                            (self.outcome, "outcome")):
            mine[:len(order)] = state[saved].numpy()[order]
        self.size = len(order)
        self.next = start if start < n and n == capacity else self.size % capacity
        if self.means is not None:
            self._set_means(state.get("means"))

    def _set_means(self, saved: dict[str, Any] | None) -> None:
        """The saved sums where the ring kept its capacity (a resume draws the very same
        targets); else the means of the rows now held, summed again."""
        self.means = PositionMeans(len(self.obs), self.policy.shape[1])
        keys = [row.tobytes() for row in self.obs[:self.size]]
        if saved is not None and len(saved["count"]) == len(self.obs):
            self.means.set_state(saved, keys)
            return
        for row in range(self.size):
            self.means.enter(row, keys[row], self.policy[row], self.outcome[row])


class PositionMeans:
    """Each distinct observation's mean search policy and value target over the replay's
    rows that hold it (AlphaZero.jl's position averaging). An opening met in thousands of
    games is learnt towards the mean of their outcomes, not towards each one's; sampling
    stays uniform over rows, so a position counts as often as it was played. Running
    float64 sums per position, kept in ``capacity`` slots as rows enter and leave the
    ring: a sample costs one gather, not a search of the ring."""

    def __init__(self, capacity: int, num_actions: int):
        self.row_slot = np.zeros(capacity, np.int64)  # ring row -> its position's slot
        self.policy_sum = np.zeros((capacity, num_actions))
        self.outcome_sum = np.zeros(capacity)
        self.count = np.zeros(capacity, np.int64)
        self.slots: dict[bytes, int] = {}  # observation bytes -> slot
        self.free = list(range(capacity))[::-1]

    def enter(self, row: int, key: bytes, policy: np.ndarray, outcome: float) -> None:
        slot = self.slots.get(key)
        if slot is None:
            slot = self.slots[key] = self.free.pop()
        self.policy_sum[slot] += policy
        self.outcome_sum[slot] += outcome
        self.count[slot] += 1
        self.row_slot[row] = slot

    def leave(self, row: int, key: bytes, policy: np.ndarray, outcome: float) -> None:
        slot = self.row_slot[row]
        self.count[slot] -= 1
        if self.count[slot]:
            self.policy_sum[slot] -= policy
            self.outcome_sum[slot] -= outcome
        else:  # zeroed, not subtracted: a slot taken again starts from exact zeros
            del self.slots[key]
            self.free.append(int(slot))
            self.policy_sum[slot], self.outcome_sum[slot] = 0.0, 0.0

    def of(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The mean policy [n, A] and value target [n] of the positions in ``rows``."""
        slot = self.row_slot[rows]
        count = self.count[slot]
        return ((self.policy_sum[slot] / count[:, None]).astype(np.float32),
                (self.outcome_sum[slot] / count).astype(np.float32))

    def get_state(self, size: int) -> dict[str, torch.Tensor]:
        return {"row_slot": torch.from_numpy(self.row_slot[:size].copy()),
                "policy_sum": torch.from_numpy(self.policy_sum.copy()),
                "outcome_sum": torch.from_numpy(self.outcome_sum.copy()),
                "count": torch.from_numpy(self.count.copy())}

    def set_state(self, state: dict[str, torch.Tensor], keys: list[bytes]) -> None:
        """The saved sums; ``keys``: the observation bytes of the rows held (the ring's
        layout as saved)."""
        self.row_slot[:len(keys)] = state["row_slot"].numpy()
        for mine, saved in ((self.policy_sum, "policy_sum"), (self.outcome_sum, "outcome_sum"),
                            (self.count, "count")):
            mine[:] = state[saved].numpy()
        self.slots = {key: int(self.row_slot[row]) for row, key in enumerate(keys)}
        self.free = [int(s) for s in np.flatnonzero(self.count == 0)[::-1]]


def mirrored(obs: np.ndarray, policy: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions [B, rows, columns, ...] and policies [B, columns] flipped left to right."""
    return obs[:, :, ::-1].copy(), policy[:, ::-1].copy()


class SelfPlay:
    """``num_games`` games, each move chosen by a search from the game's position (the
    searched subtree of the move played is kept for the next one), after the random
    moves cfg.random_openings asks for."""

    def __init__(self, game: Any, observe: Any, cfg: AlphaZeroConfig, rng: np.random.Generator):
        self.game, self.observe, self.cfg, self.rng = game, observe, cfg, rng
        self.trees = Trees([self.new_game() for _ in range(cfg.num_games)])
        self.records: list[list[tuple[np.ndarray, np.ndarray, int, float]]] = [
            [] for _ in range(cfg.num_games)]

    def positions(self) -> list[Any]:
        """Each game's position, to be moved from."""
        return [self.trees.state(g) for g in range(self.trees.rows)]

    def move(self, evaluate: Any) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, list]]:
        """One move in every game; each game that ended: its positions, search policies,
        value targets for the player to move (value_target_mix) and returns."""
        cfg, trees = self.cfg, self.trees
        trees.expand_roots(evaluate)
        trees.add_noise(cfg.dirichlet_alpha, cfg.dirichlet_fraction, self.rng)
        trees.search(evaluate, cfg.num_simulations, cfg.puct_c)
        observed = self.observe(self.positions())
        ended = []
        for g in range(trees.rows):
            policy, state = trees.policy(g), trees.state(g)
            explore = state.move_number() < cfg.temperature_moves
            action = (int(self.rng.choice(len(policy), p=policy)) if explore
                      else int(policy.argmax()))
            self.records[g].append((observed[g], policy, trees.player(g), trees.value(g)))
            trees.advance(g, action)
            if not trees.state(g).is_terminal():
                continue
            returns = trees.state(g).returns()
            obs, policies, players, searched = zip(*self.records[g], strict=True)
            outcome = np.array([returns[p] for p in players], np.float32)
            mix = cfg.value_target_mix
            target = (1 - mix) * outcome + mix * np.array(searched, np.float32)
            ended.append((np.stack(obs), np.stack(policies), target, returns))
            self.records[g] = []
            trees.replant(g, self.new_game())
        return ended

    def new_game(self) -> Any:
        """A game's first position to search: the initial state after k random legal
        moves, k uniform in 0..random_openings (an opening that ends the game is drawn
        again)."""
        most = self.cfg.random_openings
        while True:
            state = self.game.new_initial_state()
            # No draw at all without openings: the default's games stay as they were.
            for _ in range(self.rng.integers(most + 1) if most else 0):
                if state.is_terminal():
                    break
                state.apply_action(int(self.rng.choice(state.legal_actions())))
            if not state.is_terminal():
                return state


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
