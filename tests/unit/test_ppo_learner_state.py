"""What PPO's driver keeps between iterations (ppo.train.LearnerSide) comes back whole
from what a checkpoint holds of it: the network, Adam's moments, the minibatch
generator, the adaptive KL coefficient and the reward-scaling statistics. No env, no
run: the checkpoint is the three reads LearnerSide.create makes."""

import json
from pathlib import Path
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import torch

from distrl.core.config import RunConfig
from distrl.core.loop import Start
from distrl.core.types import PPOBatch
from distrl.models.filters import RunningStats
from distrl.ppo.config import PPOConfig
from distrl.ppo.train import LearnerSide
from tests.fakes import random_rollout

SPACES = gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2)
CONFIG = PPOConfig(num_env_runners=0, num_envs_per_env_runner=1, train_batch_size=64,
                   minibatch_size=32, num_epochs=1, lr=1e-2, kl_target=1e-4)
CPU = torch.device("cpu")


def start(ckpt=None) -> Start:
    return Start("ppo", CONFIG, RunConfig(env="CartPole-v1", seed=0), Path("unused"), ckpt)


def update(side: LearnerSide, seed: int) -> dict:
    rollout = random_rollout(64, seed)
    returns = np.random.default_rng(seed).normal(5.0, 2.0, (64, 1))
    rollout.stats = {"returns": RunningStats.of(returns)}
    batch = PPOBatch.from_rollout(rollout, CPU, CONFIG.advantage_stats())
    return side.update(CONFIG, batch, rollout, 0.0)


def saved(side: LearnerSide) -> SimpleNamespace:
    """What a checkpoint gives back of ``side`` (its algorithm state through JSON)."""
    algo = json.loads(json.dumps(side.algo_state()))
    learner = side.learner_state()
    weights = {k: v.clone() for k, v in side.learner.model.state_dict().items()}
    return SimpleNamespace(algo_state=lambda: algo, learner_state=lambda: learner,
                           policy_weights=lambda: weights)


def test_a_resumed_learner_side_goes_on_as_the_saved_one():
    torch.manual_seed(0)
    side = LearnerSide.create(start(), *SPACES, CPU)
    for seed in range(2):
        update(side, seed)
    assert side.kl_coeff != CONFIG.kl_coeff  # it adapted: a resume must not start over
    resumed = LearnerSide.create(start(saved(side)), *SPACES, CPU)
    assert resumed.kl_coeff == side.kl_coeff
    assert resumed.returns.count == side.returns.count == 128
    np.testing.assert_allclose(resumed.returns.mean, side.returns.mean)
    np.testing.assert_allclose(resumed.returns.m2, side.returns.m2)
    # The next update is the very same: weights, Adam's moments, minibatch order.
    assert update(resumed, 2) == update(side, 2)
    for a, b in zip(side.learner.model.parameters(), resumed.learner.model.parameters(),
                    strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
