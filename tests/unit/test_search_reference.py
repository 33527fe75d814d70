"""games.search against a plain PUCT written here without its speed-ups (compact edge
lists, the inline choice, the paused collector): the same visits, values and priors on
tic-tac-toe with a fixed fake network, searched one root at a time or side by side."""

import math

import numpy as np
import pytest

pytest.importorskip("pyspiel")

import pyspiel

from distrl.games.search import Node, add_noise, expand_roots, search, softmax

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


@pytest.mark.parametrize("simulations", [1, 9, 60, 300])
def test_search_matches_a_plain_puct(simulations):
    roots = [Node(opening(m)) for m in OPENINGS]
    expand_roots(roots, fake_network)
    search(roots, fake_network, simulations, C)
    for moves, root in zip(OPENINGS, roots, strict=True):
        plain = Plain(opening(moves))
        plain.expand()
        for _ in range(simulations):
            plain_simulation(plain)
        assert root.visits == plain.visits
        assert root.value_sum == pytest.approx(plain.value_sum)
        assert root.prior == pytest.approx(plain.prior)
        assert root.value() == pytest.approx(sum(plain.value_sum) / simulations)
        np.testing.assert_allclose(root.policy(), np.array(plain.visits) / simulations)
        for action, child in root.children.items():
            if child.expanded:
                assert child.visits == plain.children[action].visits


def test_noise_mixes_into_the_legal_priors_in_their_order():
    root = Node(opening([0, 4]))
    expand_roots([root], fake_network)
    before = list(root.prior)
    add_noise(root, 0.3, 0.25, np.random.default_rng(1))
    noise = np.random.default_rng(1).dirichlet([0.3] * 7)
    legal = root.legal
    expected = [0.75 * before[a] + 0.25 * noise[legal.index(a)] if a in legal else 0.0
                for a in range(9)]
    assert root.prior == pytest.approx(expected)
