import gymnasium as gym
import numpy as np
import torch

from distrl import ModelConfig, PPOConfig, RunConfig, train_ppo
from distrl.envs import make_atari, make_vec_env
from distrl.sampling import EnvLoop


class BigRewards(gym.Env):
    """Reward 5 per step, episodes of 3 steps."""

    observation_space = gym.spaces.Box(0, 255, (2, 2), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros((2, 2), np.uint8), {}

    def step(self, action):
        self.t += 1
        return np.full((2, 2), self.t, np.uint8), 5.0, self.t == 3, False, {}


def clipped_big_rewards():
    # The same stack as make_atari's top: statistics below, clipping above.
    env = gym.wrappers.RecordEpisodeStatistics(BigRewards())
    return gym.wrappers.TransformReward(env, lambda r: float(np.sign(r)))


class Random:
    def act(self, obs, generator):
        return torch.zeros(obs.shape[0], dtype=torch.int64), {}


def test_learning_sees_clipped_rewards_while_episode_returns_are_the_raw_score():
    loop = EnvLoop(clipped_big_rewards, 2, seed=0)
    traj = loop.collect(Random(), 8, None)
    assert set(traj.rewards[traj.valid].tolist()) == {1.0}
    assert traj.episode_returns.tolist() == [15.0] * len(traj.episode_returns)
    assert len(traj.episode_returns) >= 4
    assert traj.obs.dtype == np.uint8  # frames stay uint8


def test_make_atari_stacks_gray_84x84_frames_and_clips_above_the_statistics():
    env = make_atari("ALE/Pong-v5")
    assert isinstance(env, gym.wrappers.TransformReward)
    assert isinstance(env.env, gym.wrappers.RecordEpisodeStatistics)
    assert env.observation_space.shape == (4, 84, 84)
    assert not isinstance(make_atari("ALE/Pong-v5", clip_rewards=False),
                          gym.wrappers.TransformReward)
    vec = make_vec_env("ALE/Pong-v5", 2)
    obs, _ = vec.reset(seed=0)
    assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
    vec.close()


def test_ppo_runs_on_pong_with_the_conv_encoder(tmp_path):
    torch.set_num_threads(1)
    config = PPOConfig(num_env_runners=0, num_envs_per_env_runner=2, rollout_fragment_length=16,
                       train_batch_size=32, minibatch_size=16, num_epochs=1,
                       model=ModelConfig(hiddens=(64,), activation="relu"))
    result = train_ppo(config, RunConfig(env="ALE/Pong-v5", max_env_steps=64,
                                         logdir=str(tmp_path), progress=False))
    assert result["env/steps_total"] == 64
    assert np.isfinite(result["learner/policy_loss"])


def test_a_missing_mujoco_names_the_extra_to_install():
    import subprocess
    import sys

    code = ("import sys; sys.modules['mujoco'] = None\n"
            "from distrl.envs import make_vec_env\n"
            "try:\n    make_vec_env('Hopper-v5', 1)\n"
            "except ValueError as err:\n    print(err)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "pip install 'distrl[mujoco]'" in out.stdout, out.stdout + out.stderr
