"""A searched AlphaZero run explores with its own PUCT constant (the one its self-play
used), wherever it searches at play time: `distrl eval --search`, run:PATH@search=N and
`distrl play --search`; a league run, which saved none, keeps the default."""

import itertools

import pytest
import torch

pytest.importorskip("pettingzoo")
pytest.importorskip("pyspiel")

from distrl import AlphaZeroConfig, ModelConfig, RunConfig, train_alphazero
from distrl.games import players
from distrl.games.games import make_multiagent_env
from distrl.games.human import play_game
from distrl.games.opponents import parse_opponent
from distrl.games.players import PUCT_C, run_player
from distrl.games.scoring import evaluate_league
from tests.integration.tiny_game_runs import tiny_runs

OWN_C = 4.25


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("runs")
    torch.set_num_threads(1)
    az = AlphaZeroConfig(num_games=2, num_simulations=2, moves_per_iteration=8,
                         learning_starts=8, train_batch_size=8, eval_interval=0,
                         puct_c=OWN_C, model=ModelConfig(hiddens=(16,)))
    train_alphazero(az, RunConfig(env="openspiel:tic_tac_toe", max_env_steps=8,
                                  logdir=str(tmp / "az"), progress=False))
    return {"az": str(tmp / "az"), **tiny_runs(tmp, ("league_pz",))}


@pytest.fixture
def constants(monkeypatch):
    """The exploration constant of every search played at play time."""
    seen = set()
    real = players.Trees.search

    def spy(trees, evaluate, simulations, c):
        seen.add(c)
        return real(trees, evaluate, simulations, c)

    monkeypatch.setattr(players.Trees, "search", spy)
    return seen


def test_eval_search_uses_the_runs_own_constant(runs, constants):
    evaluate_league(runs["az"], games=2, search=3, nash_conv_max_states=0)
    assert constants == {OWN_C}


def test_a_searching_run_opponent_uses_its_own_constant(runs, constants):
    env = make_multiagent_env("openspiel:tic_tac_toe")
    player = run_player(parse_opponent(f"run:{runs['az']}@search=3"), env)
    assert player.c == OWN_C
    league = make_multiagent_env("pettingzoo:tictactoe_v3")
    assert run_player(parse_opponent(f"run:{runs['league_pz']}@search=3"), league).c == PUCT_C


def test_play_search_uses_the_runs_own_constant(runs, constants):
    moves = itertools.cycle("012345678")  # illegal ones are answered and the next read
    play_game(runs["az"], search=3, first=True, ask=lambda _: next(moves))
    assert constants == {OWN_C}


def test_a_league_searches_with_the_default(runs, constants):
    evaluate_league(runs["league_pz"], games=2, search=3, nash_conv_max_states=0)
    assert constants == {PUCT_C}
