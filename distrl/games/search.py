"""PUCT search (AlphaZero: Silver et al. 2018, Science 362:1140) over OpenSpiel states of
a two-player zero-sum game with perfect information and no chance: a network's move
priors and values guide the simulations instead of random rollouts. AlphaZero's
self-play searches with it, and so does any game run's network at play time
(games.players: ``distrl eval --search``, ``distrl play``).

Pure maths and OpenSpiel states, no torch: ``evaluate(states) -> (logits [B, A], values
[B])`` is the network, each value in [-1, 1] for the player to move in its state. Many
positions are searched side by side (``Trees``, one tree a row) so that their leaves are
evaluated in one batch (the tuned connect-four network on one CPU thread: 2-4 ms for
128 positions, 0.2-0.5 ms for one).

Each edge (node, action) keeps its visit count and the sum of the values backed up
through it, both from the view of the player to move at ``node``; a leaf's value counts
for the player who moves there and against the other.

The trees are numpy arrays [row, node, action], and each simulation descends every row
in lockstep, one numpy step per depth: written in Python node by node, the descent and
backup took half of self-play's time; in arrays a depth step costs about what one node
did, shared by all rows. Python is left with what OpenSpiel must do per new node
(stepping, legal moves); the visits and values are a plain node-by-node PUCT's.
With ``solve`` the trees also prove results (MCTS-Solver: Winands et al. 2008): an edge
into a terminal state, or into a node whose result is proven, carries that result; a
node is won once one edge wins for its mover, and its result is the best of its edges
once all are proven. The descent then always takes a proven win and avoids proven
losses, and the move played follows the proof: a network's value can miss a forced line
a few plies deep that the tree has already walked to its end (OpenSpiel's MCTS, which
play-time search meets on the ladder, solves too).

Memory: about 50 bytes per node and action (60 when solving), every row as long as the
longest (connect four's self-play, 128 games of 50 simulations a move: 11 MB), as a row
over half full keeps only the subtree of the move played.
"""

from __future__ import annotations

import gc
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from distrl.games.games import import_extra

Evaluate = Callable[[list[Any]], tuple[np.ndarray, np.ndarray]]
TERMINAL = -4
"""OpenSpiel's current_player() of a terminal state (no chance nodes here)."""


class Edges(NamedTuple):
    """One node's edges by action (0 at illegal moves), for readers and tests."""

    prior: list[float]
    visits: list[int]
    value_sum: list[float]
    expanded: bool


def softmax(logits: np.ndarray) -> np.ndarray:
    """Rows of move probabilities, in the logits' precision."""
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    return p / p.sum(axis=1, keepdims=True)


A = "actions"
FIELDS = {
    # name: (blank value, dtype, the axes after [row, node])
    "prior": (0.0, np.float64, A),
    "visits": (0.0, np.float64, A),
    "value_sum": (0.0, np.float64, A),
    "mean": (0.0, np.float64, A),  # value_sum / visits (0 unvisited), kept by the backup
    "illegal": (-math.inf, np.float64, A),  # 0 at legal moves: added to their scores
    "child": (-1, np.int64, A),
    "total": (0.0, np.float64, ()),  # backups through the node
    "mover": (TERMINAL, np.int8, ()),  # the player to move
    "expanded": (False, bool, ()),
    "returns": (0.0, np.float64, (2,)),  # a terminal node's, by player
    "proof": (math.nan, np.float64, A),  # the edge's proven result for the mover; nan: none
    "solved": (math.nan, np.float64, ()),  # the node's proven result for its mover
}
"""The trees' arrays, [row, node, ...]."""
SOLVER = ("proof", "solved")
"""The arrays only a solving search keeps (self-play, which never solves, pays nothing)."""


PROVEN = 1e9
"""A proven win's score in the descent (a proven loss's: -PROVEN)."""


class Trees:
    """One search tree per position in ``states``, as arrays: row g is the tree of
    position g, node 0 of a fresh row its root. A row's nodes are numbered in the order
    they were made; ``child`` links a node's edge to its child node (-1: none yet).
    ``solve``: prove wins, losses and draws as the search reaches them (see above)."""

    def __init__(self, states: list[Any], num_actions: int | None = None, solve: bool = False):
        self.rows = len(states)
        game = states[0].get_game()
        self.num_actions = num_actions or game.num_distinct_actions()
        # A solved child's result for the parent's mover is the rest of the utility sum
        # (0: zero-sum); a win is the game's best result, a loss its worst.
        self.solve, self.win, self.loss = solve, game.max_utility(), game.min_utility()
        self.utility_sum = game.utility_sum() if solve else 0.0
        self.fields = {name: field for name, field in FIELDS.items()
                       if solve or name not in SOLVER}
        self.capacity = 0
        self._grow(64)
        self.root = np.zeros(self.rows, np.int64)
        self.count = [0] * self.rows
        self.states: list[list[Any]] = [[] for _ in range(self.rows)]
        for g, state in enumerate(states):
            self.replant(g, state)

    # -- the arrays ---------------------------------------------------------------------

    def _grow(self, capacity: int) -> None:
        """Room for ``capacity`` nodes a row; new nodes start blank."""
        old = self.capacity
        for name, (blank, dtype, axes) in self.fields.items():
            axes = (self.num_actions,) if axes == A else axes
            new = np.full((self.rows, capacity, *axes), blank, dtype)
            if old:
                new[:, :old] = getattr(self, name)
            setattr(self, name, new)
        self.capacity = capacity

    def _blank(self, g: int, start: int, stop: int) -> None:
        """Nodes start..stop of row g back to blank (no longer used)."""
        for name, (blank, _, _) in self.fields.items():
            getattr(self, name)[g, start:stop] = blank

    def _new_node(self, g: int, state: Any) -> int:
        if self.count[g] == self.capacity:
            self._grow(2 * self.capacity)
        i = self.count[g]
        self.count[g] = i + 1
        self.states[g].append(state)
        player = state.current_player()
        self.mover[g, i] = player
        if player < 0:
            self.returns[g, i] = state.returns()
        return i

    # -- rows ---------------------------------------------------------------------------

    def replant(self, g: int, state: Any) -> None:
        """Row g becomes a fresh tree of ``state``."""
        self._blank(g, 0, self.count[g])
        self.count[g], self.root[g], self.states[g] = 0, 0, []
        self._new_node(g, state)

    def advance(self, g: int, action: int) -> None:
        """Row g's tree becomes the subtree of ``action`` from its root (made if not
        searched). Once the row is over half full, the subtree is renumbered from 0 so
        that the rest's room is used again."""
        root = int(self.root[g])
        if self.child[g, root, action] < 0:
            self.child[g, root, action] = self._new_node(g, self.states[g][root].child(action))
        self.root[g] = self.child[g, root, action]
        if 2 * self.count[g] > self.capacity:
            self._compact(g)

    def _compact(self, g: int) -> None:
        """Row g keeps only its root's subtree, renumbered from 0 (level by level)."""
        self.graft(g, self, g, int(self.root[g]))

    def graft(self, g: int, other: Trees, h: int, node: int) -> None:
        """Row g becomes a copy of ``other``'s row h below ``node``, its visits, values and
        proofs kept, renumbered from 0 level by level: a tree searched before carries on
        (``other`` may be these trees, solving as they do)."""
        keep = other._subtree(h, node)
        old, n = self.count[g], len(keep)
        while self.capacity < n:
            self._grow(2 * self.capacity)
        renumber = np.full(other.count[h], -1, np.int64)
        renumber[keep] = np.arange(n)
        for name in self.fields:
            getattr(self, name)[g, :n] = getattr(other, name)[h, keep]
        links = self.child[g, :n]
        links[links >= 0] = renumber[links[links >= 0]]
        self.states[g] = [other.states[h][i] for i in keep.tolist()]
        self._blank(g, n, old)
        self.count[g], self.root[g] = n, 0

    def _subtree(self, g: int, node: int) -> np.ndarray:
        """The nodes under ``node`` (itself first), level by level."""
        levels, frontier = [], np.array([node])
        while len(frontier):
            levels.append(frontier)
            links = self.child[g, frontier]
            frontier = links[links >= 0]
        return np.concatenate(levels)

    def state(self, g: int) -> Any:
        return self.states[g][int(self.root[g])]

    def player(self, g: int) -> int:
        return int(self.mover[g, self.root[g]])

    def edges(self, g: int, path: tuple[int, ...] = ()) -> Edges | None:
        """The edges of the node ``path`` (actions from the root) leads to; None where
        the search never made it."""
        node = int(self.root[g])
        for action in path:
            node = int(self.child[g, node, action])
            if node < 0:
                return None
        return Edges(self.prior[g, node].tolist(), self.visits[g, node].astype(int).tolist(),
                     self.value_sum[g, node].tolist(), bool(self.expanded[g, node]))

    def policy(self, g: int) -> np.ndarray:
        """Row g's root visit distribution: the search's improved policy."""
        visits = self.visits[g, self.root[g]]
        return visits / visits.sum()

    def choice(self, g: int) -> np.ndarray:
        """The weights row g's move is picked by: the root's visits, except that a proven
        win takes them all and proven losses get none while another move is left."""
        root = self.root[g]
        visits = self.visits[g, root].copy()
        if not self.solve:
            return visits
        proof = self.proof[g, root]
        if (proof == self.win).any():
            return (proof == self.win).astype(np.float64)
        lost = proof == self.loss
        if visits[~lost].sum() > 0:
            visits[lost] = 0.0
        return visits

    def value(self, g: int) -> float:
        """The searched value for the player to move at row g's root: its proven result
        if there is one, else the mean of all values backed up through its edges (0
        before any)."""
        root = self.root[g]
        if self.solve and not math.isnan(self.solved[g, root]):
            return float(self.solved[g, root])
        total = self.total[g, root]
        # Python's sum adds in action order, as the values were backed up.
        return sum(self.value_sum[g, root].tolist()) / total if total else 0.0

    # -- searching ----------------------------------------------------------------------

    def _expand(self, rows: list[int], nodes: list[int], probs: np.ndarray) -> None:
        """Priors: the network's move probabilities renormalised over the legal moves
        (uniform over them where the network gives them no mass)."""
        legal = np.array([self.states[g][i].legal_actions_mask()
                          for g, i in zip(rows, nodes, strict=True)], bool)
        probs = np.where(legal, np.asarray(probs, np.float64), 0.0)
        mass = probs.sum(axis=1, keepdims=True)
        uniform = legal / legal.sum(axis=1, keepdims=True)
        self.prior[rows, nodes] = np.where(mass > 0, probs / np.where(mass > 0, mass, 1.0),
                                           uniform)
        self.illegal[rows, nodes] = np.where(legal, 0.0, -math.inf)
        self.expanded[rows, nodes] = True

    def expand_roots(self, evaluate: Evaluate) -> None:
        """Expand the roots not expanded yet, in one batch."""
        rows = [g for g in range(self.rows) if not self.expanded[g, self.root[g]]]
        if rows:
            nodes = self.root[rows].tolist()
            logits, _ = evaluate([self.states[g][i] for g, i in zip(rows, nodes, strict=True)])
            self._expand(rows, nodes, softmax(logits))

    def add_noise(self, alpha: float, fraction: float, rng: np.random.Generator) -> None:
        """Mix Dirichlet(alpha) noise into every expanded root's legal priors, row by
        row, so that self-play tries moves the network rates low."""
        for g in range(self.rows):
            root = self.root[g]
            legal = np.flatnonzero(self.illegal[g, root] == 0)
            noise = rng.dirichlet([alpha] * len(legal))
            prior = self.prior[g, root]
            prior[legal] = (1 - fraction) * prior[legal] + fraction * noise

    def search(self, evaluate: Evaluate, simulations: int, c: float) -> None:
        """``simulations`` simulations from each (expanded, non-terminal) root; each
        round walks every row's tree to a leaf and evaluates the new leaves in one batch.

        Python's cyclic garbage collector pauses meanwhile: the OpenSpiel states the
        search makes would trigger collections that rescan every live object."""
        enabled = gc.isenabled()
        gc.disable()
        try:
            for _ in range(simulations):
                self._simulate(evaluate, c)
        finally:
            if enabled:
                gc.enable()

    def _simulate(self, evaluate: Evaluate, c: float) -> None:
        """One simulation in every row: descend, evaluate the new leaves, back up."""
        path, nodes = self._descend(c)
        rows = np.arange(self.rows)
        leaf = ~self.expanded[rows, nodes] & (self.mover[rows, nodes] >= 0)
        value = self.returns[rows, nodes]  # [rows, player]: the terminal ones' returns
        if leaf.any():
            leaf_rows, leaf_nodes = rows[leaf].tolist(), nodes[leaf].tolist()
            logits, values = evaluate([self.states[g][i]
                                       for g, i in zip(leaf_rows, leaf_nodes, strict=True)])
            self._expand(leaf_rows, leaf_nodes, softmax(logits))
            v = np.clip(values.astype(np.float64).reshape(-1), -1.0, 1.0)
            mover = self.mover[rows[leaf], nodes[leaf]]
            value[leaf] = np.where(mover[:, None] == np.arange(2), v[:, None], -v[:, None])
        self._backup(path, value)

    def _descend(self, c: float) -> tuple[list, np.ndarray]:
        """Every row's walk from its root to a new leaf or a terminal state: the edges
        taken, depth by depth (rows, nodes, actions), and the node each row ended at.
        Each edge scores its mean value (0 unvisited) plus
        c * prior * sqrt(parent visits) / (1 + visits); when solving, a proven edge scores
        its result instead (+-PROVEN for a win or loss); illegal moves score -inf, and the
        first best move wins (argmax)."""
        rows = np.arange(self.rows)
        nodes = self.root.copy()
        end_nodes = np.empty(self.rows, np.int64)
        path = []
        while len(rows):
            scale = c * np.sqrt(self.total[rows, nodes] + 1)
            scores = (self.mean[rows, nodes]
                      + scale[:, None] * self.prior[rows, nodes] / (1 + self.visits[rows, nodes])
                      + self.illegal[rows, nodes])
            if self.solve:
                scores = self._proven_scores(self.proof[rows, nodes], scores)
            actions = scores.argmax(axis=1)
            path.append((rows, nodes, actions))
            children = self.child[rows, nodes, actions]
            for k in np.flatnonzero(children < 0).tolist():
                g, i, a = int(rows[k]), int(nodes[k]), int(actions[k])
                children[k] = self.child[g, i, a] = self._new_node(g, self.states[g][i].child(a))
            done = ~self.expanded[rows, children] | (self.mover[rows, children] < 0)
            end_nodes[rows[done]] = children[done]
            rows, nodes = rows[~done], children[~done]
        return path, end_nodes

    def _proven_scores(self, proof: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """A proven edge scores its result, +-PROVEN for a win or loss, and no
        exploration bonus: searching it again cannot change what it is worth, and a bonus
        would let a proven draw take the visits an unproven sibling needs."""
        exact = np.where(proof == self.win, PROVEN, np.where(proof == self.loss, -PROVEN, proof))
        return np.where(np.isnan(proof), scores, exact)

    def _backup(self, path: list, value: np.ndarray) -> None:
        """Add ``value[row, player]`` (the value for the player to move at each node) to
        the edges walked."""
        for rows, nodes, actions in path:
            visits = self.visits[rows, nodes, actions] + 1
            total = self.value_sum[rows, nodes, actions] + value[rows, self.mover[rows, nodes]]
            self.visits[rows, nodes, actions] = visits
            self.value_sum[rows, nodes, actions] = total
            self.mean[rows, nodes, actions] = total / visits
            self.total[rows, nodes] += 1
        if self.solve:
            self._prove(path)

    def _prove(self, path: list) -> None:
        """Prove what the walked edges' children settle, deepest first: an edge into a
        terminal state carries its mover's return, one into a solved node the utility
        sum less that node's result (its negation in a zero-sum game); a node is solved
        as a win once one edge wins, else as the best of its edges once every legal edge
        is proven."""
        for rows, nodes, actions in reversed(path):
            children = self.child[rows, nodes, actions]
            mover = self.mover[rows, nodes]
            terminal = self.mover[rows, children] < 0
            self.proof[rows, nodes, actions] = np.where(
                terminal, self.returns[rows, children, mover],
                self.utility_sum - self.solved[rows, children])
            proofs = np.where(self.illegal[rows, nodes] == 0, self.proof[rows, nodes], -math.inf)
            won = (proofs == self.win).any(axis=1)
            # max is nan while any legal edge is unproven
            self.solved[rows, nodes] = np.where(won, self.win, proofs.max(axis=1))


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
