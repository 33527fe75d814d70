"""games.search's solver against exact minimax on tic-tac-toe: every result the trees
prove is the position's minimax value for its mover, a won root is proven and
its win played, and the move picked is a minimax-best one where the network's priors and
values point at a losing move."""

import math
from functools import cache

import numpy as np
import pytest

pytest.importorskip("pyspiel")

import pyspiel

from distrl.games.search import Trees

GAME = pyspiel.load_game("tic_tac_toe")


def position(moves):
    state = GAME.new_initial_state()
    for m in moves:
        state.apply_action(m)
    return state


@cache
def minimax(moves: tuple[int, ...]) -> float:
    """The result for the player to move after ``moves`` under perfect play."""
    state = position(moves)
    return max(-minimax((*moves, a)) if not state.child(a).is_terminal()
               else state.child(a).returns()[state.current_player()]
               for a in state.legal_actions())


def best_moves(moves):
    state = position(moves)
    results = {a: (state.child(a).returns()[state.current_player()]
                   if state.child(a).is_terminal() else -minimax((*moves, a)))
               for a in state.legal_actions()}
    return {a for a, r in results.items() if r == max(results.values())}


def misleading(states):
    """Priors on the lowest-numbered legal cell and values that call every position
    won for its mover: nothing in the network points at the right move."""
    logits = np.full((len(states), 9), -5.0)
    for k, state in enumerate(states):
        logits[k, state.legal_actions()[0]] = 5.0
    return logits, np.ones(len(states))


def observe(states):
    """What a SearchPlayer's network sees: the lure, the lowest free cell."""
    return np.array([[s.legal_actions()[0]] for s in states], np.float32)


def network(obs, value=False):
    """misleading() as a torch network over observe()'s view."""
    import torch

    logits = torch.full((obs.shape[0], 9), -5.0)
    logits[torch.arange(obs.shape[0]), obs[:, 0].long()] = 5.0
    return logits, torch.ones(obs.shape[0])


def proven_nodes(trees, g):
    """(moves from the row's start, proven result) of every solved node of row g."""
    out = []
    for i in range(trees.count[g]):
        if not math.isnan(trees.solved[g, i]):
            out.append((tuple(trees.states[g][i].history()), float(trees.solved[g, i])))
    return out


# x must block on 7 to draw; o must take a corner (2 or 6) to draw; x wins by a fork on
# 6; an opening (drawn). In the first three the lowest free cell is not a best move.
OPENINGS = [[0, 4, 8, 1], [4, 0, 8], [0, 4, 8, 2], [4]]


@pytest.mark.parametrize("moves", OPENINGS)
def test_every_proven_result_is_the_minimax_value(moves):
    trees = Trees([position(moves)], solve=True)
    trees.expand_roots(misleading)
    trees.search(misleading, 400, 1.25)
    proven = proven_nodes(trees, 0)
    assert len(proven) > 10
    for history, result in proven:
        assert result == minimax(history), history


@pytest.mark.parametrize("moves", OPENINGS[:3])
def test_the_move_played_is_a_best_one_where_the_network_points_elsewhere(moves):
    """The misleading network prefers the lowest free cell, a worse move in each of
    these: searching alone, 400 simulations play it; solving, they play a best move."""
    picks = {}
    for solve in (False, True):
        trees = Trees([position(moves)], solve=solve)
        trees.expand_roots(misleading)
        trees.search(misleading, 400, 1.25)
        picks[solve] = int(np.argmax(trees.choice(0)))
    assert picks[False] == position(moves).legal_actions()[0]
    assert picks[False] not in best_moves(moves)
    assert picks[True] in best_moves(moves)


def test_a_won_root_is_proven_and_valued_as_won():
    moves = [0, 4, 8, 2]  # x forks on 6
    trees = Trees([position(moves)], solve=True)
    trees.expand_roots(misleading)
    trees.search(misleading, 400, 1.25)
    assert trees.value(0) == minimax(tuple(moves)) == 1.0
    assert np.flatnonzero(trees.choice(0)).tolist() == [6]


@pytest.mark.parametrize("moves", OPENINGS[:3])
def test_the_choice_follows_the_proofs_at_every_budget(moves):
    """After 1 to 60 simulations: where a move is proven won only proven wins have
    weight; else proven losses have none while another move is left. Some budgets
    leave the most visited move a proven loss, which the choice then skips."""
    overridden = 0
    for n in range(1, 61):
        trees = Trees([position(moves)], solve=True)
        trees.expand_roots(misleading)
        trees.search(misleading, n, 1.25)
        root = trees.root[0]
        proof, visits, choice = trees.proof[0, root], trees.visits[0, root], trees.choice(0)
        won, lost = proof == 1, proof == -1
        if won.any():
            assert ((choice > 0) == won).all()
        elif (visits[~lost] > 0).any():
            assert (choice[lost] == 0).all() and choice.sum() > 0
        overridden += bool(lost[np.argmax(visits)])
    assert overridden > 0


def test_proofs_survive_the_move_played_and_the_search_goes_on():
    """Four moves of one game (rows renumbered as they fill): proofs stay minimax's."""
    trees = Trees([position([])], solve=True)
    trees.expand_roots(misleading)
    proven = 0
    for _ in range(4):
        trees.search(misleading, 150, 1.25)
        trees.advance(0, int(np.argmax(trees.choice(0))))
        trees.expand_roots(misleading)
        for history, result in proven_nodes(trees, 0):
            assert result == minimax(history), history
            proven += 1
    assert proven > 0


def test_without_solving_nothing_is_proven_and_the_visits_decide():
    trees = Trees([position([4, 0, 8])])
    trees.expand_roots(misleading)
    trees.search(misleading, 60, 1.25)
    assert not hasattr(trees, "proof") and not hasattr(trees, "solved")  # no memory spent
    assert trees.choice(0).tolist() == trees.visits[0, trees.root[0]].tolist()
    root = trees.root[0]
    assert trees.value(0) == pytest.approx(trees.value_sum[0, root].sum() / 60)


@pytest.mark.parametrize("moves", [[1, 0, 3, 4, 6], [1, 2, 3, 5, 6]])
def test_a_proven_draw_leaves_the_visits_to_a_win_not_yet_seen(moves):
    """o (x) wins on 8; the lure, the lowest free cell, is a draw the trees prove in a
    few simulations. Scored with an exploration bonus, the draw kept all 100 visits and
    8 was never tried; scored at its exact result, the win is found, proven and played."""
    trees = Trees([position(moves)], solve=True)
    trees.expand_roots(misleading)
    trees.search(misleading, 100, 1.25)
    root = trees.root[0]
    lure = position(moves).legal_actions()[0]
    assert trees.proof[0, root, lure] == 0 == -minimax((*moves, lure))
    assert trees.proof[0, root, 8] == 1 and trees.value(0) == minimax(tuple(moves)) == 1
    assert int(np.argmax(trees.choice(0))) == 8
    assert trees.visits[0, root, lure] < 20


def test_a_search_player_solves_and_plays_by_the_proof():
    """SearchPlayer (eval --search, distrl play) with the misleading network: it plays
    a best move and reports the proven result; told not to solve, it plays the lure."""
    from distrl.games.players import SearchPlayer

    won = [0, 4, 8, 2]
    (move, result), = SearchPlayer(network, 400, c=1.25).choose([position(won)], observe)
    assert (move, result) == (6, 1.0)
    (lure, _), = SearchPlayer(network, 400, c=1.25, solve=False).choose([position(won)],
                                                                       observe)
    assert lure == 1
    # After 18 simulations from [4, 0, 8] the lure 1 has most visits and is proven lost.
    (move, _), = SearchPlayer(network, 18, c=1.25).choose([position([4, 0, 8])], observe)
    assert move != 1
