"""Observation normalization and reward scaling through a PPO run, its checkpoint and evaluation."""

import numpy as np
import torch

from distrl import ModelConfig, PPOConfig, RunConfig, train_ppo
from distrl.core.checkpoint import Checkpoint
from distrl.core.evaluation import load_policy
from distrl.models.filters import RunningStats


def test_ppo_filter_life_cycle_checkpoint_and_eval(tmp_path):
    torch.set_num_threads(1)
    config = PPOConfig(num_env_runners=0, num_envs_per_env_runner=4, train_batch_size=256,
                       minibatch_size=128, num_epochs=1, normalize_rewards=True,
                       model=ModelConfig(observation_filter="MeanStdFilter"))
    result = train_ppo(config, RunConfig(env="Pendulum-v1", max_env_steps=1_024,
                                         logdir=str(tmp_path), progress=False))
    # Pendulum's rewards are ~-1..-16 per step: scaled ones would give returns near -10.
    assert result["env/episode_return_mean"] < -300
    assert result["learner/reward_std"] > 1.0
    ckpt = Checkpoint(result["checkpoint"])
    weights = ckpt.tensors("policy", "weights.pt")  # weights_only=True
    assert float(weights["obs_count"]) == 1_024  # 4 iterations x 256 valid samples
    assert weights["obs_mean"].abs().sum() > 0
    model = load_policy(ckpt)
    assert model.filtered and torch.equal(model.obs_mean, weights["obs_mean"])
    # Evaluation acts through the same normalization: outputs change with the stats.
    obs = torch.tensor([[0.5, -0.5, 2.0]])
    before = model(obs)[0]
    model.update_obs_filter(RunningStats.of(np.full((1000, 3), 5.0)))
    assert not torch.allclose(before, model(obs)[0])
    saved = ckpt.json("progress", "progress.json")["algo"]["returns"]
    assert saved["count"] == 1_024
