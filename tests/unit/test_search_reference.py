"""games.search against a plain PUCT written here node by node, without its speed-ups
(trees as arrays descended in lockstep, the paused collector): the same visits, values
and priors on tic-tac-toe with a fixed fake network, searched one root at a time or side
by side, and again after the move played keeps its subtree."""

import math

import numpy as np
import pytest

pytest.importorskip("pyspiel")

import pyspiel

from distrl.games.search import Trees, softmax

C = 1.25


def fake_network(states):
    """Logits and values that depend only on each state's moves; some values lie
    outside [-1, 1], which the search clips."""
    logits, values = [], []
    for state in states:
        h = state.history()
        logits.append([math.sin(1 + a * (len(h) + 1) + 0.37 * sum(h)) for a in range(9)])
        values.append(1.3 * math.cos(0.7 * sum(h) + len(h)))
    return np.array(logits), np.array(values)


class Plain:
    """A node with statistics over all actions (0 at illegal ones)."""

    def __init__(self, state):
        self.state, self.player, self.children = state, state.current_player(), {}
        self.prior = None

    def expand(self):
        logits, _ = fake_network([self.state])
        probs, legal = softmax(logits)[0], self.state.legal_actions()
        mass = sum(probs[a] for a in legal)
        self.prior = [probs[a] / mass if a in legal else 0.0 for a in range(9)]
        self.visits, self.value_sum = [0] * 9, [0.0] * 9


def plain_simulation(root):
    node, path = root, []
    while True:
        best, best_score = None, -math.inf
        for a in node.state.legal_actions():
            n = node.visits[a]
            q = node.value_sum[a] / n if n else 0.0
            score = q + C * math.sqrt(sum(node.visits) + 1) * node.prior[a] / (1 + n)
            if score > best_score:
                best, best_score = a, score
        path.append((node, best))
        if best not in node.children:
            node.children[best] = Plain(node.state.child(best))
        node = node.children[best]
        if node.state.is_terminal():
            value_for = node.state.returns()
            break
        if node.prior is None:
            node.expand()
            v = min(max(fake_network([node.state])[1][0], -1.0), 1.0)
            value_for = {node.player: v, 1 - node.player: -v}
            break
    for parent, action in path:
        parent.visits[action] += 1
        parent.value_sum[action] += value_for[parent.player]


def opening(moves):
    state = pyspiel.load_game("tic_tac_toe").new_initial_state()
    for m in moves:
        state.apply_action(m)
    return state


OPENINGS = ([], [4], [0, 4], [4, 0, 8], [0, 1, 3])


def assert_same(trees, g, plain, simulations):
    edges = trees.edges(g)
    assert edges.visits == plain.visits
    assert edges.value_sum == pytest.approx(plain.value_sum)
    assert edges.prior == pytest.approx(plain.prior)
    assert trees.value(g) == pytest.approx(sum(plain.value_sum) / simulations)
    np.testing.assert_allclose(trees.policy(g), np.array(plain.visits) / simulations)
    for action, child in plain.children.items():
        below = trees.edges(g, (action,))
        assert below is not None and below.expanded == (child.prior is not None)
        if child.prior is not None:
            assert below.visits == child.visits
            assert below.value_sum == pytest.approx(child.value_sum)


@pytest.mark.parametrize("simulations", [1, 9, 60, 300])
def test_search_matches_a_plain_puct(simulations):
    trees = Trees([opening(m) for m in OPENINGS])
    trees.expand_roots(fake_network)
    trees.search(fake_network, simulations, C)
    for g, moves in enumerate(OPENINGS):
        plain = Plain(opening(moves))
        plain.expand()
        for _ in range(simulations):
            plain_simulation(plain)
        assert_same(trees, g, plain, simulations)


def test_the_move_played_keeps_its_subtree_and_searches_on_as_a_plain_puct():
    """Three moves of one game, 40 simulations each: after the first, the tree keeps the
    played move's subtree (renumbered once the row fills) and the second search adds to
    its statistics, as the plain PUCT's kept child does."""
    trees = Trees([opening([])])
    plain = Plain(opening([]))
    trees.expand_roots(fake_network)
    plain.expand()
    for _move in range(3):
        trees.search(fake_network, 40, C)
        for _ in range(40):
            plain_simulation(plain)
        assert_same(trees, 0, plain, sum(plain.visits))
        action = int(np.argmax(plain.visits))
        trees.advance(0, action)
        plain = plain.children[action]
        assert trees.state(0).history() == plain.state.history()
        if plain.prior is None:
            plain.expand()
        trees.expand_roots(fake_network)
        assert trees.count[0] <= trees.capacity
    assert trees.capacity == 64  # rows over half full kept only the subtree


def test_noise_mixes_into_the_legal_priors_in_their_order():
    trees = Trees([opening([0, 4])])
    trees.expand_roots(fake_network)
    before = trees.edges(0).prior
    trees.add_noise(0.3, 0.25, np.random.default_rng(1))
    noise = np.random.default_rng(1).dirichlet([0.3] * 7)
    legal = opening([0, 4]).legal_actions()
    expected = [0.75 * before[a] + 0.25 * noise[legal.index(a)] if a in legal else 0.0
                for a in range(9)]
    assert trees.edges(0).prior == pytest.approx(expected)
