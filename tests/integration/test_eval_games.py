"""distrl.evaluate() and `distrl eval` of game runs (AlphaZero, league): win, draw and
loss rates against random, and runs trained on a factory env, which only the trusted
resume state holds, evaluated when the env is given again."""

import pytest

pytest.importorskip("pettingzoo")
pytest.importorskip("pyspiel")

from distrl import AlphaZeroConfig, LeagueConfig, LeagueRules, RunConfig, evaluate
from distrl.alphazero.train import train_alphazero
from distrl.cli import main
from distrl.games.games import OpenSpielEnv
from distrl.league.train import train_league
from tests.fakes import WeightedRockPaperScissors

TINY = AlphaZeroConfig(num_games=8, num_simulations=4, moves_per_iteration=32,
                       learning_starts=64, train_batch_size=32, eval_interval=0)
LEAGUE = LeagueConfig(rules=LeagueRules(num_main_exploiters=0, num_league_exploiters=0),
                      train_batch_size=64, minibatch_size=32, num_epochs=1, num_envs=2,
                      league_eval_interval=0)


def tic_tac_toe():
    return OpenSpielEnv("tic_tac_toe")


def run(tmp_path, env):
    return RunConfig(env=env, max_env_steps=64, logdir=str(tmp_path), progress=False)


def assert_rates(out, games):
    assert out["policy"] == "main_0" and out["opponent"] == "random"
    assert out["games"] == games
    assert out["win_rate"] + out["draw_rate"] + out["loss_rate"] == pytest.approx(1.0)
    # Wilson's interval: the p with (p_hat - p)^2 = z^2 p (1 - p) / n, a quadratic's roots.
    p_hat, z2 = out["win_rate"], 1.96**2
    a, b, c = 1 + z2 / games, -(2 * p_hat + z2 / games), p_hat**2
    root = (b * b - 4 * a * c) ** 0.5
    assert out["win_rate_ci95"] == pytest.approx([(-b - root) / (2 * a), (-b + root) / (2 * a)])
    assert out["win_rate_ci95"][0] <= p_hat <= out["win_rate_ci95"][1]


def assert_asks_for_the_env(checkpoint):
    """`distrl eval` says in one line to pass the factory; evaluate() says the same."""
    with pytest.raises(SystemExit) as err:
        main(["eval", checkpoint, "--episodes", "2"])
    message = str(err.value)
    assert message.startswith("distrl: error: the run trained on a factory env")
    assert "env=<factory>" in message and "\n" not in message
    with pytest.raises(ValueError, match=r"factory env .*env=<factory>"):
        evaluate(checkpoint, episodes=2)


def test_evaluate_plays_an_alphazero_run_against_random(tmp_path):
    """Not episodes of a gymnasium env: the game's env is no gymnasium id."""
    out = train_alphazero(TINY, run(tmp_path, "pettingzoo:connect_four_v3"))
    assert_rates(evaluate(out["checkpoint"], episodes=4), 4)


def test_an_alphazero_run_on_a_factory_env_is_evaluated_with_the_env_given(tmp_path):
    out = train_alphazero(TINY, run(tmp_path, tic_tac_toe))
    assert_asks_for_the_env(out["checkpoint"])
    assert_rates(evaluate(out["checkpoint"], episodes=4, env=tic_tac_toe), 4)
    assert_rates(evaluate(out["checkpoint"], episodes=3, env="openspiel:tic_tac_toe",
                          explore=True), 3)


def test_a_league_on_a_factory_env_is_evaluated_with_the_env_given(tmp_path):
    out = train_league(LEAGUE, run(tmp_path, WeightedRockPaperScissors))
    assert_asks_for_the_env(out["checkpoint"])
    assert_rates(evaluate(out["checkpoint"], episodes=4, env=WeightedRockPaperScissors), 4)
    given_by_name = evaluate(out["checkpoint"], episodes=4,
                             env="tests.fakes:WeightedRockPaperScissors")
    assert_rates(given_by_name, 4)
