"""Exact NashConv of tabulated policies, and the reach-weighted average of iterates."""

import numpy as np
import pytest

pyspiel = pytest.importorskip("pyspiel")

from open_spiel.python import policy as policy_lib  # noqa: E402
from open_spiel.python.algorithms import cfr, exploitability  # noqa: E402

from distrl.games.games import observe  # noqa: E402
from distrl.games.nash import (  # noqa: E402
    MAX_STATES,
    AveragePolicy,
    nash_conv,
    table_nash_conv,
    tabulate,
    tree_size,
)

KUHN = pyspiel.load_game("kuhn_poker")


def uniform(obs, mask):
    return mask / mask.sum(-1, keepdims=True)


def test_nash_conv_matches_open_spiel_for_uniform_and_cfr():
    assert nash_conv(KUHN, uniform) == pytest.approx(
        exploitability.nash_conv(KUHN, policy_lib.UniformRandomPolicy(KUHN)))
    solver = cfr.CFRSolver(KUHN)
    for _ in range(300):
        solver.evaluate_and_update_policy()
    average = solver.average_policy()
    states = policy_lib.TabularPolicy(KUHN).states
    by_obs = {observe(s, s.current_player())["observation"].tobytes():
              average.policy_for_key(s.information_state_string()) for s in states}

    def cfr_probs(obs, mask):  # CFR's table, looked up by the observation we tabulate
        return np.stack([by_obs[o.tobytes()] for o in obs])

    assert nash_conv(KUHN, cfr_probs) == pytest.approx(
        exploitability.nash_conv(KUHN, average), abs=1e-12)
    assert nash_conv(KUHN, cfr_probs) < 0.01


def test_each_table_in_turn_gets_open_spiels_nash_conv():
    # The best responders are built once per game and handed each new table: every
    # answer must be the new table's alone (three-player Kuhn: a sum of three players';
    # tiny Hanabi: a common payoff, where what the table earns is not zero).
    for game in (pyspiel.load_game("leduc_poker"),
                 pyspiel.load_game("kuhn_poker", {"players": 3}),
                 pyspiel.load_game("tiny_hanabi")):
        tabular = policy_lib.TabularPolicy(game)
        rng = np.random.default_rng(0)
        for _ in range(3):
            table = rng.random(tabular.action_probability_array.shape) ** 4
            table *= tabular.legal_actions_mask
            tabular.action_probability_array = table / table.sum(1, keepdims=True)
            assert table_nash_conv(game, tabular.action_probability_array) == pytest.approx(
                exploitability.nash_conv(game, tabular), abs=1e-9)


def test_tabulate_asks_once_for_every_information_state():
    calls = []

    def probs(obs, mask):
        calls.append(len(obs))
        return uniform(obs, mask)

    table = tabulate(KUHN, probs)
    assert calls == [12] and table.shape == (12, 2)  # Kuhn: 12 information states
    np.testing.assert_allclose(table, 0.5)


def test_the_average_of_cfr_iterates_is_cfrs_average_policy():
    # CFR's average policy is the reach-weighted mean of its iterates, the very quantity
    # AveragePolicy computes: a plain mean of the tables would be another policy.
    solver = cfr.CFRSolver(KUHN)
    average = AveragePolicy(KUHN, window=30)
    for _ in range(30):
        average.add(solver.current_policy().action_probability_array.copy())
        solver.evaluate_and_update_policy()
    np.testing.assert_allclose(average.table(),
                               solver.average_policy().action_probability_array, atol=1e-12)
    last = table_nash_conv(KUHN, average.last)
    assert average.nash_conv() < 0.5 * last  # the iterates cycle; their average does not


def test_the_window_keeps_only_the_newest_iterates():
    rng = np.random.default_rng(0)
    tables = [rng.dirichlet([1, 1], size=12) for _ in range(5)]
    windowed, fresh = AveragePolicy(KUHN, window=3), AveragePolicy(KUHN, window=3)
    for t in tables:
        windowed.add(t)
    for t in tables[2:]:
        fresh.add(t)
    np.testing.assert_allclose(windowed.table(), fresh.table(), atol=1e-12)
    one = AveragePolicy(KUHN, window=1)
    one.add(tables[0])
    np.testing.assert_allclose(one.table(), tables[0], atol=1e-12)
    with pytest.raises(ValueError, match="window >= 1"):
        AveragePolicy(KUHN, window=0)


def test_tree_size_counts_poker_and_stops_past_its_bound():
    # Every history, chance and terminal ones included: what tabulating walks.
    assert tree_size(KUHN, MAX_STATES) == 58 and tree_size(KUHN, 57) == 58
    assert tree_size(pyspiel.load_game("leduc_poker"), MAX_STATES) == 9_457
    for name in ("tic_tac_toe", "connect_four"):  # 549,946 and ~10^13 histories
        assert tree_size(pyspiel.load_game(name), MAX_STATES) == MAX_STATES + 1


def _refuse(*args, **kwargs):
    raise AssertionError("tabulated a game past nash_conv_max_states")


@pytest.mark.parametrize("name", ["tic_tac_toe", "connect_four"])
def test_big_games_get_no_nash_conv_and_are_not_tabulated(name, monkeypatch, capsys):
    from distrl.games import scoring

    monkeypatch.setattr(scoring, "tabulate", _refuse)
    assert scoring.nash_conv_game(f"openspiel:{name}", {}, MAX_STATES) is None
    assert capsys.readouterr().err == (f"distrl: NashConv skipped: openspiel:{name} has more "
                                       "than 100,000 states (nash_conv_max_states)\n")


@pytest.mark.parametrize("name, value", [
    ("kuhn_poker", exploitability.nash_conv(KUHN, policy_lib.UniformRandomPolicy(KUHN))),
    ("leduc_poker", 4.747222222222222),  # OpenSpiel's exploitability_test
])
def test_poker_under_the_bound_gets_its_nash_conv(name, value, capsys):
    import torch

    from distrl.games.scoring import nash_conv_game, policy_nash_conv

    game = nash_conv_game(f"openspiel:{name}", {}, MAX_STATES)
    assert game is not None and capsys.readouterr().err == ""

    def uniform_net(obs):  # equal logits: uniform over the legal moves
        return torch.zeros(len(obs), game.num_distinct_actions()), None

    # float32 softmax: thirds are off by ~1e-8
    assert policy_nash_conv(game, uniform_net) == pytest.approx(value, abs=1e-6)
    assert nash_conv_game(f"openspiel:{name}", {}, 0) is None  # 0: never
