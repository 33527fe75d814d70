"""Every run ends with a verdict: a run shorter than its evaluation interval (or whose
last iteration falls between two evaluations) is evaluated once more at its end, and
that evaluation is the last row of metrics.jsonl and in the returned metrics."""

import dataclasses
from pathlib import Path

import pytest

pytest.importorskip("pettingzoo")

from distrl import PPOConfig, RunConfig
from distrl.alphazero.train import train_alphazero
from distrl.core.metrics import read_jsonl
from distrl.league.train import train_league
from distrl.ppo.train import train_ppo
from tests.integration.test_league_train import SMALL as LEAGUE
from tests.unit.test_alphazero import SMALL as ALPHAZERO

GAME = "pettingzoo:connect_four_v3"


def _rows(out):
    return read_jsonl(Path(out["logdir"]) / "metrics.jsonl")


def test_a_league_shorter_than_its_evaluation_interval_ends_evaluated(tmp_path):
    config = dataclasses.replace(LEAGUE, league_eval_interval=100)
    out = train_league(config, RunConfig(env=GAME, max_env_steps=800, logdir=str(tmp_path),
                                         progress=False))
    rows, n = _rows(out), out["iteration"]
    assert n >= 2 and [r["iteration"] for r in rows] == [*range(1, n + 1), n]
    last = rows[-1]
    assert last["final_evaluation"] is True
    assert last["env/steps_total"] == out["env/steps_total"] >= 800
    assert 0 <= last["league/win_rate/main_0_vs_random"] <= 1
    assert out["league/win_rate/main_0_vs_random"] == last["league/win_rate/main_0_vs_random"]
    assert not any("league/win_rate/main_0_vs_random" in r for r in rows[:-1])


def test_a_league_evaluated_at_its_last_iteration_is_not_evaluated_twice(tmp_path):
    config = dataclasses.replace(LEAGUE, league_eval_interval=1)
    out = train_league(config, RunConfig(env=GAME, max_env_steps=128, logdir=str(tmp_path),
                                         progress=False))
    rows, n = _rows(out), out["iteration"]
    assert [r["iteration"] for r in rows] == list(range(1, n + 1))
    assert "league/win_rate/main_0_vs_random" in rows[-1]
    assert "final_evaluation" not in rows[-1]


def test_alphazero_between_two_evaluations_ends_evaluated(tmp_path):
    config = dataclasses.replace(ALPHAZERO, eval_interval=4)
    out = train_alphazero(config, RunConfig(env=GAME, max_env_steps=160,
                                            logdir=str(tmp_path), progress=False))
    rows = _rows(out)
    assert out["iteration"] == 5 and [r["iteration"] for r in rows] == [1, 2, 3, 4, 5, 5]
    assert "eval/win_rate_vs_random" in rows[3] and rows[-1]["final_evaluation"] is True
    assert 0 <= rows[-1]["eval/win_rate_vs_random"] <= 1
    assert out["eval/win_rate_vs_random"] == rows[-1]["eval/win_rate_vs_random"]


def test_a_single_agent_run_with_evaluation_on_ends_evaluated(tmp_path):
    config = PPOConfig(num_env_runners=0, num_envs_per_env_runner=2,
                       rollout_fragment_length=32, train_batch_size=64, minibatch_size=32,
                       num_epochs=1)
    run = RunConfig(env="CartPole-v1", max_env_steps=128, logdir=str(tmp_path / "a"),
                    progress=False, evaluation_interval=3, evaluation_duration=2)
    out = train_ppo(config, run)
    rows = _rows(out)
    assert [r["iteration"] for r in rows] == [1, 2, 2]
    assert rows[-1]["final_evaluation"] is True and rows[-1]["eval/episodes"] == 2
    assert out["eval/episode_return_mean"] == rows[-1]["eval/episode_return_mean"] > 0
    # Evaluation off: nothing is played at the end.
    off = train_ppo(config, dataclasses.replace(run, evaluation_interval=0,
                                                logdir=str(tmp_path / "b")))
    assert [r["iteration"] for r in _rows(off)] == [1, 2]
    assert "eval/episode_return_mean" not in off
