"""A scaled policy drives sampling, a PPO run, evaluation, load_policy and export."""

from typing import ClassVar

import gymnasium as gym
import numpy as np
import torch

from distrl.models.config import ModelConfig


class Recorded(gym.Wrapper):
    """Pendulum (torque bounds +-2) keeping every observation acted on and its action."""

    seen: ClassVar[list] = []

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.obs = obs
        return obs, info

    def step(self, action):
        Recorded.seen.append((self.obs, np.asarray(action, np.float32).copy()))
        self.obs, *rest = self.env.step(action)
        return (self.obs, *rest)


def recorded_pendulum() -> gym.Env:
    return Recorded(gym.make("Pendulum-v1", max_episode_steps=8))


def test_a_scaled_policy_drives_sampling_evaluation_load_and_export(tmp_path):
    from distrl import PPOConfig, RunConfig, load_policy, train_ppo
    from distrl.core.evaluation import run_episodes
    from distrl.export import export_policy
    from distrl.ppo.env_runner import EnvRunner

    model = ModelConfig(hiddens=(8,), action_scaling=True, log_std_init=1.0)
    runner = EnvRunner(recorded_pendulum, 2, model, 0.99, 0.95, seed=0)
    Recorded.seen.clear()
    rollout = runner.sample(4)
    sampled = rollout.actions.reshape(4, 2, 1)  # unclipped, in [-1, 1] units (std e)
    env_got = np.stack([a for _, a in Recorded.seen]).reshape(4, 2, 1)
    np.testing.assert_allclose(env_got, 2.0 * np.clip(sampled, -1, 1), atol=1e-6)
    assert (np.abs(sampled) > 1).any()  # some were clipped before the mapping

    config = PPOConfig(num_env_runners=0, num_envs_per_env_runner=2, train_batch_size=32,
                       minibatch_size=32, num_epochs=1, use_kl_loss=False, model=model)
    run = tmp_path / "run"
    train_ppo(config, RunConfig(env="Pendulum-v1", max_env_steps=64, seed=0, logdir=str(run),
                                progress=False))
    Recorded.seen.clear()
    run_episodes(run, episodes=1, seed=0, env=recorded_pendulum)
    obs = torch.as_tensor(np.stack([o for o, _ in Recorded.seen]))
    evaluated = np.stack([a for _, a in Recorded.seen])
    reloaded = load_policy(run).model
    with torch.no_grad():
        mean = reloaded(obs)[0][:, :1].numpy()
    np.testing.assert_allclose(evaluated, 2.0 * np.clip(mean, -1, 1), atol=1e-5)
    np.testing.assert_allclose(load_policy(run).act(obs.numpy()), evaluated, atol=1e-5)
    exported = torch.jit.load(str(export_policy(run, "torchscript", tmp_path / "p.pt")))
    np.testing.assert_allclose(exported(obs).numpy(), evaluated, atol=1e-5)
    assert np.abs(evaluated).max() > 1e-3  # 2 x mean and the mean itself differ
