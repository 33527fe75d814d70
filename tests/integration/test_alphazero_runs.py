"""AlphaZero runs in process: the replay saved, resume, lr schedule, evaluations."""

import json
import subprocess
import sys
from dataclasses import replace

import pytest
import torch

pytest.importorskip("pettingzoo")
pytest.importorskip("pyspiel")

from distrl.alphazero.config import AlphaZeroConfig
from distrl.alphazero.train import CALL_EVALUATIONS, AlphaZeroRun, train_alphazero
from distrl.core.checkpoint import Checkpoint
from distrl.core.config import RunConfig
from distrl.core.loop import start_run
from tests.unit.test_alphazero import SMALL


def test_a_run_trains_saves_and_resumes_with_its_replay(tmp_path):
    run = RunConfig(env="pettingzoo:connect_four_v3", max_env_steps=256,
                    logdir=str(tmp_path / "a"), progress=False)
    out = train_alphazero(SMALL, run)
    assert out["iteration"] == 8 and out["env/steps_total"] == 256
    assert "learner/policy_loss" in out and 0 <= out["eval/win_rate_vs_random"] <= 1
    ckpt = Checkpoint(out["checkpoint"])
    saved = ckpt.tensors("replay", "state.pt")
    assert len(saved["outcome"]) == out["replay/size"] > 64
    assert saved["obs"].dtype == torch.int8  # the env's planes, not float32 copies
    # mirror: every position of every finished game stored twice (fewer than 100 games,
    # so the length mean covers them all).
    played = round(out["env/episode_len_mean"] * out["env/episodes_total"])
    assert out["replay/size"] == 2 * played
    resumed = train_alphazero(replace(SMALL, lr=1e-5),
                              RunConfig(resume=out["checkpoint"], max_env_steps=288,
                                        logdir=str(tmp_path / "b"), progress=False))
    assert resumed["iteration"] == 9 and resumed["replay/size"] >= out["replay/size"]
    # A new lr on resume trains (and is saved): the optimizer's state was restored.
    optimizer = Checkpoint(resumed["checkpoint"]).learner_state()["learner"]["optimizer"]
    assert [g["lr"] for g in optimizer["param_groups"]] == [1e-5]
    # The saved network plays `distrl eval` against a search bot.
    cli = subprocess.run([sys.executable, "-m", "distrl", "eval", out["checkpoint"],
                          "--opponent", "mcts:5", "--episodes", "4", "--json"],
                         capture_output=True, text=True, check=True)
    result = json.loads(cli.stdout)
    assert result["policy"] == "main_0" and result["games"] == 4


class Recording:
    """Ray self-players stand-in: records each call's rounds and plays nothing."""

    size = 2

    def __init__(self):
        self.calls: list[int] = []

    def play(self, weights, rounds):
        assert weights is not None
        self.calls.append(rounds)
        return []

    def metrics(self):
        return {}

    def close(self):
        pass


def test_a_large_iteration_is_played_in_calls_of_bounded_work(tmp_path, monkeypatch):
    """10,000 moves of 2 games on 2 workers owe 2,500 rounds: they come in calls of at most
    CALL_EVALUATIONS leaf evaluations (one call of all 2,500 would outlast any timeout
    sized for a healthy call)."""
    players = Recording()
    monkeypatch.setattr(AlphaZeroRun, "_players", lambda self: (players, 0.0))
    config = AlphaZeroConfig(num_games=2, num_simulations=50, moves_per_iteration=10_000,
                             num_workers=2, eval_interval=0)
    out = train_alphazero(config, RunConfig(env="pettingzoo:connect_four_v3",
                                            max_env_steps=10_000, logdir=str(tmp_path),
                                            progress=False))
    assert out["iteration"] == 1 and out["env/steps_total"] == 10_000
    assert sum(players.calls) == 2_500 and len(players.calls) > 1
    assert max(players.calls) * 2 * 50 <= CALL_EVALUATIONS


def test_a_resumed_run_starts_from_the_saved_network_and_optimizer(tmp_path):
    config = AlphaZeroConfig(num_games=4, num_simulations=2, moves_per_iteration=16,
                             learning_starts=8, train_batch_size=8, eval_interval=0)
    out = train_alphazero(config, RunConfig(env="openspiel:tic_tac_toe", max_env_steps=32,
                                            logdir=str(tmp_path), progress=False))
    assert "learner/policy_loss" in out  # steps were taken: the weights left their init
    saved = Checkpoint(out["checkpoint"]).learner_state()["learner"]
    start = start_run("alphazero", config, RunConfig(resume=out["checkpoint"], max_env_steps=64,
                                                     progress=False),
                      check_env=lambda env: None)
    resumed = AlphaZeroRun(start)
    try:
        state = resumed.learner.get_state()
    finally:
        resumed.close()
    for name, tensor in saved["model"].items():
        assert torch.equal(state["model"][name], tensor), name
    moments = state["optimizer"]["state"]
    assert moments and all(torch.equal(moments[k]["exp_avg"], v["exp_avg"])
                           for k, v in saved["optimizer"]["state"].items())


def test_the_learning_rate_follows_its_schedule_over_the_moves_made(tmp_path):
    config = AlphaZeroConfig(num_games=4, num_simulations=2, moves_per_iteration=16,
                             learning_starts=8, train_batch_size=8, eval_interval=0,
                             lr_schedule=((0, 1e-3), (64, 1e-4)))
    train_alphazero(config, RunConfig(env="openspiel:tic_tac_toe", max_env_steps=64,
                                      logdir=str(tmp_path), progress=False))
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    # The last steps of each iteration take the rate at its end: 1e-3 less 0.9e-3 per 64
    # moves. No steps in the first (4 moves a game: no game has ended, the replay is empty).
    lrs = {r["env/steps_total"]: r["learner/lr"] for r in rows if "learner/lr" in r}
    assert lrs == pytest.approx({32: 5.5e-4, 48: 3.25e-4, 64: 1e-4})


def test_a_run_with_averaged_positions_saves_and_resumes_its_sums(tmp_path):
    config = AlphaZeroConfig(num_games=4, num_simulations=2, moves_per_iteration=16,
                             learning_starts=8, train_batch_size=8, eval_interval=0,
                             average_positions=True)
    out = train_alphazero(config, RunConfig(env="openspiel:tic_tac_toe", max_env_steps=32,
                                            logdir=str(tmp_path), progress=False))
    saved = Checkpoint(out["checkpoint"]).tensors("replay", "state.pt")
    # Every held row counted once; the empty board opens every game, so rows repeat.
    assert int(saved["means"]["count"].sum()) == len(saved["outcome"]) == out["replay/size"]
    assert int(saved["means"]["count"].max()) > 1
    start = start_run("alphazero", config, RunConfig(resume=out["checkpoint"], max_env_steps=64,
                                                     progress=False),
                      check_env=lambda env: None)
    resumed = AlphaZeroRun(start)
    resumed.close()
    assert torch.equal(torch.from_numpy(resumed.replay.means.count), saved["means"]["count"])


def test_evaluations_against_a_bot_also_play_random_and_the_result_keeps_them(tmp_path):
    run = RunConfig(env="pettingzoo:connect_four_v3", max_env_steps=96,
                    logdir=str(tmp_path), progress=False)
    out = train_alphazero(replace(SMALL, eval_opponent="mcts:2"), run)
    assert out["iteration"] == 3  # evaluated at 2 only
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert "eval/win_rate_vs_random" in rows[1] and "eval/win_rate_vs_mcts:2" in rows[1]
    assert "eval/win_rate_vs_random" not in rows[2]
    for key in ("eval/win_rate_vs_random", "eval/win_rate_vs_mcts:2"):
        assert out[key] == rows[1][key]
