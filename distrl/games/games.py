"""Multi-agent games for the league: one protocol, adapters for PettingZoo and OpenSpiel.

The protocol is PettingZoo's *parallel* API: ``possible_agents``, ``agents`` (those still
in the episode), ``observation_space(agent)``, ``action_space(agent)``,
``reset(seed=None, options=None) -> (obs, infos)``,
``step(actions) -> (obs, rewards, terminations, truncations, infos)`` (dicts by agent),
``close()``. What distrl relies on, and the adapters guarantee:

(a) the agents that act next are exactly the keys of the returned ``obs`` (one key in a
    turn-based game);
(b) ``rewards`` may name agents that did not act this step; a reward belongs to that
    agent's most recent action (connect four's loser gets -1 on the winner's move);
(c) the episode is over when the returned ``obs`` is empty or ``agents`` is;
(d) an agent with an action mask observes ``{"observation": array, "action_mask": int8
    array, 1 = legal}`` (PettingZoo classic's convention); ``split_obs`` takes it apart.
(e) optionally, for league learners' state critics (LeagueConfig.state_critic; OpenSpielEnv
    has them): ``critic_state() -> array [players, size]``, the whole state as each player
    sees it (its own information), in ``possible_agents`` order; ``critic_outcomes``, how
    many moves or chance outcomes a node has at most; and ``chance_nodes``, None or a list
    the env appends each chance node it resolves to, as ``(critic_state(), outcome
    probabilities, outcome)``.

Specs: ``pettingzoo:connect_four_v3`` (any PettingZoo family), ``openspiel:kuhn_poker``,
``module:callable`` (a factory of an AEC env, a parallel env or anything with the protocol).
"""

from __future__ import annotations

import bisect
import difflib
import importlib
import itertools
import math
import pkgutil
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from distrl.envs.make import env_config_checked
from distrl.games.twins import TWIN_OBSERVATIONS

GAMES_EXTRA = "pip install 'distrl[games]'"
PETTINGZOO_FAMILIES = ("classic", "butterfly", "sisl", "mpe", "atari")
OPENSPIEL_TWINS = {"connect_four": "connect_four", "tictactoe": "tic_tac_toe"}
"""PettingZoo classic games (name without version) -> the OpenSpiel game with the same
rules and moves: the same first player and action numbers up to a symmetry of the board
(tic-tac-toe's squares are column-major in PettingZoo, row-major in OpenSpiel: a
transpose, under which every line stays a line). tests/unit/test_policies.py plays
random games in both and compares masks and outcomes."""


def split_obs(obs: Any) -> tuple[np.ndarray, np.ndarray | None]:
    """(observation, action mask or None) of one agent's observation."""
    if isinstance(obs, dict) and "action_mask" in obs:
        return np.asarray(obs["observation"]), np.asarray(obs["action_mask"])
    return np.asarray(obs), None


def policy_obs_space(space: gym.Space) -> gym.Space:
    """The space a policy network sees: the "observation" part of a masked Dict space."""
    if isinstance(space, gym.spaces.Dict) and "action_mask" in space.spaces:
        return space["observation"]
    return space


class TurnBased:
    """A PettingZoo AEC env (turn-based: connect four, tic-tac-toe, ...) as the protocol.
    Dead agents are stepped with None, as PettingZoo requires, inside one step."""

    def __init__(self, aec: Any):
        self.aec = aec
        # State is read from the innermost env: every read through PettingZoo's wrappers
        # walks each layer's __getattr__, which cost a third of a connect-four step. Moves
        # still go through the wrappers (illegal-move and order checks); those write the
        # innermost env's state.
        self._raw = getattr(aec, "unwrapped", aec)
        self.possible_agents = list(aec.possible_agents)
        self.metadata = getattr(aec, "metadata", {})
        self.moves: list[int] = []  # this game's moves, to replay in an OpenSpiel twin

    @property
    def agents(self) -> list[str]:
        return list(self._raw.agents)

    def observation_space(self, agent: str) -> gym.Space:
        return self.aec.observation_space(agent)

    def action_space(self, agent: str) -> gym.Space:
        return self.aec.action_space(agent)

    def reset(self, seed: int | None = None, options: dict | None = None
              ) -> tuple[dict[str, Any], dict[str, dict]]:
        self.aec.reset(seed=seed, options=options)
        self.moves = []
        rewards: dict[str, float] = {}
        obs = self._next(rewards)  # skips agents already done at the start (rare)
        return obs, {a: {} for a in obs}

    def step(self, actions: dict[str, Any]) -> tuple:
        raw = self._raw
        mover = raw.agent_selection
        if set(actions) != {mover}:
            raise ValueError(f"it is {mover}'s turn; got actions for {sorted(actions)}. "
                             "A turn-based game takes one action per step, from the agent "
                             "whose observation the last step returned.")
        was_in = list(raw.agents)
        self.aec.step(actions[mover])
        self.moves.append(int(actions[mover]))
        rewards = {a: float(raw.rewards.get(a, 0.0)) for a in was_in}
        # Read before _next steps dead agents out (which deletes their entries).
        terms = {a: bool(raw.terminations.get(a, False)) for a in was_in}
        truncs = {a: bool(raw.truncations.get(a, False)) for a in was_in}
        obs = self._next(rewards)
        return obs, rewards, terms, truncs, {a: {} for a in was_in}

    def _next(self, rewards: dict[str, float]) -> dict[str, Any]:
        """Step dead agents out (collecting their rewards); the next mover's obs."""
        raw = self._raw
        while raw.agents:
            agent = raw.agent_selection
            if not (raw.terminations[agent] or raw.truncations[agent]):
                return {agent: self.aec.observe(agent)}
            self.aec.step(None)
            for a, r in raw.rewards.items():
                rewards[a] = rewards.get(a, 0.0) + float(r)
        return {}

    @property
    def twin(self) -> str:
        """The OpenSpiel game with this game's rules (OPENSPIEL_TWINS); a ValueError for
        a game without one."""
        name = str(self.metadata.get("name", "")).rsplit("_v", 1)[0]
        if name not in OPENSPIEL_TWINS:
            raise ValueError(f"PettingZoo game {name or type(self.aec).__name__!r} has no "
                             f"OpenSpiel twin for search (these have: "
                             f"{', '.join(sorted(OPENSPIEL_TWINS))}); play it against "
                             "random, a policy or a module:callable bot.")
        return OPENSPIEL_TWINS[name]

    def openspiel_state(self) -> Any:
        """This game's position as a state of its OpenSpiel twin, for search bots."""
        pyspiel = import_extra("pyspiel", "open_spiel")
        state = pyspiel.load_game(self.twin).new_initial_state()
        for move in self.moves:
            state.apply_action(move)
        return state

    def observe_states(self, states: list[Any]) -> np.ndarray:
        """What the players to move in the twin's ``states`` would observe here, stacked
        (search evaluates positions that no env reached)."""
        if self.twin not in TWIN_OBSERVATIONS:
            raise ValueError(f"no observation of {self.twin!r} states as PettingZoo's (these "
                             f"have one: {', '.join(sorted(TWIN_OBSERVATIONS))}); train on "
                             f"openspiel:{self.twin} instead.")
        return TWIN_OBSERVATIONS[self.twin](states)

    def close(self) -> None:
        self.aec.close()


class OpenSpielEnv:
    """A sequential OpenSpiel game as the protocol: agents ``player_<i>``, chance nodes
    drawn with the env's own seeded generator, information-state tensors (observation
    tensors when the game has none) with legal-action masks."""

    def __init__(self, game: Any, **params: Any):
        pyspiel = import_extra("pyspiel", "open_spiel")
        if isinstance(game, str) and game not in pyspiel.registered_names():
            close = difflib.get_close_matches(game, pyspiel.registered_names(), n=3)
            hint = f" Did you mean {', '.join(close)}?" if close else ""
            raise ValueError(f"no OpenSpiel game named {game!r}.{hint} "
                             "pyspiel.registered_names() lists them all.")
        try:
            self.game = pyspiel.load_game(game, params) if isinstance(game, str) else game
        except pyspiel.SpielError as err:  # an unknown parameter: it lists the known ones
            raise ValueError(f"env openspiel:{game}: {err}") from None
        kind = self.game.get_type()
        if kind.dynamics != pyspiel.GameType.Dynamics.SEQUENTIAL:
            raise ValueError(f"OpenSpiel game {kind.short_name!r} has simultaneous moves; "
                             "distrl's OpenSpiel adapter plays sequential games only.")
        self.info_state = kind.provides_information_state_tensor
        size = (self.game.information_state_tensor_size() if self.info_state
                else self.game.observation_tensor_size())
        n = self.game.num_distinct_actions()
        self._obs_space = gym.spaces.Dict({
            "observation": gym.spaces.Box(-np.inf, np.inf, (size,), np.float32),
            "action_mask": gym.spaces.Box(0, 1, (n,), np.int8)})
        self._act_space = gym.spaces.Discrete(n)
        self.possible_agents = [f"player_{i}" for i in range(self.game.num_players())]
        self.rng = np.random.default_rng()
        self.state: Any = None
        self.chance_logp = 0.0  # log-probability of the episode's chance outcomes so far
        self.critic_outcomes = max(n, self.game.max_chance_outcomes())
        self.chance_nodes: list | None = None  # a list: record them (LeagueConfig.state_critic)
        # critic_state() of the state it was read from, until that state moves on
        self._critic: tuple[Any, np.ndarray] | None = None

    @property
    def agents(self) -> list[str]:
        return [] if self.state is None or self.state.is_terminal() else self.possible_agents

    def observation_space(self, agent: str) -> gym.Space:
        return self._obs_space

    def action_space(self, agent: str) -> gym.Space:
        return self._act_space

    def reset(self, seed: int | None = None, options: dict | None = None
              ) -> tuple[dict[str, Any], dict[str, dict]]:
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.state = self.game.new_initial_state()
        self._critic = None
        self.chance_logp = 0.0
        self._resolve_chance()
        obs = self._obs()
        return obs, {a: {} for a in obs}

    def step(self, actions: dict[str, Any]) -> tuple:
        mover = self.possible_agents[self.state.current_player()]
        if set(actions) != {mover}:
            raise ValueError(f"it is {mover}'s turn; got actions for {sorted(actions)}.")
        action = int(actions[mover])
        if action not in self.state.legal_actions():
            raise ValueError(f"action {action} is illegal for {mover!r} here; legal: "
                             f"{self.state.legal_actions()} (sample with the action mask).")
        self.state.apply_action(action)
        self._critic = None
        rewards = np.asarray(self.state.rewards(), np.float64)
        rewards += self._resolve_chance()
        done = self.state.is_terminal()
        agents = self.possible_agents
        return (self._obs(), {a: float(r) for a, r in zip(agents, rewards, strict=True)},
                dict.fromkeys(agents, done), dict.fromkeys(agents, False),
                {a: {} for a in agents})

    def _resolve_chance(self) -> np.ndarray:
        """Play chance nodes (deals) with this env's generator; their rewards."""
        rewards = np.zeros(self.game.num_players())
        while self.state.is_chance_node():
            outcomes, probs = zip(*self.state.chance_outcomes(), strict=True)
            # bisect on the running sums: rng.choice(p=...) costs 9x as much a draw
            sums = list(itertools.accumulate(probs))
            k = min(bisect.bisect(sums, self.rng.random() * sums[-1]), len(sums) - 1)
            if self.chance_nodes is not None:
                self._record_chance(outcomes, probs, k)
            self.state.apply_action(int(outcomes[k]))
            self._critic = None
            self.chance_logp += math.log(probs[k])
            rewards += self.state.rewards()
        return rewards

    def _record_chance(self, outcomes: tuple[int, ...], probs: tuple[float, ...], k: int
                       ) -> None:
        dist = np.zeros(self.critic_outcomes, np.float32)
        dist[list(outcomes)] = probs
        self.chance_nodes.append((self.critic_state(), dist, int(outcomes[k])))

    def _obs(self) -> dict[str, Any]:
        if self.state.is_terminal():
            return {}
        player = self.state.current_player()
        if self.chance_nodes is None:
            return {self.possible_agents[player]: observe(self.state, player, self.info_state)}
        # A state critic reads every player's tensor at this node anyway: the mover's
        # observation is its row (one read of each tensor per node, not two of the mover's).
        mask = np.asarray(self.state.legal_actions_mask(player), np.int8)
        return {self.possible_agents[player]: {"observation": self.critic_state()[player],
                                               "action_mask": mask}}

    def openspiel_state(self) -> Any:
        """A copy of the game's state (for search bots)."""
        return self.state.clone()

    def critic_state(self) -> np.ndarray:
        """The whole state, for a critic (LeagueConfig.state_critic): every player's
        information-state tensor (observation tensor) in player order, [players, size];
        zeros once the game is over. A seat's critic reads it from its own row on
        (games.seats), so it is read once per node, not once per seat; and kept until
        the next move or outcome (the mover's observation already read it)."""
        if self._critic is None or self._critic[0] is not self.state:
            n, size = self.game.num_players(), self._obs_space["observation"].shape[0]
            if self.state is None or self.state.is_terminal():
                return np.zeros((n, size), np.float32)
            get = (self.state.information_state_tensor if self.info_state
                   else self.state.observation_tensor)
            self._critic = (self.state, np.array([get(p) for p in range(n)], np.float32))
        return self._critic[1]

    def observe_states(self, states: list[Any]) -> np.ndarray:
        """The observations of the players to move in ``states``, as this env gives them."""
        return np.stack([observe(s, s.current_player(), self.info_state)["observation"]
                         for s in states])

    def close(self) -> None:
        self.state = self._critic = None


def observe(state: Any, player: int, info_state: bool = True) -> dict[str, np.ndarray]:
    """One OpenSpiel player's masked observation (also what NashConv's policy sees)."""
    tensor = (state.information_state_tensor(player) if info_state
              else state.observation_tensor(player))
    return {"observation": np.asarray(tensor, np.float32),
            "action_mask": np.asarray(state.legal_actions_mask(player), np.int8)}


def make_multiagent_env(spec: str | Callable[..., Any], env_config: dict | None = None
                        ) -> Any:
    """An env with the protocol from ``pettingzoo:<name>``, ``openspiel:<game>``,
    ``module:callable`` or a callable."""
    cfg = dict(env_config or {})
    with env_config_checked(spec, cfg):
        return _make_multiagent_env(spec, cfg)


def _make_multiagent_env(spec: str | Callable[..., Any], cfg: dict) -> Any:
    if callable(spec):
        return wrap(spec(**cfg))
    prefix, _, name = spec.partition(":")
    if not name:
        raise ValueError(f"multi-agent env {spec!r}: a league plays a multi-agent game; pass "
                         "--env pettingzoo:<name> (e.g. pettingzoo:connect_four_v3), "
                         "openspiel:<game> (e.g. openspiel:kuhn_poker) or module:callable.")
    if prefix == "pettingzoo":
        return _pettingzoo(name, cfg)
    if prefix == "openspiel":
        return OpenSpielEnv(name, **cfg)
    try:
        factory = getattr(importlib.import_module(prefix), name)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"multi-agent env {spec!r}: {err}. Give module:callable with the "
                         "module importable here (and on every Ray node).") from None
    return wrap(factory(**cfg))


def wrap(env: Any) -> Any:
    """AEC envs become TurnBased; parallel envs (the protocol) stay as they are."""
    try:
        from pettingzoo import AECEnv
    except ImportError:
        AECEnv = ()  # without PettingZoo nothing is an AEC env
    if isinstance(env, AECEnv):
        return TurnBased(env)
    missing = [m for m in ("possible_agents", "reset", "step", "action_space") if
               not hasattr(env, m)]
    if missing:
        raise ValueError(f"{type(env).__name__} is neither a PettingZoo AEC/parallel env nor "
                         f"has the multi-agent protocol (missing {missing}); see "
                         "distrl.games.games.")
    return env


def _pettingzoo(name: str, cfg: dict) -> Any:
    import_extra("pettingzoo", "pettingzoo")
    known = []
    for family in PETTINGZOO_FAMILIES:
        try:
            fam = importlib.import_module(f"pettingzoo.{family}")
        except Exception:  # a family whose own dependencies are missing
            continue
        # Submodules, not dir(fam): a family imports its games lazily.
        known += [m.name for m in pkgutil.iter_modules(getattr(fam, "__path__", []))
                  if m.name.endswith(tuple(f"_v{i}" for i in range(10)))]
        try:  # old versions (connect_four_v2) are attributes that fail to import
            module = importlib.import_module(f"pettingzoo.{family}.{name}")
        except ImportError:
            continue
        return TurnBased(module.env(**cfg))
    close = difflib.get_close_matches(name, known, n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise ValueError(f"no PettingZoo env named {name!r}.{hint}")


def import_extra(module: str, package: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ValueError(f"{package} is not installed: {GAMES_EXTRA} ({err})") from None
