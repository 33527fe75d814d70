"""gSDE runs: one trains, saves and evaluates; one resumes exactly."""

import numpy as np
import torch

from distrl.models.config import ModelConfig


def test_a_gsde_run_trains_saves_and_evaluates(tmp_path):
    from distrl import PPOConfig, RunConfig, train_ppo
    from distrl.core.evaluation import run_episodes

    config = PPOConfig(num_env_runners=0, num_envs_per_env_runner=2, train_batch_size=128,
                       minibatch_size=64, num_epochs=2, use_kl_loss=False,
                       model=ModelConfig(hiddens=(16,), sde_sample_freq=4))
    result = train_ppo(config, RunConfig(env="Pendulum-v1", max_env_steps=256, seed=0,
                                         logdir=str(tmp_path / "run"), progress=False))
    assert result["env/steps_total"] == 256 and np.isfinite(result["learner/policy_loss"])
    episodes = run_episodes(result["checkpoint"], episodes=1, seed=0)
    assert len(episodes.returns) == 1 and np.isfinite(episodes.returns[0])


def test_a_gsde_run_resumes_exactly(tmp_path):
    from distrl import PPOConfig, RunConfig, train_ppo
    from distrl.core.checkpoint import Checkpoint

    # 3 steps an env per iteration, the map held for 4: the cut falls mid-hold.
    config = PPOConfig(num_env_runners=0, num_envs_per_env_runner=2, train_batch_size=6,
                       minibatch_size=6, num_epochs=1, use_kl_loss=False,
                       model=ModelConfig(hiddens=(8,), sde_sample_freq=4))

    def run(name, steps, resume=False):
        logdir = str(tmp_path / name)
        return train_ppo(config, RunConfig(env="Pendulum-v1", max_env_steps=steps, seed=3,
                                           logdir=logdir, progress=False,
                                           resume=logdir if resume else None))

    run("a", 12)
    run("b", 6)
    run("b", 12, resume=True)
    a = Checkpoint(tmp_path / "a").tensors("policy", "weights.pt")
    b = Checkpoint(tmp_path / "b").tensors("policy", "weights.pt")
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0)
