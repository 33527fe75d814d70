"""PUCT search (AlphaZero: Silver et al. 2018, Science 362:1140) over OpenSpiel states of
a two-player zero-sum game with perfect information and no chance: a network's move
priors and values guide the simulations instead of random rollouts. AlphaZero's
self-play searches with it, and so does any game run's network at play time
(games.players: ``distrl eval --search``, ``distrl play``).

Pure maths and OpenSpiel states, no torch: ``evaluate(states) -> (logits [B, A], values
[B])`` is the network, each value in [-1, 1] for the player to move in its state. The
simulations of many games run side by side so that their leaves are evaluated in one
batch (the tuned connect-four network on one CPU thread: 3.6 ms for 128 positions, 0.46
ms for one).

Each edge (node, action) keeps its visit count and the sum of the values backed up
through it, both from the view of the player to move at ``node``; a leaf's value turns
sign on the way up wherever the player to move differs from the leaf's.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from distrl.games.games import import_extra

Evaluate = Callable[[list[Any]], tuple[np.ndarray, np.ndarray]]


class Node:
    """One position: its state, the player to move and, once expanded, its edges.

    Edges are compact: entry i of each edge list belongs to the legal move ``legal[i]``
    (only the legal moves, so the search's loops skip no illegal ones). They are Python
    lists, not numpy arrays: with a handful of moves a numpy call costs more than the
    loop it replaces, and a simulation makes a dozen. ``prior``, ``visits``,
    ``value_sum`` and ``children`` give them by action, for readers."""

    __slots__ = ("edge_child", "edge_mean", "edge_prior", "edge_sum", "edge_visits",
                 "legal", "num_actions", "player", "state", "total")

    def __init__(self, state: Any):
        self.state = state
        self.player = state.current_player()
        self.legal: list[int] | None = None

    @property
    def expanded(self) -> bool:
        return self.legal is not None

    def expand(self, probs: list[float]) -> None:
        """Priors: the network's move probabilities renormalised over the legal moves."""
        self.legal = legal = self.state.legal_actions()
        prior = [probs[a] for a in legal]
        mass = sum(prior)
        self.edge_prior = ([p / mass for p in prior] if mass > 0
                           else [1 / len(legal)] * len(legal))
        self.edge_visits = [0] * len(legal)
        self.edge_sum = [0.0] * len(legal)
        # edge_sum / edge_visits (0 unvisited), kept by the backup for speed: the
        # choice of move, which reads every edge, then divides nothing.
        self.edge_mean = [0.0] * len(legal)
        self.edge_child: list[Node | None] = [None] * len(legal)
        self.num_actions = len(probs)
        self.total = 0

    def child(self, action: int) -> Node:
        """The position after ``action``, a legal move of this expanded node."""
        i = self.legal.index(action)
        node = self.edge_child[i]
        if node is None:
            node = self.edge_child[i] = Node(self.state.child(action))
        return node

    def value(self) -> float:
        """The searched value for the player to move: the mean of all values backed up
        through the node's edges (0 before any)."""
        return sum(self.edge_sum) / self.total if self.expanded and self.total else 0.0

    def policy(self) -> np.ndarray:
        """The root's visit distribution: the search's improved policy."""
        visits = np.asarray(self.visits, np.float64)
        return visits / visits.sum()

    @property
    def prior(self) -> list[float] | None:
        return self._by_action(self.edge_prior, 0.0) if self.expanded else None

    @property
    def visits(self) -> list[int]:
        return self._by_action(self.edge_visits, 0)

    @property
    def value_sum(self) -> list[float]:
        return self._by_action(self.edge_sum, 0.0)

    @property
    def children(self) -> dict[int, Node]:
        if not self.expanded:
            return {}
        return {a: c for a, c in zip(self.legal, self.edge_child, strict=True) if c is not None}

    def _by_action(self, edges: list, zero: float) -> list:
        full = [zero] * self.num_actions
        for a, x in zip(self.legal, edges, strict=True):
            full[a] = x
        return full


def softmax(logits: np.ndarray) -> list[list[float]]:
    """Rows of move probabilities, as lists (what Node.expand reads)."""
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    return (p / p.sum(axis=1, keepdims=True)).tolist()


def add_noise(root: Node, alpha: float, fraction: float, rng: np.random.Generator) -> None:
    """Mix Dirichlet(alpha) noise into an expanded root's legal priors, so self-play
    tries moves the network rates low."""
    noise = rng.dirichlet([alpha] * len(root.legal))
    root.edge_prior = [(1 - fraction) * p + fraction * eta
                       for p, eta in zip(root.edge_prior, noise.tolist(), strict=True)]


def expand_roots(roots: list[Node], evaluate: Evaluate) -> None:
    """Expand the roots not expanded yet, in one batch."""
    fresh = [r for r in roots if not r.expanded]
    if fresh:
        logits, _ = evaluate([r.state for r in fresh])
        for root, row in zip(fresh, softmax(logits), strict=True):
            root.expand(row)


def search(roots: list[Node], evaluate: Evaluate, simulations: int, c: float) -> None:
    """``simulations`` simulations from each (expanded, non-terminal) root; each round
    walks every root's tree to a leaf and evaluates the new leaves in one batch.

    Python's cyclic garbage collector pauses meanwhile, for speed: it would rescan the
    growing trees every few hundred new nodes (a fifth of the search's time in
    self-play). The trees hold no reference cycles: reference counting frees them."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        _simulate(roots, evaluate, simulations, c)
    finally:
        if enabled:
            gc.enable()


def _simulate(roots: list[Node], evaluate: Evaluate, simulations: int, c: float) -> None:
    for _ in range(simulations):
        walks = [_descend(root, c) for root in roots]
        leaves = [leaf for _, leaf, _ in walks if leaf is not None]
        if leaves:
            logits, values = evaluate([leaf.state for leaf in leaves])
            probs, values = softmax(logits), values.tolist()
        k = 0
        for path, leaf, returns in walks:
            if leaf is None:
                _backup(path, returns)
                continue
            leaf.expand(probs[k])
            value = min(max(values[k], -1.0), 1.0)
            k += 1
            # The leaf's value by player (two): its mover's value, and minus it.
            _backup(path, (value, -value) if leaf.player == 0 else (-value, value))


def _descend(root: Node, c: float) -> tuple[list[tuple[Node, int]], Node | None, Any]:
    """The path (node, edge index) from ``root`` to a new leaf (returned to be
    evaluated) or to a terminal state (its returns, to back up).

    The hot loop of the search, written for speed: the PUCT choice is inline, as one
    list of scores and C-level max and index (the first best move wins, as a plain
    loop's strict comparison would). Each edge scores its mean value (0 unvisited)
    plus c * prior * sqrt(parent visits) / (1 + visits)."""
    node, path, sqrt = root, [], math.sqrt
    while True:
        scale = c * sqrt(node.total + 1)
        scores = [q + scale * p / (1 + n)
                  for q, p, n in zip(node.edge_mean, node.edge_prior, node.edge_visits,
                                     strict=True)]
        i = scores.index(max(scores))
        path.append((node, i))
        child = node.edge_child[i]
        if child is None:
            child = node.edge_child[i] = Node(node.state.child(node.legal[i]))
        if child.player < 0:  # terminal: no chance nodes here, so no other negative player
            return path, None, child.state.returns()
        if child.legal is None:
            return path, child, None
        node = child


def _backup(path: list[tuple[Node, int]], values: Any) -> None:
    """Add ``values[player]`` (the value for the player to move at each node) to the
    path's edges."""
    for node, i in path:
        n = node.edge_visits[i] = node.edge_visits[i] + 1
        node.total += 1
        total = node.edge_sum[i] = node.edge_sum[i] + values[node.player]
        node.edge_mean[i] = total / n


def search_game(env: Any) -> Any:
    """The OpenSpiel game the env's positions are searched in; a ValueError unless it is
    a two-player zero-sum game of perfect information without chance."""
    pyspiel = import_extra("pyspiel", "open_spiel")
    if not hasattr(env, "openspiel_state"):
        raise ValueError(f"PUCT searches OpenSpiel states; {type(env).__name__} has none: "
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
        raise ValueError(f"PUCT searches two-player zero-sum games of perfect information "
                         f"without chance; {kind.short_name!r} is not one (for poker and other "
                         "hidden-information games train a league with a magnet).")
    return game
