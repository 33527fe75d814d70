"""The train loop in-process (no Ray): metrics, checkpoints, exact resume, evaluation."""

import json
from pathlib import Path

import pytest
import torch

from distrl import PPOConfig, RunConfig, evaluate, train_ppo
from distrl.checkpoint import Checkpoint
from tests.fakes import counting

SMALL = PPOConfig(train_batch_size=64, minibatch_size=32, num_epochs=2, num_env_runners=0,
                  num_envs_per_env_runner=4)
REQUIRED = ["iteration", "time/total_s", "env/steps_total", "env/episode_return_mean",
            "env/steps_per_s", "learner/policy_loss", "learner/vf_loss", "learner/entropy",
            "learner/kl", "learner/kl_coeff"]


def run(logdir, **kw):
    return RunConfig(logdir=str(logdir), progress=False, **kw)


def test_metrics_jsonl_and_tensorboard(tmp_path):
    result = train_ppo(SMALL, run(tmp_path, max_env_steps=200))
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == list(range(1, len(rows) + 1))
    assert len(rows) >= 3 and rows[-1]["env/steps_total"] >= 200
    for key in REQUIRED:
        assert key in rows[-1], key
    assert all(r["learner/batch_size"] == 64 for r in rows)
    assert list(tmp_path.glob("events.out.tfevents.*"))
    assert Path(result["checkpoint"], "manifest.json").is_file()


def test_resume_continues_exactly(tmp_path):
    straight = train_ppo(SMALL, run(tmp_path / "a", max_env_steps=256))
    train_ppo(SMALL, run(tmp_path / "b", max_env_steps=128))
    resumed = train_ppo(SMALL, run(tmp_path / "b", max_env_steps=256, resume=str(tmp_path / "b")))
    assert resumed["iteration"] == straight["iteration"]
    assert resumed["env/steps_total"] == straight["env/steps_total"]
    a = Checkpoint(tmp_path / "a").tensors("policy", "weights.pt")
    b = Checkpoint(tmp_path / "b").tensors("policy", "weights.pt")
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0)
    rows = (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(r)["iteration"] for r in rows] == [1, 2, 3, 4]


def test_stop_return_and_evaluate_a_factory_env(tmp_path):
    # Every episode of the counting env returns 3, so the stop return is met at once.
    result = train_ppo(SMALL, run(tmp_path, env=counting(end=3), stop_return=3.0))
    assert result["stopped_by"] == "stop_return" and result["iteration"] == 1
    assert evaluate(result["checkpoint"], episodes=5, env=counting(end=3)) == [3.0] * 5


def test_evaluate_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        evaluate(tmp_path / "missing")
    with pytest.raises(ValueError, match="episodes"):
        evaluate(tmp_path, episodes=0)
