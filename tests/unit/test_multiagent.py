"""Multi-agent adapters on real games: turn order, masks, rewards to the right seat."""

import numpy as np
import pytest

pytest.importorskip("pettingzoo")
pyspiel = pytest.importorskip("pyspiel")

from distrl.games import games as multiagent  # noqa: E402
from distrl.games.games import OpenSpielEnv, make_multiagent_env, split_obs  # noqa: E402


def play(env, columns):
    """Step a turn-based env through ``columns``; every step's outputs."""
    obs, _ = env.reset(seed=0)
    steps = []
    for c in columns:
        (agent,) = obs
        out = env.step({agent: c})
        steps.append((agent, *out))
        obs = out[0]
    return steps


def test_connect_four_turns_masks_and_a_win_credited_to_both_seats():
    env = make_multiagent_env("pettingzoo:connect_four_v3")
    assert env.possible_agents == ["player_0", "player_1"]
    # player_0 stacks column 0 four times; player_1 plays column 1.
    steps = play(env, [0, 1, 0, 1, 0, 1, 0])
    movers = [s[0] for s in steps]
    assert movers == ["player_0", "player_1"] * 3 + ["player_0"]
    for agent, obs, rewards, terms, _, _ in steps[:-1]:
        assert list(obs) != [agent] and len(obs) == 1  # the other seat moves next
        assert set(rewards.values()) <= {0.0} and not any(terms.values())
    _, obs, rewards, terms, truncs, _ = steps[-1]
    assert obs == {} and env.agents == []
    assert rewards == {"player_0": 1.0, "player_1": -1.0}
    assert terms == {"player_0": True, "player_1": True} and not any(truncs.values())


def test_connect_four_masks_a_full_column_and_refuses_the_wrong_seat():
    env = make_multiagent_env("pettingzoo:connect_four_v3")
    obs, _ = env.reset(seed=0)
    for _ in range(6):  # fill column 3 (alternating players, no four in a row)
        (agent,) = obs
        obs = env.step({agent: 3})[0]
    (agent,) = obs
    board, mask = split_obs(obs[agent])
    assert board.shape == (6, 7, 2)
    np.testing.assert_array_equal(mask, [1, 1, 1, 0, 1, 1, 1])
    other = "player_1" if agent == "player_0" else "player_0"
    with pytest.raises(ValueError, match=f"it is {agent}'s turn"):
        env.step({other: 0})


def test_tictactoe_draw_gives_both_zero():
    env = make_multiagent_env("pettingzoo:tictactoe_v3")
    # X O X / X O O / O X X: a draw (cells are numbered column-major in PettingZoo).
    steps = play(env, [0, 3, 6, 4, 1, 7, 5, 2, 8])
    _, obs, rewards, terms, _, _ = steps[-1]
    assert env.possible_agents == ["player_1", "player_2"]
    assert obs == {} and rewards == {"player_1": 0.0, "player_2": 0.0} and all(terms.values())


def test_kuhn_poker_deals_masks_and_zero_sum_returns_reach_both_seats():
    env = OpenSpielEnv("kuhn_poker")
    game = pyspiel.load_game("kuhn_poker")
    rng = np.random.default_rng(0)
    for episode in range(50):
        obs, _ = env.reset(seed=episode)
        totals = dict.fromkeys(env.possible_agents, 0.0)
        while obs:
            (agent,) = obs
            x, mask = split_obs(obs[agent])
            assert x.shape == (game.information_state_tensor_size(),)
            legal = env.state.legal_actions()
            np.testing.assert_array_equal(np.flatnonzero(mask), legal)
            obs, rewards, terms, _, _ = env.step({agent: int(rng.choice(legal))})
            for a, r in rewards.items():
                totals[a] += r
        assert all(terms.values())
        returns = env.state.returns()
        assert totals == {"player_0": returns[0], "player_1": returns[1]}
        assert sum(returns) == 0 and returns[0] != 0


def test_openspiel_seeds_give_the_same_deals_and_leduc_runs_to_the_end():
    a, b = OpenSpielEnv("kuhn_poker"), OpenSpielEnv("kuhn_poker")
    deals = [(str(a.reset(seed=s) and a.state), str(b.reset(seed=s) and b.state))
             for s in range(5)]
    assert all(x == y for x, y in deals) and len({x for x, _ in deals}) > 1
    env = OpenSpielEnv("leduc_poker")
    rng = np.random.default_rng(1)
    for seed in range(5):
        obs, _ = env.reset(seed=seed)
        while obs:
            (agent,) = obs
            _, mask = split_obs(obs[agent])
            obs = env.step({agent: int(rng.choice(np.flatnonzero(mask)))})[0]
        assert env.state.is_terminal() and env.agents == []


def test_openspiel_refuses_illegal_actions_and_simultaneous_games():
    env = OpenSpielEnv("kuhn_poker")
    obs, _ = env.reset(seed=0)
    (agent,) = obs
    with pytest.raises(ValueError, match="illegal"):
        env.step({agent: 5})
    with pytest.raises(ValueError, match="simultaneous"):
        OpenSpielEnv("matrix_rps")


def test_make_multiagent_env_specs_and_errors(monkeypatch):
    assert make_multiagent_env("openspiel:kuhn_poker").possible_agents == ["player_0",
                                                                          "player_1"]
    env = make_multiagent_env(__name__ + ":connect_four_factory")
    assert isinstance(env, multiagent.TurnBased)
    assert isinstance(make_multiagent_env(connect_four_factory), multiagent.TurnBased)
    with pytest.raises(ValueError, match="connect_four_v3"):
        make_multiagent_env("pettingzoo:connect_four_v2")
    with pytest.raises(ValueError, match="neither a PettingZoo"):
        make_multiagent_env(lambda: object())
    with pytest.raises(ValueError, match=r"nosuchmod:Game.*No module named 'nosuchmod'"):
        make_multiagent_env("nosuchmod:Game")
    with pytest.raises(ValueError, match=r"a league plays a multi-agent game.*--env"):
        make_multiagent_env("CartPole-v1")
    real = multiagent.importlib.import_module

    def no_spiel(name, *a):
        if name == "pyspiel":
            raise ImportError("No module named 'pyspiel'")
        return real(name, *a)

    monkeypatch.setattr(multiagent.importlib, "import_module", no_spiel)
    with pytest.raises(ValueError, match=r"distrl\[games\]"):
        make_multiagent_env("openspiel:kuhn_poker")


def test_an_unknown_openspiel_game_is_one_line_with_close_names(capfd):
    with pytest.raises(ValueError) as err:
        make_multiagent_env("openspiel:kuhn_pokr")
    message = str(err.value)
    assert "Did you mean kuhn_poker" in message and len(message.splitlines()) == 1
    assert "leduc_poker" not in capfd.readouterr().err  # no list of every game printed


def connect_four_factory():
    from pettingzoo.classic import connect_four_v3

    return connect_four_v3.env()
