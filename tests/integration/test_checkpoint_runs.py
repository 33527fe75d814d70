"""A PPO run's checkpoint: its layout, weights-only evaluation, factory envs."""

import json
import os
import pickle

import cloudpickle
import gymnasium as gym
import numpy as np
import pytest
import torch

from distrl import PPOConfig, RunConfig, evaluate, train_ppo
from distrl.core.checkpoint import Checkpoint

SMALL = PPOConfig(train_batch_size=64, minibatch_size=32, num_epochs=1, num_env_runners=0,
                  num_envs_per_env_runner=4)


class ActionIsReward(gym.Env):
    """Reward = the action (0 or 1), 5 steps: the greedy action decides the return."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(2, np.float32), float(action), False, self.t >= 5, {}


def train_small(logdir, **run):
    return train_ppo(SMALL, RunConfig(logdir=str(logdir), progress=False, max_env_steps=64,
                                      **run))


def test_layout_manifest_and_weights_only_files(tmp_path):
    result = train_small(tmp_path)
    ckpt = Checkpoint(result["checkpoint"])
    manifest = json.loads((ckpt.path / "manifest.json").read_text())
    assert manifest["algo"] == "ppo" and manifest["iteration"] == 1
    for component, files in manifest["components"].items():
        for name in files:
            assert (ckpt.path / component / name).is_file()
    for pt in ("policy/weights.pt", "learner/state.pt"):  # tensors and numbers only
        torch.load(ckpt.path / pt, weights_only=True)
    assert sorted(os.listdir(tmp_path / "checkpoint")) == sorted(
        [*manifest["components"], "manifest.json"])


def test_evaluation_unpickles_nothing_and_uses_the_weights(tmp_path, monkeypatch):
    train_small(tmp_path, env=ActionIsReward)
    weights = tmp_path / "checkpoint" / "policy" / "weights.pt"
    state = torch.load(weights, weights_only=True)
    for prefer, expected in ((1, 5.0), (0, 0.0)):  # the last policy layer decides the action
        state["pi.2.weight"].zero_()
        state["pi.2.bias"].copy_(torch.tensor([1.0 - prefer, float(prefer)]))
        torch.save(state, weights)

        def refuse(*args, **kwargs):
            raise AssertionError("evaluation unpickled something")

        def weights_only_load(*args, real_load=torch.load, **kwargs):
            # torch.load(weights_only=False) unpickles through its own Unpickler: every
            # load must ask for tensors only.
            assert kwargs.get("weights_only") is True, "torch.load without weights_only=True"
            return real_load(*args, **kwargs)

        class RefusingUnpickler(pickle.Unpickler):
            def __init__(self, *args, **kwargs):
                refuse()

        with monkeypatch.context() as m:
            m.setattr(pickle, "loads", refuse)
            m.setattr(pickle, "load", refuse)
            m.setattr(pickle, "Unpickler", RefusingUnpickler)
            m.setattr(cloudpickle, "loads", refuse)
            m.setattr(torch, "load", weights_only_load)
            returns = evaluate(tmp_path, episodes=3, env=ActionIsReward)
        assert returns == [expected] * 3


def test_a_factory_env_is_not_in_the_shareable_part(tmp_path):
    train_small(tmp_path, env=ActionIsReward)
    with pytest.raises(ValueError, match=r"factory env .*ActionIsReward.*env=<factory>"):
        evaluate(tmp_path)


def test_stochastic_evaluation_samples_where_greedy_does_not(tmp_path):
    train_small(tmp_path, env=ActionIsReward)
    weights = tmp_path / "checkpoint" / "policy" / "weights.pt"
    state = torch.load(weights, weights_only=True)
    state["pi.2.weight"].zero_()
    state["pi.2.bias"].copy_(torch.tensor([0.1, 0.0]))  # argmax 0, yet nearly 50/50
    torch.save(state, weights)
    assert evaluate(tmp_path, episodes=8, env=ActionIsReward) == [0.0] * 8
    sampled = evaluate(tmp_path, episodes=8, env=ActionIsReward, explore=True)
    assert 0.0 < sum(sampled) / 8 < 5.0  # 40 actions at ~50%: all-0 or all-1 has p ~ 1e-12
