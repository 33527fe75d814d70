"""A searched tree carried on: Trees.graft copies a subtree with its statistics and
proofs, and a SearchPlayer starts each move from the subtree of the position it meets
(its last move and the reply), the new simulations added to the visits it had."""

import itertools

import numpy as np
import pytest

pytest.importorskip("pyspiel")

from distrl.games.players import SearchPlayer
from distrl.games.search import Trees
from tests.unit.test_search_solver import misleading, network, observe, position, proven_nodes


def paths(depth):
    """Every move sequence of up to ``depth`` cells (illegal ones too: both trees must
    agree where the search never went)."""
    return [p for n in range(depth + 1) for p in itertools.product(range(9), repeat=n)]


def test_a_grafted_subtree_holds_what_the_search_found_there():
    searched = Trees([position([4])], solve=True)
    searched.expand_roots(misleading)
    searched.search(misleading, 300, 1.25)
    move = int(np.argmax(searched.visits[0, 0]))
    reply = int(np.argmax(searched.visits[0, searched.child[0, 0, move]]))
    node = int(searched.child[0, searched.child[0, 0, move], reply])
    carried = Trees([position([4, move, reply])], solve=True)
    carried.graft(0, searched, 0, node)
    for path in paths(2):
        assert carried.edges(0, path) == searched.edges(0, (move, reply, *path)), path
    proven = sorted(p for p in proven_nodes(searched, 0) if p[0][:3] == (4, move, reply))
    assert sorted(proven_nodes(carried, 0)) == proven and len(proven) > 5
    assert carried.count[0] == len(searched._subtree(0, node)) > 50


@pytest.mark.parametrize("reuse", [True, False])
def test_a_search_player_starts_from_the_subtree_of_its_move_and_the_reply(reuse):
    player = SearchPlayer(network, 120, c=1.25, reuse=reuse)
    (move, _), = player.choose([position([4])], observe)
    first = player.trees
    reply = next(a for a in range(9) if a not in (4, move))
    node = first.child[0, first.child[0, 0, move], reply]
    before = first.total[0, node] if node >= 0 else 0.0
    assert before > 0 or not reuse
    player.choose([position([4, move, reply])], observe)
    root = player.trees.root[0]
    assert player.trees.total[0, root] == 120 + (before if reuse else 0)
    # Another game's position is searched afresh.
    player.choose([position([0, 4, 8])], observe)
    assert player.trees.total[0, player.trees.root[0]] == 120
