"""APPO runs in process: resume with the saved fragments, the tuned entries, its --help."""

import subprocess
import sys

import numpy as np
import pytest

from distrl.appo.config import APPOConfig
from distrl.core.config import RunConfig
from distrl.models.config import ModelConfig
from distrl.models.filters import return_std, stats_from_json
from tests.fakes import record_appo_batches


def test_resume_trains_first_on_the_fragments_saved_with_the_checkpoint(tmp_path,
                                                                       monkeypatch):
    import distrl.appo.train as appo_train
    from distrl.core.checkpoint import Checkpoint

    cfg = APPOConfig(num_env_runners=0, num_envs_per_env_runner=2, train_batch_size=64,
                     minibatch_size=32, max_queued_fragments=2, normalize_rewards=True,
                     model=ModelConfig(hiddens=(16,)))
    first = appo_train.train_appo(cfg, RunConfig(env="CartPole-v1", max_env_steps=640,
                                                 logdir=str(tmp_path), progress=False))
    ckpt = Checkpoint(first["checkpoint"])
    pending = ckpt.trusted("appo", "pending.pkl")["fragments"]
    assert pending  # sampled ahead while the last update ran
    returns = stats_from_json(ckpt.algo_state()["returns"])  # reward scaling's statistics
    assert 0 < returns.count <= first["env/steps_total"]  # the valid rows trained on
    trained = record_appo_batches(monkeypatch)
    resumed = appo_train.train_appo(cfg, RunConfig(
        resume=str(tmp_path), max_env_steps=first["env/steps_total"] + 1, progress=False))
    assert resumed["iteration"] == first["iteration"] + 1
    assert resumed["learner/reward_std"] == return_std(returns) > 1.0
    np.testing.assert_array_equal(trained[0].obs, pending[0].obs)
    np.testing.assert_array_equal(trained[0].actions, pending[0].actions)
    assert resumed["env/steps_total"] == first["env/steps_total"] + pending[0].env_steps


def test_tuned_pong_entry_builds_and_trains_one_update_on_envpool(tmp_path):
    """The entry as tuned (its conv net, knobs and env), on a tiny batch in process."""
    pytest.importorskip("envpool")
    from dataclasses import replace

    from distrl.appo.train import train_appo
    from distrl.tuned import tuned

    t = tuned("pong", "appo")
    assert t.for_runners(0).fragment_length() * 60 == t.config.train_batch_size
    assert t.config.fragment_length() * t.config.num_envs == t.config.train_batch_size
    config = replace(t.for_runners(0), num_envs_per_env_runner=2, rollout_fragment_length=16,
                     train_batch_size=32, minibatch_size=32)
    result = train_appo(config, RunConfig(env=t.env, max_env_steps=32, device="cpu",
                                          logdir=str(tmp_path), progress=False))
    assert result["iteration"] == 1 and result["env/steps_total"] == 32
    assert np.isfinite(result["learner/policy_loss"])


def test_tuned_hopper_entry_is_ppos_mujoco_recipe_with_learner_side_reward_scaling(tmp_path):
    """The entry takes every PPO knob of the PPO MuJoCo recipe, scales rewards at the
    learner, and trains on Hopper in process."""
    pytest.importorskip("mujoco")
    from dataclasses import fields, replace

    from distrl.appo.train import train_appo
    from distrl.ppo.config import PPOConfig
    from distrl.tuned import MUJOCO_PPO, tuned

    t = tuned("hopper", "appo")
    assert all(getattr(t.config, f.name) == getattr(MUJOCO_PPO, f.name)
               for f in fields(PPOConfig))
    assert t.config.normalize_rewards and t.config.max_queued_fragments == 1
    assert t.config.clip_around == "learner"
    config = replace(t.for_runners(0), train_batch_size=64, minibatch_size=32)
    result = train_appo(config, RunConfig(env=t.env, max_env_steps=128,
                                          logdir=str(tmp_path), progress=False))
    assert result["iteration"] == 2 and result["learner/reward_std"] > 1.0


def test_ppos_overlap_knob_is_refused_and_hidden_for_appo():
    with pytest.raises(ValueError, match="overlap is PPO's knob"):
        APPOConfig(overlap=True)
    out = subprocess.run([sys.executable, "-m", "distrl", "train", "appo", "--help"],
                         capture_output=True, text=True, check=True).stdout
    assert "--overlap" not in out and "--vtrace-clip-rho" in out
    assert "--recompute-advantages" not in out
