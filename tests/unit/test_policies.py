"""What plays a seat: bots, OpenSpiel's MCTS; and evaluation games that differ: random
openings and distinct-game counts."""

import numpy as np
import pytest
import torch

pytest.importorskip("pettingzoo")
pytest.importorskip("pyspiel")

from distrl.games.games import make_multiagent_env, policy_obs_space, split_obs
from distrl.games.policies import RANDOM, LocalPolicy, RandomPolicy, ScriptedPolicy, make_bot
from distrl.games.scoring import play_matches, win_draw_loss
from distrl.models.actor_critic import ActorCritic
from distrl.models.config import ModelConfig
from tests.fakes import first_legal_move


def test_scripted_policy_allows_only_its_choice():
    def last_legal(obs, mask):
        return int(np.flatnonzero(mask)[-1])

    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [0, 1, 1]], dtype=torch.bool)
    logits, values = ScriptedPolicy(last_legal).act(torch.zeros(3, 2), mask)
    assert logits.argmax(-1).tolist() == [1, 0, 2]
    assert (logits.max(-1).values == 0).all() and (logits < -1e8).sum() == 6
    assert values.tolist() == [0, 0, 0]
    with pytest.raises(ValueError, match="not legal"):
        ScriptedPolicy(lambda obs, mask: 2).act(torch.zeros(1, 2), mask[:1])


@pytest.mark.parametrize("game", ["connect_four_v3", "tictactoe_v3"])
def test_an_openspiel_twin_follows_every_pettingzoo_game(game):
    """Random games in PettingZoo, replayed in the twin after every move: the same legal
    moves at every turn, and the same final returns (so MCTS searches the real game)."""
    env = make_multiagent_env(f"pettingzoo:{game}")
    rng = np.random.default_rng(0)
    for episode in range(20):
        obs, _ = env.reset(seed=episode)
        totals = dict.fromkeys(env.possible_agents, 0.0)
        while obs:
            (agent, o), = obs.items()
            state = env.openspiel_state()
            mask = split_obs(o)[1]
            assert state.legal_actions() == np.flatnonzero(mask).tolist()
            assert state.current_player() == env.possible_agents.index(agent)
            obs, rewards, *_ = env.step({agent: int(rng.choice(np.flatnonzero(mask)))})
            for a, r in rewards.items():
                totals[a] += r
        state = env.openspiel_state()
        assert state.is_terminal()
        assert state.returns() == [totals[a] for a in env.possible_agents]
    env.close()


@pytest.mark.parametrize(("moves", "best"), [([0, 3, 1, 4], 2), ([0, 4, 8, 3], 5)],
                         ids=["win", "block"])
def test_mcts_takes_the_win_and_blocks_the_loss_in_a_pettingzoo_game(moves, best):
    """Tic-tac-toe squares of PettingZoo: after 0 3 1 4 square 2 wins; after 0 4 8 3
    only square 5 stops the other player's line."""
    env = make_multiagent_env("pettingzoo:tictactoe_v3")
    obs, _ = env.reset(seed=0)
    for move in moves:
        obs = env.step({next(iter(obs)): move})[0]
    o, mask = split_obs(next(iter(obs.values())))
    logits, _ = make_bot("mcts:200", env).act(torch.as_tensor(o[None]),
                                              torch.as_tensor(mask[None]).bool(), [env])
    assert logits.argmax().item() == best


def test_mcts_beats_random_at_tic_tac_toe():
    env = make_multiagent_env("pettingzoo:tictactoe_v3")
    env.reset(seed=0)
    policies = {"mcts:100": make_bot("mcts:100", env), RANDOM: RandomPolicy(9)}
    results = play_matches("pettingzoo:tictactoe_v3", {}, policies, set(), "mcts:100",
                           RANDOM, 20)
    win, draw, loss = win_draw_loss(results, "mcts:100", RANDOM)
    # OpenSpiel's own loop: 2 losses in 400 games with these settings.
    assert win >= 0.8 and loss <= 0.1, (win, draw, loss)


def test_mcts_is_refused_where_it_cannot_play_fairly():
    kuhn = make_multiagent_env("openspiel:kuhn_poker")
    kuhn.reset(seed=0)
    with pytest.raises(ValueError, match="hides information"):
        make_bot("mcts:10", kuhn)
    with pytest.raises(ValueError, match=r"give mcts:<simulations>"):
        make_bot("mcts:many", kuhn)
    tic = make_multiagent_env("openspiel:tic_tac_toe")
    tic.reset(seed=0)
    assert make_bot("mcts:10", tic).name == "mcts:10"  # an OpenSpiel game's own state
    from tests.fakes import ShortWinLongDraw

    with pytest.raises(ValueError, match="has none"):
        make_bot("mcts:10", ShortWinLongDraw())


def greedy_net():
    env = make_multiagent_env("pettingzoo:connect_four_v3")
    torch.manual_seed(0)
    module = ActorCritic(policy_obs_space(env.observation_space("player_0")),
                         env.action_space("player_0"), ModelConfig(hiddens=(16,)))
    return LocalPolicy(module.requires_grad_(False))


@pytest.mark.parametrize("opening", [0, 2])
def test_random_openings_make_a_greedy_policy_play_different_games(opening):
    """A greedy net against a deterministic bot plays one game per seat, however many
    are asked for; with two random opening moves the games differ."""
    policies = {"net": greedy_net(), "bot": ScriptedPolicy(first_legal_move, "bot")}
    results = play_matches("pettingzoo:connect_four_v3", {}, policies, {"net"}, "net", "bot",
                           40, opening_moves=opening)
    distinct = len({r.history for r in results})
    assert len(results) == 40
    if opening == 0:
        assert distinct == 2
    else:
        assert distinct >= 20, distinct
        openings = {r.history[:5] for r in results}  # reset obs, then 2 x (move, obs)
        assert len(openings) >= 15


def test_each_random_opening_is_played_once_from_each_seat():
    """Paired games: the k-th game of each seat opens with the same random moves, so an
    opening's luck cancels between the seats."""
    policies = {"net": greedy_net(), "bot": ScriptedPolicy(first_legal_move, "bot")}
    results = play_matches("pettingzoo:connect_four_v3", {}, policies, {"net"}, "net", "bot",
                           40, opening_moves=2)
    seats = [[r for r in results if r.policies["player_0"] == first] for first in ("net", "bot")]
    assert len(seats[0]) == len(seats[1]) == 20
    openings = [[r.history[:5] for r in games] for games in seats]  # obs, 2 x (move, obs)
    assert openings[0] == openings[1]
    assert len(set(openings[0])) >= 15


def test_an_opening_that_ends_every_game_is_refused():
    with pytest.raises(ValueError, match="random opening moves end every game"):
        play_matches("pettingzoo:tictactoe_v3", {}, {RANDOM: RandomPolicy(9)}, set(), RANDOM,
                     RANDOM, 2, opening_moves=9)
