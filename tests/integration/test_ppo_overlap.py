"""PPO with overlap in process: runners sample the next batch with the weights of one
update ago while the learner trains; the batch in flight survives a checkpoint."""

import copy
import dataclasses
import json

import pytest
import torch

import distrl.ppo.train as ppo_train
from distrl import PPOConfig, RunConfig, train_ppo
from distrl.core.checkpoint import Checkpoint
from distrl.ppo.env_runner import EnvRunner, LocalRunnerGroup
from distrl.ppo.train import Rounds

SMALL = PPOConfig(train_batch_size=64, minibatch_size=32, num_epochs=2, num_env_runners=0,
                  num_envs_per_env_runner=4)
OVERLAP = dataclasses.replace(SMALL, overlap=True)


def run(logdir, **kw):
    return RunConfig(logdir=str(logdir), progress=False, **kw)


def rows(logdir):
    return [json.loads(x) for x in (logdir / "metrics.jsonl").read_text().splitlines()]


def record_updates(monkeypatch):
    """(the learner's weights before the update, the batch) of every ppo_update call."""
    seen, update = [], ppo_train.ppo_update

    def recording(learner, batch, *args, **kwargs):
        seen.append((copy.deepcopy(learner.model.state_dict()), batch))
        return update(learner, batch, *args, **kwargs)

    monkeypatch.setattr(ppo_train, "ppo_update", recording)
    return seen


def test_policy_lag_is_one_update_with_overlap_and_none_without(tmp_path):
    train_ppo(SMALL, run(tmp_path / "off", max_env_steps=256))
    train_ppo(OVERLAP, run(tmp_path / "on", max_env_steps=256))
    assert [r["learner/policy_lag"] for r in rows(tmp_path / "off")] == [0, 0, 0, 0]
    # The first batch is sampled before any update: there is nothing older to act with.
    assert [r["learner/policy_lag"] for r in rows(tmp_path / "on")] == [0, 1, 1, 1]


def test_each_batch_was_sampled_with_the_weights_of_the_iteration_before(tmp_path,
                                                                          monkeypatch):
    versions = []
    concat = ppo_train.Rollout.concat
    monkeypatch.setattr(ppo_train.Rollout, "concat", staticmethod(
        lambda parts: versions.append(parts[0].weights_version) or concat(parts)))
    seen = record_updates(monkeypatch)
    train_ppo(OVERLAP, run(tmp_path, max_env_steps=320))
    assert versions == [0, 0, 1, 2, 3]
    # The actions' log-probs are those of the weights one update old, not the current.
    model = ppo_train.actor_critic(*EnvRunner("CartPole-v1", 1, SMALL.model, 0.99, 0.95,
                                              0).spaces(), SMALL.model)
    for i in range(1, len(seen)):
        batch = seen[i][1]
        for weights, acted in ((seen[i - 1][0], True), (seen[i][0], False)):
            model.load_state_dict(weights)
            with torch.no_grad():
                dist_inputs, _ = model(batch.obs)
            assert torch.allclose(dist_inputs, batch.dist_inputs, atol=1e-6) == acted, i


def test_resume_trains_the_saved_batch_first_and_continues_as_one_run(tmp_path, monkeypatch):
    straight = train_ppo(OVERLAP, run(tmp_path / "a", max_env_steps=320))
    first = train_ppo(OVERLAP, run(tmp_path / "b", max_env_steps=128))
    pending = Checkpoint(first["checkpoint"]).trusted("ppo", "pending.pkl")["rollouts"]
    assert [p.weights_version for p in pending] == [1]  # launched before the last update
    seen = record_updates(monkeypatch)
    resumed = train_ppo(OVERLAP, run(tmp_path / "b", max_env_steps=320,
                                     resume=str(tmp_path / "b")))
    torch.testing.assert_close(seen[0][1].obs, torch.as_tensor(pending[0].obs), rtol=0, atol=0)
    assert resumed["iteration"] == straight["iteration"] == 5
    assert resumed["env/steps_total"] == straight["env/steps_total"]
    a = Checkpoint(tmp_path / "a").policy_weights()
    b = Checkpoint(tmp_path / "b").policy_weights()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0)


def test_a_run_without_overlap_saves_no_pending_batch(tmp_path):
    out = train_ppo(SMALL, run(tmp_path, max_env_steps=128))
    with pytest.raises(FileNotFoundError):
        Checkpoint(out["checkpoint"]).trusted("ppo", "pending.pkl")


def test_an_error_in_the_sampling_thread_reaches_the_learner():
    runner = EnvRunner("CartPole-v1", 2, SMALL.model, 0.99, 0.95, seed=0)
    rounds = Rounds(LocalRunnerGroup(runner, threaded=True), overlap=True)
    runner.sample = lambda *a, **k: (_ for _ in ()).throw(ValueError("env exploded"))
    with pytest.raises(ValueError, match="env exploded"):
        rounds.next_batch({}, 0, 4, 1.0)
    rounds.runners.close()
