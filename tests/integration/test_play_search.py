"""Search at play time: a game run's network inside PUCT (games.players.SearchPlayer)
takes wins and blocks losses its bare greedy policy misses; `distrl eval --search` says
which player searched; what cannot search is refused in one line."""

import json

import numpy as np
import pytest
import torch

pytest.importorskip("pettingzoo")
pytest.importorskip("pyspiel")

import pyspiel

from distrl.cli import main
from distrl.games.games import make_multiagent_env, policy_obs_space
from distrl.games.players import SearchPlayer, searched
from distrl.games.policies import LocalPolicy
from distrl.models.config import ModelConfig
from distrl.models.distributions import mask_logits
from distrl.models.recurrent import actor_critic
from tests.integration.tiny_game_runs import tiny_runs


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return tiny_runs(tmp_path_factory.mktemp("runs"), ("az_pz", "league_pz", "ppo"))


def tic_tac_toe(moves):
    state = pyspiel.load_game("tic_tac_toe").new_initial_state()
    for m in moves:
        state.apply_action(m)
    return state


def untrained_network(env):
    agent = env.possible_agents[0]
    torch.manual_seed(0)
    return LocalPolicy(actor_critic(policy_obs_space(env.observation_space(agent)),
                                    env.action_space(agent), ModelConfig(hiddens=(16,))))


def greedy_move(policy, env, state):
    obs = torch.as_tensor(env.observe_states([state]), dtype=torch.float32)
    logits, _ = policy(obs)
    mask = torch.as_tensor(np.array(state.legal_actions_mask(), bool))[None]
    return int(mask_logits(logits, mask).argmax())


@pytest.mark.parametrize(("moves", "best"), [([0, 3, 1, 4], 2), ([0, 4, 1], 2)],
                         ids=["win", "block"])
def test_search_takes_the_win_and_blocks_the_loss_the_bare_network_misses(moves, best):
    """x on 0 and 1 with o on 3 and 4: x wins on 2. x on 0 and 1, o to move: only 2
    stops x. An untrained network's greedy move is elsewhere; with 100 simulations its
    search finds the move, and values the win for the player to move."""
    env = make_multiagent_env("openspiel:tic_tac_toe")
    net = untrained_network(env)
    state = tic_tac_toe(moves)
    assert greedy_move(net, env, state) != best  # what the network alone plays
    (move, value), = SearchPlayer(net, 100).choose([state], env.observe_states)
    assert move == best
    if moves == [0, 3, 1, 4]:
        assert value > 0.5


@pytest.mark.parametrize("game", ["tictactoe_v3", "connect_four_v3"])
def test_pettingzoo_games_are_searched_as_the_env_shows_them(game):
    """The network sees, in every searched twin position, PettingZoo's own observation."""
    env = make_multiagent_env(f"pettingzoo:{game}")
    rng = np.random.default_rng(0)
    for game in range(20):
        obs, _ = env.reset(seed=game)
        while obs and env.agents:
            (agent,) = obs
            seen = env.observe_states([env.openspiel_state()])[0]
            np.testing.assert_array_equal(seen, obs[agent]["observation"])
            move = int(rng.choice(np.flatnonzero(obs[agent]["action_mask"])))
            obs, *_ = env.step({agent: move})


def test_temperature_draws_from_the_visit_counts():
    env = make_multiagent_env("openspiel:tic_tac_toe")
    net = untrained_network(env)
    opening = [tic_tac_toe([])] * 8
    greedy = {m for m, _ in SearchPlayer(net, 20).choose(opening, env.observe_states)}
    drawn = {m for m, _ in SearchPlayer(net, 20, temperature=1.0).choose(
        opening, env.observe_states)}
    assert len(greedy) == 1 and len(drawn) > 1


def test_what_cannot_search_is_refused_in_one_line():
    kuhn = make_multiagent_env("openspiel:kuhn_poker")
    with pytest.raises(ValueError, match="perfect information without chance"):
        searched(untrained_network(kuhn), kuhn, 10)


def test_eval_search_names_the_searching_player(runs, capsys):
    main(["eval", runs["az_pz"], "--search", "4", "--episodes", "4", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["policy"] == "main_0" and out["games"] == 4
    assert out["policy_search"] == 4 and out["opponent_search"] == 0
    main(["eval", runs["az_pz"], "--episodes", "2", "--json"])  # no search: 0
    assert json.loads(capsys.readouterr().out)["policy_search"] == 0
    main(["eval", runs["league_pz"], "--search", "3", "--episodes", "2"])  # a league's heads
    assert "main_0 (search 3) vs random over 2 games" in capsys.readouterr().out


def test_search_of_a_single_agent_run_is_refused_in_one_line(runs):
    with pytest.raises(SystemExit) as err:
        main(["eval", runs["ppo"], "--search", "8"])
    message = str(err.value.code)
    assert "holds a 'ppo' run" in message and "--search" in message
    assert "\n" not in message


@pytest.mark.parametrize("reuse", [True, False])
def test_an_evaluation_searches_afresh_each_move_when_asked(runs, monkeypatch, reuse):
    """The ladder gives distrl's search OpenSpiel MCTS's rule (no subtree kept between
    moves): search_reuse reaches the searching player."""
    import distrl.games.scoring as scoring

    made = []

    def spy(*args, **kwargs):
        made.append(searched(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(scoring, "searched", spy)
    scoring.evaluate_league(runs["az_pz"], games=2, search=4, search_reuse=reuse)
    assert [player.reuse for player in made] == [reuse]
