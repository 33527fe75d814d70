"""Exact NashConv of distrl policies on OpenSpiel games, and of a policy's average.

A policy is judged as a table: its action probabilities at every information state of
the game (OpenSpiel's TabularPolicy), from one batched forward over all of them, then
OpenSpiel's exact exploitability (NashConv: what best responses gain, summed over the
players, when every player plays the table), by its C++ best responders, built once per
game and given each new table (7x faster than its Python nash_conv on Leduc, which a
league evaluates every few iterations).

Self-play iterates hover or cycle around an equilibrium; their average lies closer to
it (the time average of no-regret play converges, which is why CFR reports its average
policy). ``AveragePolicy`` is the average of a player's last ``window`` tables as a
behaviour policy: playing one of them, picked uniformly per game, does at information
state s what the reach-weighted mean does, sum_k r_k(s) pi_k(.|s) / sum_k r_k(s), where
r_k(s) is the product of pi_k's own action probabilities on the way to s (Kuhn's
theorem, perfect recall). A plain mean of the tables would be another, wrong policy.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from distrl.games.games import import_extra, observe

MAX_STATES = 100_000
"""Default bound on a game's tree for exact NashConv (tree_size): Kuhn poker's has 58
histories and Leduc's 9,457; tic-tac-toe's 549,946 took 38 s and 2.1 GB to tabulate, and
connect four's never ends."""

Probs = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""(observations [B, ...], masks [B, A]) -> action probabilities [B, A] (0 where illegal)."""


@functools.lru_cache(maxsize=8)
def _best_responders(name: str) -> tuple[list[Any], list[tuple[str, list[int]]]]:
    """The game's C++ best responders (one per player), and each TabularPolicy row's
    information state and legal actions (the policy a responder is given)."""
    pyspiel = import_extra("pyspiel", "open_spiel")
    game = pyspiel.load_game(name)
    rows = [(s.information_state_string(), s.legal_actions()) for s in _tabular(name)[0].states]
    uniform = {key: [(a, 1.0 / len(legal)) for a in legal] for key, legal in rows}
    return [pyspiel.TabularBestResponse(game, p, uniform)
            for p in range(game.num_players())], rows


@functools.lru_cache(maxsize=8)
def _tabular(name: str) -> tuple[Any, np.ndarray, np.ndarray]:
    """The game's TabularPolicy and what its players observe at each of its information
    states (observations, action masks), built once per game: each walks the game's
    whole tree, and a league evaluates every few iterations (the game by its string,
    parameters included)."""
    policy_lib = import_extra("open_spiel.python.policy", "open_spiel")
    pyspiel = import_extra("pyspiel", "open_spiel")
    game = pyspiel.load_game(name)
    tabular = policy_lib.TabularPolicy(game)
    info_state = game.get_type().provides_information_state_tensor
    seen = [observe(s, s.current_player(), info_state) for s in tabular.states]
    return (tabular, np.stack([o["observation"] for o in seen]),
            np.stack([o["action_mask"] for o in seen]))


def tree_size(game: Any, limit: int) -> int:
    """The histories of ``game``'s tree (chance and terminal ones included), or limit + 1
    once there are more: what tabulating and the best responders walk, counted first by
    a walk that stops at the bound (10^5 histories of connect four in a quarter second)."""
    count, stack = 0, [game.new_initial_state()]
    while stack and count <= limit:
        state = stack.pop()
        count += 1
        if not state.is_terminal():
            stack.extend(state.child(a) for a in state.legal_actions())
    return count


def tabulate(game: Any, probs: Probs) -> np.ndarray:
    """[information states, actions]: ``probs`` at every information state of ``game``,
    rows in OpenSpiel's TabularPolicy order, in one call."""
    _, obs, masks = _tabular(str(game))
    return np.asarray(probs(obs, masks), np.float64)


def table_nash_conv(game: Any, table: np.ndarray) -> float:
    """OpenSpiel's exact NashConv when every player plays ``table``: each player's best
    response value, less what the table itself earns them."""
    pyspiel = import_extra("pyspiel", "open_spiel")
    responders, rows = _best_responders(str(game))
    table = np.asarray(table, np.float64)
    policy = {key: list(zip(legal, table[k, legal].tolist(), strict=True))
              for k, (key, legal) in enumerate(rows)}
    root = game.new_initial_state()
    best = 0.0
    for responder in responders:
        responder.set_policy(policy)
        best += responder.value(root.history_str())
    own = pyspiel.expected_returns(root, pyspiel.TabularPolicy(policy), -1, True)
    return float(best - sum(own))


def nash_conv(game: Any, probs: Probs) -> float:
    """OpenSpiel's exact NashConv of the joint policy every player plays with ``probs``."""
    return table_nash_conv(game, tabulate(game, probs))


class AveragePolicy:
    """The reach-weighted average of the last ``window`` tables added (module doc)."""

    def __init__(self, game: Any, window: int):
        if window < 1:
            raise ValueError(f"an average over {window} policies is empty; window >= 1.")
        policy_lib = import_extra("open_spiel.python.policy", "open_spiel")
        self.game = game
        self.parts: deque[tuple[np.ndarray, np.ndarray]] = deque(maxlen=window)
        self.last: np.ndarray | None = None
        tabular = policy_lib.TabularPolicy(game)
        paths = [_own_path(game, tabular.state_lookup, s) for s in tabular.states]
        n, length = len(paths), max(map(len, paths), default=0) or 1
        # (row, action) of each own decision on the way to each information state; padding
        # points at an extra row of ones, so a reach is one gather and a product.
        self.path_rows = np.full((n, length), n)
        self.path_actions = np.zeros((n, length), np.int64)
        for i, path in enumerate(paths):
            for j, (row, action) in enumerate(path):
                self.path_rows[i, j], self.path_actions[i, j] = row, action

    def add(self, table: np.ndarray) -> None:
        """One more iterate (a ``tabulate`` table); the oldest leaves a full window."""
        padded = np.vstack([table, np.ones((1, table.shape[1]))])
        reach = padded[self.path_rows, self.path_actions].prod(axis=1)
        self.parts.append((table * reach[:, None], reach))
        self.last = table

    def table(self) -> np.ndarray:
        """The average's table; an information state no iterate reaches keeps the last
        iterate's row (its player never gets there, so it changes no payoff)."""
        if self.last is None:
            raise ValueError("no policy added to the average yet.")
        weighted = sum(p for p, _ in self.parts)
        reach = sum(r for _, r in self.parts)[:, None]
        return np.where(reach > 0, weighted / np.maximum(reach, 1e-300), self.last)

    def nash_conv(self) -> float:
        return table_nash_conv(self.game, self.table())


def _own_path(game: Any, lookup: dict[str, int], state: Any) -> list[tuple[int, int]]:
    """The (table row, action) of each decision of ``state``'s player before it, replayed
    from the root along its history."""
    player, replay, path = state.current_player(), game.new_initial_state(), []
    for action in state.history():
        if replay.current_player() == player:
            path.append((lookup[replay.information_state_string(player)], action))
        replay.apply_action(action)
    return path
