"""What plays a seat in a league game: the ActingPolicy protocol, LocalPolicy (a module
with its own weights), and players that are not league policies: the uniformly random
player, hand-written bots (``module:callable``) and OpenSpiel's MCTS
(``mcts:<simulations>``), as ``distrl eval --opponent`` names them (games.opponents
parses the specs; games.players builds saved runs and searching networks).

A bot (``bot = True``) picks legal moves itself: MatchLoop calls ``act(obs, mask, envs)``
with the seats' observations, masks and envs, and it answers with logits that allow only
its choice, so it plays through the same sampling as every policy.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from distrl.games.games import import_extra
from distrl.games.opponents import (
    MCTS_PREFIX,
    RANDOM,
    TRAINING_FORMS,
    load_callable,
    parse_opponent,
)


class ActingPolicy(Protocol):
    """What plays a seat: policy_cache.CachedPolicy, or a LocalPolicy in the learner's
    process. ``__call__(obs, value=...) -> (distribution inputs, values)``; with
    ``value=False`` the values may be zeros (they are not needed). A recurrent one
    (``recurrent`` true) acts through ``step(obs, state, prev_actions, prev_rewards) ->
    (distribution inputs, values, state)`` and ``initial_state(n)`` instead."""

    version: int

    def __call__(self, obs: torch.Tensor, value: bool = True
                 ) -> tuple[torch.Tensor, torch.Tensor]: ...


@dataclass
class LocalPolicy:
    """A module acting with its own weights (in-process learners, evaluation)."""

    module: torch.nn.Module
    version: int = 0
    _arch: tuple | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def recurrent(self) -> bool:
        return getattr(self.module, "recurrent", False)

    @property
    def arch(self) -> tuple:
        """Equal for modules that compute the same function of their weights
        (games.batched stacks those); computed once (a state_dict costs a forward)."""
        if self._arch is None:
            shapes = tuple((n, tuple(t.shape)) for n, t in self.module.state_dict().items())
            self._arch = (type(self.module), getattr(self.module, "activation", None), shapes)
        return self._arch

    @property
    def functional(self) -> torch.nn.Module:
        return self.module

    def layers(self) -> Any:
        return self.module.layers()

    def __call__(self, obs: torch.Tensor, value: bool = True
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.module(obs, value=value)

    def step(self, obs: torch.Tensor, state: Any, prev_actions: torch.Tensor,
             prev_rewards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, Any]:
        return self.module.step(obs, state, prev_actions, prev_rewards)

    def initial_state(self, n: int) -> Any:
        return self.module.initial_state(n)


@dataclass
class RandomPolicy:
    """Uniform over the (legal) actions of a Discrete space; values are 0."""

    n: int
    version: int = 0

    def __call__(self, obs: torch.Tensor, value: bool = True
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.zeros(obs.shape[0], self.n), torch.zeros(obs.shape[0])


def only(chosen: list[int], mask: torch.Tensor | None, name: str
         ) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits that allow only each row's chosen action (and zero values); a ValueError
    naming the bot when a choice is illegal."""
    n = len(chosen)
    width = mask.shape[1] if mask is not None else max(chosen) + 1
    for k, a in enumerate(chosen):
        if not 0 <= a < width or (mask is not None and not mask[k, a]):
            raise ValueError(f"opponent {name!r} chose action {a}, which is not legal "
                             "here; it must return one whose action_mask entry is 1.")
    logits = torch.full((n, width), -1e9)
    logits[torch.arange(n), torch.as_tensor(chosen)] = 0.0
    return logits, torch.zeros(n)


@dataclass
class ScriptedPolicy:
    """A hand-written player: ``act(obs, action_mask) -> action`` for one observation
    (``action_mask`` is None in games without masks), e.g. a heuristic bot."""

    choose: Callable[[np.ndarray, np.ndarray | None], int]
    name: str = "scripted"
    version: int = 0
    bot: bool = True

    def act(self, obs: torch.Tensor, mask: torch.Tensor | None, envs: list[Any] | None = None
            ) -> tuple[torch.Tensor, torch.Tensor]:
        rows = range(obs.shape[0])
        return only([int(self.choose(obs[k].numpy(), None if mask is None else mask[k].numpy()))
                     for k in rows], mask, self.name)


@dataclass
class SearchBot:
    """OpenSpiel's MCTSBot (UCT with c = 2, ``rollouts`` random rollouts per leaf, solved
    states backed up: its defaults) searching ``simulations`` times from each seat's game
    state (the env's ``openspiel_state()``: an OpenSpiel game's own, or a PettingZoo game's
    OpenSpiel twin). Seeded, so an evaluation is repeatable."""

    game: Any  # pyspiel.Game
    simulations: int
    seed: int = 0
    rollouts: int = 1
    version: int = 0
    bot: bool = True
    _bot: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        mcts = import_extra("open_spiel.python.algorithms.mcts", "open_spiel")
        rng = np.random.RandomState(self.seed)
        self._bot = mcts.MCTSBot(self.game, 2.0, self.simulations,
                                 mcts.RandomRolloutEvaluator(self.rollouts, rng),
                                 random_state=rng, solve=True)

    @property
    def name(self) -> str:
        return f"{MCTS_PREFIX}{self.simulations}"

    def act(self, obs: torch.Tensor, mask: torch.Tensor | None, envs: list[Any]
            ) -> tuple[torch.Tensor, torch.Tensor]:
        return only([int(self._bot.step(env.openspiel_state())) for env in envs], mask,
                    self.name)


def outside_players(n: int | None, bots: tuple[str, ...], env: Any, seed: int
                    ) -> dict[str, Any]:
    """The players of a league game that are not league policies, by id: the random
    player (over ``n`` actions; none where the actions are not discrete) and the rules'
    training bots."""
    random = {RANDOM: RandomPolicy(n)} if n is not None else {}
    return {**random, **{spec: make_bot(spec, env, seed) for spec in bots if spec != RANDOM}}


def check_opponent(spec: str) -> str:
    """``spec`` if it names a training opponent from outside a run (random,
    mcts:<simulations> or an importable module:callable), else a one-line ValueError
    (games.opponents parses every spec). Configs call it when they are made, so that a
    typo stops a run before it trains, not at its first evaluation."""
    return parse_opponent(spec, in_eval=False).spec


def make_bot(spec: str, env: Any, seed: int = 0) -> ScriptedPolicy | SearchBot:
    """The bot ``spec`` names for games like ``env``: ``mcts:<simulations>`` (perfect-
    information games with an OpenSpiel state) or ``module:callable``."""
    if parse_opponent(spec, in_eval=False).kind == "mcts":
        return search_bot(spec, env, seed)
    return scripted_policy(spec)


def search_bot(spec: str, env: Any, seed: int) -> SearchBot:
    simulations = parse_opponent(spec, in_eval=False).simulations
    if not hasattr(env, "openspiel_state"):
        raise ValueError(f"opponent {spec!r} searches OpenSpiel states; this game has none "
                         "(openspiel:<game>, or a PettingZoo game with an OpenSpiel twin).")
    state = env.openspiel_state()  # also refuses a PettingZoo game without a twin
    pyspiel = import_extra("pyspiel", "open_spiel")
    game = state.get_game()
    if game.get_type().information != pyspiel.GameType.Information.PERFECT_INFORMATION:
        raise ValueError(f"opponent {spec!r}: {game.get_type().short_name} hides "
                         "information (cards, hands) that MCTS would read from the true "
                         "state; search bots play perfect-information games only.")
    return SearchBot(game, simulations, seed)


def scripted_policy(spec: str) -> ScriptedPolicy:
    """``module:callable`` as a ScriptedPolicy: ``callable(obs, action_mask) -> action``."""
    act = load_callable(spec, TRAINING_FORMS)
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
