"""EnvLoop: any Policy drives it; env actions are clipped / shifted; NEXT_STEP is checked."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from distrl.core.sampling import EnvLoop
from distrl.envs.make import make_vec_env
from tests.fakes import counting


class RecordingEnv(gym.Env):
    """Records every action it receives; 4-step episodes, reward 1."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def __init__(self, action_space):
        self.action_space = action_space
        self.received = []

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.received.append(np.array(action).copy())
        self.t += 1
        return np.zeros(1, np.float32), 1.0, self.t >= 4, False, {}


class FixedPolicy:
    """A Policy that is no network: always the same actions, one extra."""

    def __init__(self, actions):
        self.actions = torch.as_tensor(actions)

    def act(self, obs, generator, context=None):
        n = obs.shape[0]
        return self.actions.expand(n, *self.actions.shape), {"seen": obs[:, 0] + 1.0}


def loop_over(action_space):
    env = RecordingEnv(action_space)
    loop = EnvLoop(lambda: env, 1, seed=0)
    return loop, loop.envs.envs[0].unwrapped


def test_box_actions_are_clipped_for_the_env_but_kept_unclipped_in_the_batch():
    loop, env = loop_over(gym.spaces.Box(-1.0, 2.0, (2,), np.float32))
    traj = loop.collect(FixedPolicy([-5.0, 7.5]), 3, generator=None)
    np.testing.assert_array_equal(np.stack(env.received), [[-1.0, 2.0]] * 3)
    np.testing.assert_array_equal(traj.actions[:, 0], [[-5.0, 7.5]] * 3)


def test_discrete_actions_are_shifted_by_the_space_start():
    loop, env = loop_over(gym.spaces.Discrete(3, start=-1))
    traj = loop.collect(FixedPolicy(0), 2, generator=None)
    assert [int(a) for a in env.received] == [-1, -1]  # index 0 is the space's first action
    np.testing.assert_array_equal(traj.actions[:, 0], [0, 0])


def test_any_policy_drives_the_loop_and_its_extras_are_stacked():
    loop = EnvLoop(counting(end=3), 2, seed=0)
    traj = loop.collect(FixedPolicy(1), 5, generator=None)
    assert traj.extras["seen"].shape == traj.rewards.shape == traj.valid.shape
    np.testing.assert_array_equal(traj.extras["seen"], traj.obs[..., 0] + 1.0)
    assert traj.first_valid(traj.obs).shape == (10, 1)
    # 3-step episodes: each env's first 5 valid steps see obs 0, 1, 2, 0, 1 (resets skipped).
    per_env = traj.first_valid(traj.obs).reshape(5, 2)  # time-major: [step, env]
    np.testing.assert_array_equal(per_env.T, [[0, 1, 2, 0, 1]] * 2)
    np.testing.assert_array_equal(traj.episode_returns, [3.0, 3.0])


def test_a_vector_env_without_next_step_autoreset_is_refused():
    gym.register("distrl-test/SameStep-v0",
                 entry_point="gymnasium.envs.classic_control:CartPoleEnv",
                 vector_entry_point=lambda num_envs, **kw: gym.vector.SyncVectorEnv(
                     [lambda: gym.make("CartPole-v1")] * num_envs,
                     autoreset_mode=gym.vector.AutoresetMode.SAME_STEP))
    try:
        with pytest.raises(ValueError, match=r"autoreset mode .*(SAME_STEP|SameStep)"):
            make_vec_env("distrl-test/SameStep-v0", 2)
    finally:
        del gym.registry["distrl-test/SameStep-v0"]


class Handle:
    """Stands for a simulator handle whose pickling fails with its own exception kind."""

    def __reduce__(self):
        raise RuntimeError("cannot pickle a simulator handle")


class HandleEnv(RecordingEnv):
    def __init__(self):
        super().__init__(gym.spaces.Discrete(2))
        self.handle = Handle()


def test_envs_that_cannot_be_pickled_resume_fresh_said_once(capsys, monkeypatch):
    from distrl.core import checkpoint

    monkeypatch.setattr(checkpoint, "_UNSAVABLE", set())
    loop = EnvLoop(lambda: HandleEnv(), 2, seed=0)
    assert loop.get_state() is None and loop.get_state() is None
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 1 and "cannot be saved (RuntimeError" in said[0]
    assert said[0].endswith("fresh episodes.")
    loop.set_state(None)  # a resume keeps the loop's own fresh envs
    loop.close()


class ContextPolicy:
    """Acts 0, 1, 2, ... and records the step context the loop gave it."""

    def __init__(self):
        self.seen, self.k = [], 0

    def act(self, obs, generator, context=None):
        self.seen.append((bool(context.first[0]), int(context.prev_actions[0]),
                          float(context.prev_rewards[0])))
        self.k += 1
        return torch.tensor([self.k - 1]), {}


def test_the_step_context_marks_episode_starts_and_the_previous_action_and_reward():
    """4-step episodes under NEXT_STEP autoreset: steps 0-3 play, step 4 is the reset step
    (its action is ignored), step 5 starts the next episode: first again."""
    loop = EnvLoop(lambda: RecordingEnv(gym.spaces.Discrete(10)), 1, seed=0)
    policy = ContextPolicy()
    loop.collect(policy, steps_per_env=6, generator=None)
    assert [first for first, _, _ in policy.seen] == [True, False, False, False, False, True,
                                                      False]
    assert [a for _, a, _ in policy.seen] == [0, 0, 1, 2, 3, 4, 5]
    assert [r for _, _, r in policy.seen] == [0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0]
