"""Tiny saved game runs (a few seconds each, in process) for the tests of play-time
search, saved runs as opponents and `distrl play`."""

from pathlib import Path

import torch

from distrl import (
    AlphaZeroConfig,
    LeagueConfig,
    LeagueRules,
    ModelConfig,
    PPOConfig,
    RunConfig,
    train_alphazero,
    train_league,
    train_ppo,
)

PZ = "pettingzoo:tictactoe_v3"
SPIEL = "openspiel:tic_tac_toe"


def _run(tmp: Path, name: str, env: str, steps: int) -> RunConfig:
    return RunConfig(env=env, max_env_steps=steps, logdir=str(tmp / name), progress=False)


def tiny_runs(tmp: Path, names: tuple[str, ...]) -> dict[str, str]:
    """name -> logdir of each named run: az_pz / az_os (AlphaZero on PettingZoo's and
    OpenSpiel's tic-tac-toe), league_pz (a league on PettingZoo's), ppo (CartPole)."""
    torch.set_num_threads(1)
    small = ModelConfig(hiddens=(16,))
    az = AlphaZeroConfig(num_games=2, num_simulations=2, moves_per_iteration=8,
                         learning_starts=8, train_batch_size=8, eval_interval=0, model=small)
    league = LeagueConfig(rules=LeagueRules(num_main_exploiters=0, num_league_exploiters=0),
                          train_batch_size=32, minibatch_size=32, num_epochs=1, num_envs=2,
                          league_eval_interval=0, model=small)
    train = {
        "az_pz": lambda: train_alphazero(az, _run(tmp, "az_pz", PZ, 8)),
        "az_os": lambda: train_alphazero(az, _run(tmp, "az_os", SPIEL, 8)),
        "league_pz": lambda: train_league(league, _run(tmp, "league_pz", PZ, 32)),
        "ppo": lambda: train_ppo(PPOConfig(num_env_runners=0, num_envs_per_env_runner=2,
                                           train_batch_size=64, minibatch_size=64,
                                           num_epochs=1, model=small),
                                 _run(tmp, "ppo", "CartPole-v1", 64)),
    }
    for name in names:
        train[name]()
    return {name: str(tmp / name) for name in names}
