"""AlphaZero's Ray self-play workers: they play with the weights they are sent, a dead
worker's share is played by its replacement, and a run trains through them."""

import numpy as np
import pytest

pytest.importorskip("pettingzoo")
pytest.importorskip("pyspiel")

from distrl.alphazero.config import AlphaZeroConfig
from distrl.alphazero.remote import RaySelfPlayers
from distrl.alphazero.self_play import SelfPlayer
from distrl.alphazero.train import train_alphazero
from distrl.core.config import RunConfig
from tests.integration.conftest import kill

ENV = "pettingzoo:connect_four_v3"
# One simulation, no noise, no sampled moves: every move is the network's top prior.
GREEDY = AlphaZeroConfig(num_games=2, num_simulations=1, dirichlet_fraction=0.0,
                         temperature_moves=0)


def favouring(column: int) -> dict[str, np.ndarray]:
    """Weights of a network whose policy is all but certain of ``column``."""
    player = SelfPlayer(ENV, {}, GREEDY, seed=0)
    weights = {k: np.zeros_like(v.numpy()) for k, v in player.model.state_dict().items()}
    bias = next(k for k in weights if weights[k].shape == (7,))  # the policy head's bias
    weights[bias][column] = 20.0
    return weights


def first_moves(games: list[tuple]) -> set[int]:
    return {int(policy[0].argmax()) for _, policy, _, _ in games}


def test_workers_play_with_the_weights_they_are_sent(ray_local):
    """A game lasts at most 42 moves (a full board): 42 rounds end every game a call
    starts; a game in progress when the weights change ends with its old first move
    within 42 rounds, so later calls play 84 and look for the new first move."""
    players = RaySelfPlayers(lambda i, restart: dict(env=ENV, env_config={}, config=GREEDY,
                                                     seed=i), 2, 1, RunConfig())
    try:
        games = players.play(favouring(3), rounds=42)
        assert len(games) >= 4 and first_moves(games) == {3}
        assert 5 in first_moves(players.play(favouring(5), rounds=84))
        kill(players.sup.actors[1])
        assert 2 in first_moves(players.play(favouring(2), rounds=84))
        assert players.metrics() == {"faults/restarts/self_play": 1}
    finally:
        players.close()


def test_a_run_trains_through_ray_workers(ray_local, tmp_path):
    config = AlphaZeroConfig(num_games=2, num_simulations=4, moves_per_iteration=32,
                             learning_starts=32, train_batch_size=32, eval_interval=0,
                             num_workers=2)
    out = train_alphazero(config, RunConfig(env=ENV, max_env_steps=192, logdir=str(tmp_path),
                                            progress=False))
    # 32 moves an iteration: two workers, eight rounds of two games each; 48 moves of
    # each game in all, so every game started first has ended (42 moves at most).
    assert out["iteration"] == 6 and out["env/steps_total"] == 192
    assert out["env/episodes_total"] >= 4 and out["replay/size"] > 0
    assert "learner/policy_loss" in out and out["faults/restarts/self_play"] == 0
