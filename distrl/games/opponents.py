"""Opponent specs, parsed once, where a config or a command line is made: a typo is one
line before anything loads or trains.

Forms: ``random``; ``mcts:<simulations>`` (OpenSpiel's MCTS); ``module:callable`` (a
bot ``callable(obs, action_mask) -> action``); ``run:PATH`` (a saved league or AlphaZero
run, its main agent by default), optionally ``run:PATH@policy=ID`` (another of its
policies) and ``run:PATH@search=N`` (its network inside PUCT with N simulations a move);
and, in ``distrl eval``, a bare policy id of the judged run (``main_1``). The spec as given
is the player's id in games and in metrics.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

RANDOM = "random"
"""Policy id of the built-in uniformly random player (over legal actions)."""
MCTS_PREFIX = "mcts:"
RUN_PREFIX = "run:"
RUN_OPTIONS = ("search", "policy")
EVAL_FORMS = ("random, a policy id of the run (e.g. main_1), mcts:<simulations>, "
              "run:PATH[@search=N][@policy=ID] or module:callable")
TRAINING_FORMS = "random, mcts:<simulations> (e.g. mcts:200) or module:callable"
POLICY_ID = re.compile(r"[A-Za-z0-9_.@\-]+")

Kind = Literal["random", "mcts", "module", "run", "policy"]


@dataclass(frozen=True)
class Opponent:
    """A parsed opponent spec."""

    spec: str
    """The spec as given: the player's id in games and in metrics."""
    kind: Kind
    """random, mcts (OpenSpiel's MCTS), module (a bot), run (a saved run), policy (a
    policy id of the judged run)."""
    simulations: int = 0
    """mcts: the MCTS simulations per move."""
    path: str | None = None
    """run: the saved run's logdir or checkpoint directory."""
    policy: str | None = None
    """run: the policy id to play (None: its main agent); policy: the id."""
    search: int = 0
    """run: PUCT simulations per move with its network (0: the network alone, greedy)."""


def parse_opponent(spec: str, in_eval: bool = True) -> Opponent:
    """``spec`` as an Opponent, or a one-line ValueError naming the forms accepted.
    ``in_eval``: also saved runs and the judged run's policy ids (``distrl eval``);
    training opponents (bots) are random, mcts:<n> and module:callable only."""
    forms = EVAL_FORMS if in_eval else TRAINING_FORMS
    if spec == RANDOM:
        return Opponent(spec, "random")
    if spec.startswith(MCTS_PREFIX):
        count = spec[len(MCTS_PREFIX):]
        if not count.isdigit() or int(count) < 1:
            raise ValueError(f"opponent {spec!r}: give mcts:<simulations>, e.g. mcts:200.")
        return Opponent(spec, "mcts", simulations=int(count))
    if spec.startswith(RUN_PREFIX):
        if not in_eval:
            raise ValueError(f"opponent {spec!r}: saved runs play in `distrl eval` and "
                             f"`distrl play`; training opponents are {forms}.")
        return _run(spec)
    if ":" not in spec:
        if in_eval and POLICY_ID.fullmatch(spec):
            return Opponent(spec, "policy", policy=spec)
        raise ValueError(f"opponent {spec!r}: give {forms}.")
    load_callable(spec, forms)  # imports it: a wrong module or name is refused here
    return Opponent(spec, "module")


def _run(spec: str) -> Opponent:
    """run:PATH[@search=N][@policy=ID], options in any order, each at most once."""
    rest, options = spec[len(RUN_PREFIX):], {}
    while "@" in rest:
        head, _, tail = rest.rpartition("@")
        key, eq, value = tail.partition("=")
        if not eq:
            break  # an @ of the path itself
        if key not in RUN_OPTIONS or key in options or not value:
            raise ValueError(f"opponent {spec!r}: give run:PATH, run:PATH@search=N, "
                             "run:PATH@policy=ID or both options once each.")
        options[key], rest = value, head
    search = options.get("search", "0")
    if not search.isdigit() or (int(search) < 1 and "search" in options):
        raise ValueError(f"opponent {spec!r}: @search=N takes N >= 1 simulations a move.")
    if not rest or not Path(rest).exists():
        raise ValueError(f"opponent {spec!r}: no saved run at {rest!r}; give "
                         "run:PATH with PATH a run's logdir or its checkpoint/ directory.")
    return Opponent(spec, "run", path=rest, policy=options.get("policy"), search=int(search))


def load_callable(spec: str, forms: str = EVAL_FORMS) -> Any:
    """The callable ``module:callable`` names, or a one-line ValueError."""
    module_name, name = spec.split(":", 1)
    try:
        return getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError, ValueError) as err:
        raise ValueError(f"opponent {spec!r}: {err}. Give {forms}; a module:callable "
                         "is callable(obs, action_mask) -> action, importable here.") from None
