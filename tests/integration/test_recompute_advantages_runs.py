"""PPO's recompute_advantages changes what a run trains."""

import numpy as np
import torch

from distrl.models.config import ModelConfig
from distrl.ppo.config import PPOConfig


def test_recompute_advantages_reaches_the_update(tmp_path):
    from distrl import RunConfig, train_ppo
    from distrl.core.checkpoint import Checkpoint

    def weights(recompute: bool) -> dict:
        config = PPOConfig(num_env_runners=0, num_envs_per_env_runner=2, train_batch_size=64,
                           minibatch_size=32, num_epochs=3, use_kl_loss=False,
                           recompute_advantages=recompute, model=ModelConfig(hiddens=(8,)))
        logdir = tmp_path / str(recompute)
        result = train_ppo(config, RunConfig(env="CartPole-v1", max_env_steps=128, seed=0,
                                             logdir=str(logdir), progress=False))
        assert np.isfinite(result["learner/policy_loss"])
        return Checkpoint(logdir).tensors("policy", "weights.pt")

    plain, recomputed = weights(False), weights(True)
    assert any(not torch.equal(plain[k], recomputed[k]) for k in plain)
