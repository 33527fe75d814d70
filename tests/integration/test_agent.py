"""distrl.PPO(...) and its kin: an object over the same train_* function, whose second
learn() is the function's exact resume, whose save() and load() round-trip the run."""

import numpy as np
import pytest
import torch

import distrl
from distrl import PPOConfig, RunConfig, train_ppo
from distrl.core.checkpoint import Checkpoint

SETTINGS = dict(num_env_runners=0, num_envs_per_env_runner=4, train_batch_size=64,
                minibatch_size=32, num_epochs=2)


def weights(path):
    return Checkpoint(path).tensors("policy", "weights.pt")


def test_learn_twice_is_the_function_run_once_and_save_load_round_trip(tmp_path):
    agent = distrl.PPO("CartPole-v1", lr=1e-3, seed=3, progress=False,
                       logdir=str(tmp_path / "a"), **SETTINGS)
    with pytest.raises(ValueError, match=r"has not trained yet: call \.learn\(env_steps\)"):
        agent.evaluate()
    assert agent.learn(128)["iteration"] == 2
    result = agent.learn(128)
    assert result["iteration"] == 4
    straight = train_ppo(PPOConfig(lr=1e-3, **SETTINGS),
                         RunConfig(env="CartPole-v1", seed=3, max_env_steps=256,
                                   logdir=str(tmp_path / "b"), progress=False))
    a, b = weights(tmp_path / "a"), weights(tmp_path / "b")
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0)
    assert agent.env_steps == straight["env/steps_total"] >= 256
    returns = agent.evaluate(episodes=3)
    assert returns == distrl.evaluate(str(tmp_path / "b"), episodes=3)

    saved = agent.save(tmp_path / "saved")
    with pytest.raises(ValueError, match="exists: save to a new path"):
        agent.save(saved)
    loaded = distrl.PPO.load(saved)
    assert loaded.env_steps == agent.env_steps and loaded.config.lr == 1e-3 and loaded.run.seed == 3
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    assert np.array_equal(loaded.policy.act(obs), agent.policy.act(obs))
    assert loaded.learn(64)["iteration"] == 5  # goes on in the saved folder
    assert Checkpoint(saved).manifest["iteration"] == 5
    assert Checkpoint(tmp_path / "a").manifest["iteration"] == 4
    with pytest.raises(ValueError, match=r"holds a 'ppo' run: load it with distrl\.PPO\.load"):
        distrl.Apex.load(saved)


def test_a_setting_that_is_no_field_is_named_with_the_closest():
    with pytest.raises(TypeError, match=r"^PPO\(\) has no setting 'lrr' \(did you mean 'lr'\?\)"):
        distrl.PPO("CartPole-v1", lrr=1e-3)
    assert distrl.APPO("CartPole-v1", num_epochs=1, max_time_s=5.0).config.num_epochs == 1
