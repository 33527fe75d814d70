import gymnasium as gym
import numpy as np
import pytest
import torch

from distrl.apex.dqn import (
    compact_frames,
    dqn_loss,
    epsilon_ladder,
    initial_priorities,
    low_epsilon_workers,
    nstep_fragment,
)
from distrl.core.sampling import Trajectory

torch.set_num_threads(1)


def loss_inputs(**kw):
    base = dict(
        q=torch.tensor([[1.0, 2.0], [0.5, -1.0]], requires_grad=True),
        q_next_online=torch.tensor([[0.0, 1.0], [3.0, 0.0]]),  # argmax: 1, 0
        q_next_target=torch.tensor([[5.0, 2.0], [1.0, 4.0]]),  # argmax: 0, 1
        actions=torch.tensor([1, 0]), rewards=torch.tensor([1.0, 0.0]),
        discounts=torch.tensor([0.5, 0.0]), is_weights=torch.tensor([1.0, 1.0]))
    return {**base, **kw}


def test_double_q_target_rates_the_online_argmax_with_the_target_net():
    loss, td_abs, _ = dqn_loss(**loss_inputs(), double_q=True)
    # target 0 = 1 + 0.5 * Q_target[0, argmax online = 1] = 1 + 0.5 * 2 = 2; Q = 2
    # target 1 = 0 (terminal); Q = 0.5
    assert td_abs.tolist() == pytest.approx([0.0, 0.5])
    assert loss.item() == pytest.approx((0.0 + 0.5 * 0.5**2) / 2)  # Huber: 0.5 x^2 below 1


def test_plain_target_takes_the_target_nets_max():
    _, td_abs, _ = dqn_loss(**loss_inputs(q_next_online=None), double_q=False)
    assert td_abs.tolist() == pytest.approx([abs(2 - (1 + 0.5 * 5)), 0.5])


def test_huber_is_linear_beyond_delta_and_weighted_by_importance():
    inputs = loss_inputs(rewards=torch.tensor([-2.0, 0.0]), is_weights=torch.tensor([0.5, 2.0]))
    loss, td_abs, _ = dqn_loss(**inputs, double_q=True)
    # td 0 = 2 - (-2 + 1) = 3 -> Huber 3 - 0.5 = 2.5; td 1 = 0.5 -> 0.125
    assert td_abs.tolist() == pytest.approx([3.0, 0.5])
    assert loss.item() == pytest.approx((0.5 * 2.5 + 2.0 * 0.125) / 2)
    loss.backward()
    assert not td_abs.requires_grad
    assert inputs["q"].grad[0, 1].item() == pytest.approx(0.5 * 1.0 / 2)  # clipped slope 1


def test_the_target_carries_no_gradient():
    q_next = torch.tensor([[0.0, 1.0], [3.0, 0.0]], requires_grad=True)
    loss, _, _ = dqn_loss(**loss_inputs(q_next_online=q_next, q_next_target=q_next))
    loss.backward()
    assert q_next.grad is None


def test_double_q_without_the_online_next_q_is_an_error():
    with pytest.raises(ValueError, match="q_next_online"):
        dqn_loss(**loss_inputs(q_next_online=None), double_q=True)


def test_epsilon_ladder():
    assert epsilon_ladder(1).tolist() == [0.4]
    assert epsilon_ladder(2).tolist() == pytest.approx([0.4, 0.4**8])
    eight = epsilon_ladder(8)
    assert eight == pytest.approx([0.4 ** (1 + 7 * i / 7) for i in range(8)])
    assert len(set(eight.tolist())) == 8  # every actor its own (ray#7478)
    assert low_epsilon_workers(eight).tolist() == [7, 6]
    assert low_epsilon_workers(epsilon_ladder(2)).tolist() == [1]


def test_initial_priorities_are_the_actors_td_errors():
    q = np.array([[1.0, 2.0]])
    q_next = np.array([[0.0, 3.0]])
    td = initial_priorities(q, q_next, np.array([0]), np.array([1.0]), np.array([0.5]))
    assert td.tolist() == [abs(1 + 0.5 * 3 - 1)]


class Counter(gym.Env):
    """3x3 uint8 frames that encode a running step count; episodes of random length."""

    observation_space = gym.spaces.Box(0, 255, (3, 3), np.uint8)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.count = getattr(self, "count", 0) + 1
        self.left = int(self.np_random.integers(1, 7))
        return self._frame(), {}

    def step(self, action):
        self.count += 1
        self.left -= 1
        return self._frame(), 1.0, self.left == 0, False, {}

    def _frame(self):
        return np.full((3, 3), self.count % 256, np.uint8)


@pytest.mark.parametrize("padding", ["reset", "zero"])
def test_compact_frames_rebuilds_real_frame_stacks_across_episode_starts(padding):
    env = gym.wrappers.FrameStackObservation(Counter(), 4, padding_type=padding)
    obs, _ = env.reset(seed=0)
    seq, starts = [obs], 1
    for _ in range(60):
        obs, _, term, trunc, _ = env.step(0)
        seq.append(obs)
        if term or trunc:
            obs, _ = env.reset()
            seq.append(obs)
            starts += 1
    seq = np.stack(seq)
    frames, idx = compact_frames(seq, 4)
    assert frames.dtype == np.uint8 and idx.shape == (len(seq), 4)
    assert np.array_equal(frames[idx], seq)
    # One new frame per obs (4 without sharing); a zero-padded start also stores the zeros.
    assert len(frames) == len(seq) + (starts if padding == "zero" else 0)


def test_compact_frames_without_stacking_is_the_identity():
    seq = np.arange(12, dtype=np.float32).reshape(4, 3)
    frames, idx = compact_frames(seq, 1)
    assert np.array_equal(frames, seq) and idx.tolist() == [[0], [1], [2], [3]]
    with pytest.raises(ValueError, match="first axis"):
        compact_frames(np.zeros((4, 3, 2), np.uint8), 4)


def test_nstep_fragment_points_at_the_right_observations():
    T, N = 6, 2
    obs = np.arange(T * N, dtype=np.float32).reshape(T, N, 1) * np.ones(3, np.float32)
    term = np.zeros((T, N), bool)
    term[2, 0] = True
    valid = np.ones((T, N), bool)
    valid[3, 0] = False
    traj = Trajectory(obs=obs, actions=np.ones((T, N), np.int64),
                      rewards=np.ones((T, N), np.float32), terminated=term,
                      truncated=np.zeros((T, N), bool), valid=valid, extras={},
                      next_obs=np.full((N, 3), 99.0, np.float32), episode_returns=np.zeros(0),
                      episode_envs=np.zeros(0, np.int64),
                      episode_lengths=np.zeros(0, np.int64), steps_per_env=T)
    frag, (t, env, k) = nstep_fragment(traj, 0.9, 3, frame_stack=1)
    assert len(frag) == valid.sum()
    rebuilt = frag.frames[frag.obs_idx[:, 0]]
    assert np.array_equal(rebuilt, obs[t, env])
    after = np.concatenate([obs, traj.next_obs[None]])[t + k, env]
    assert np.array_equal(frag.frames[frag.next_idx[:, 0]], after)
    assert after[(t == T - 1) & (env == 1)][0, 0] == 99.0  # the fragment end: next_obs
    assert frag.discounts[(t == 1) & (env == 0)][0] == 0.0  # terminates at step 2


def test_nstep_fragment_over_a_frame_stacked_vector_env_with_next_step_autoreset():
    T, N, S = 30, 3, 4
    envs = gym.vector.SyncVectorEnv(
        [lambda: gym.wrappers.FrameStackObservation(Counter(), S) for _ in range(N)])
    obs, _ = envs.reset(seed=1)
    steps, prev_done = [], np.zeros(N, bool)
    for _ in range(T):
        nxt, r, term, trunc, _ = envs.step(np.zeros(N, np.int64))
        steps.append((obs, r.astype(np.float32), term, trunc, ~prev_done))
        obs, prev_done = nxt, term | trunc
    o, r, term, trunc, valid = (np.stack(x) for x in zip(*steps, strict=True))
    assert (~valid).any() and term.any()  # the fragment crosses episode starts
    traj = Trajectory(obs=o, actions=np.zeros((T, N), np.int64), rewards=r, terminated=term,
                      truncated=trunc, valid=valid, extras={}, next_obs=obs,
                      episode_returns=np.zeros(0), episode_lengths=np.zeros(0, np.int64),
                      episode_envs=np.zeros(0, np.int64), steps_per_env=T)
    frag, (t, env, k) = nstep_fragment(traj, 0.9, 3, frame_stack=S)
    seq = np.concatenate([o, obs[None]])
    assert frag.frames.dtype == np.uint8 and frag.frames.shape[1:] == (3, 3)
    assert np.array_equal(frag.frames[frag.obs_idx], seq[t, env])
    assert np.array_equal(frag.frames[frag.next_idx], seq[t + k, env])
    assert len(frag.frames) == (T + 1) * N  # one frame per obs, not S
    ends = term[np.minimum(t[:, None] + np.arange(3), T - 1), env[:, None]]
    ends &= np.arange(3) < k[:, None]
    assert np.array_equal(frag.discounts == 0, ends.any(1))


def test_a_restored_learner_syncs_its_target_on_the_saved_schedule():
    """Counters and target come back: a learner restored after 64 transitions (target
    synced at 48, every 48) syncs next at 96, as the original does, not at once."""
    from distrl.apex.config import ApexConfig
    from distrl.apex.roles import DQNLearner
    from distrl.core.types import Transitions
    from distrl.models.config import ModelConfig

    cfg = ApexConfig(num_workers=0, train_batch_size=16, capacity=1_000, learning_starts=0,
                     target_network_update_freq=48, model=ModelConfig(hiddens=(8,)))
    spaces = gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2)
    rng = np.random.default_rng(0)

    def batch():
        obs = rng.normal(size=(17, 4)).astype(np.float32)
        return Transitions(obs=obs[:-1], actions=rng.integers(0, 2, 16),
                           rewards=rng.normal(size=16).astype(np.float32), next_obs=obs[1:],
                           discounts=np.full(16, 0.9, np.float32))

    torch.manual_seed(0)
    learner = DQNLearner(*spaces, cfg, torch.device("cpu"))
    ones = np.ones(16, np.float32)
    for _ in range(4):
        learner.update(batch(), ones)
    restored = DQNLearner(*spaces, cfg, torch.device("cpu"))
    restored.set_state(learner.get_state())
    for _ in range(3):  # 64 -> 112 transitions: one more sync, at 96
        b = batch()
        np.testing.assert_array_equal(learner.update(b, ones)[0], restored.update(b, ones)[0])
    assert restored.target_updates == learner.target_updates == 2
    for k, v in learner.target.state_dict().items():
        torch.testing.assert_close(restored.target.state_dict()[k], v, rtol=0, atol=0)
