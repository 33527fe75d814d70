"""PPO on Pong in process with the conv encoder."""

import numpy as np
import torch

from distrl import ModelConfig, PPOConfig, RunConfig, train_ppo

torch.set_num_threads(1)


def test_ppo_runs_on_pong_with_the_conv_encoder(tmp_path):
    config = PPOConfig(num_env_runners=0, num_envs_per_env_runner=2, rollout_fragment_length=16,
                       train_batch_size=32, minibatch_size=16, num_epochs=1,
                       model=ModelConfig(hiddens=(64,), activation="relu"))
    result = train_ppo(config, RunConfig(env="ALE/Pong-v5", max_env_steps=64,
                                         logdir=str(tmp_path), progress=False))
    assert result["env/steps_total"] == 64
    assert np.isfinite(result["learner/policy_loss"])
