"""Recurrent policies: sequences cut at episode ends and max_seq_len, padding that reaches
no loss term, state reset at episode starts, stored states that replay sampling."""

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch

from distrl import ModelConfig
from distrl.core.sequences import padded_index, sequence_starts, unroll_rows
from distrl.core.types import PPOBatch
from distrl.envs.memory_tasks import RepeatFirst, StatelessCartPole
from distrl.models.recurrent import RecurrentActorCritic
from distrl.ppo.config import PPOHyperparams
from distrl.ppo.env_runner import EnvRunner
from distrl.ppo.loss import _forward, ppo_loss

MODEL = ModelConfig(use_lstm=True, lstm_cell_size=8, hiddens=(16,),
                    lstm_use_prev_action=True, lstm_use_prev_reward=True, max_seq_len=3)


def test_sequences_start_at_fragments_episodes_and_every_max_seq_len():
    first = np.array([[0, 1], [0, 0], [1, 0], [0, 0], [0, 0], [0, 1], [0, 0]], bool)
    starts = sequence_starts(first, max_seq_len=3)
    # env 0: row 0 (fragment), row 2 (episode), row 5 (3 after 2); env 1: rows 0, 3, 5.
    assert np.flatnonzero(starts[:, 0]).tolist() == [0, 2, 5]
    assert np.flatnonzero(starts[:, 1]).tolist() == [0, 3, 5]


def test_padded_index_lists_each_sequence_and_masks_the_rest():
    starts = torch.tensor([1, 0, 0, 1, 1, 0], dtype=torch.bool)
    rows, mask = padded_index(starts)
    assert rows.shape == (3, 3)
    assert rows[mask].tolist() == [0, 3, 4, 1, 5, 2]  # time-major over the columns
    assert mask.tolist() == [[True, True, True], [True, False, True], [True, False, False]]


def sample(env, steps=12, num_envs=3, seed=0, model=MODEL):
    runner = EnvRunner(env, num_envs, model, 0.99, 0.95, seed)
    torch.manual_seed(seed)
    return runner, runner.sample(steps)


def assert_replays(runner, rollout):
    """Unrolling the rollout's sequences from their stored states gives the outputs the
    sampler acted with; returns the rows unrolled."""
    batch = PPOBatch.from_rollout(rollout)
    with torch.no_grad():
        dist_inputs, values, rows, _ = unroll_rows(runner.model, batch)
    torch.testing.assert_close(dist_inputs, batch.dist_inputs[rows], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(values, batch.values[rows], rtol=1e-5, atol=1e-5)
    return rows


SB3_LAYOUT = {"hiddens": (), "lstm_head_hiddens": (16,)}
"""SB3's RecurrentPPO layout: the LSTM reads the observation, hidden layers after it."""


@pytest.mark.parametrize("shared", [False, True])
@pytest.mark.parametrize("layout", [{}, SB3_LAYOUT], ids=["hiddens_first", "lstm_first"])
def test_stored_states_and_sequences_replay_what_the_sampler_computed(shared, layout):
    """Unrolling the rollout's sequences from their stored states, with the stored
    previous actions and rewards, gives the very outputs the sampler acted with: the
    states are the sampler's, cut where episodes start, never carried over a reset.
    Without shared layers the critic's LSTM state travels beside the policy's."""
    model = dataclasses.replace(MODEL, vf_share_layers=shared, **layout)
    runner, rollout = sample(lambda: RepeatFirst(length=4), steps=14, model=model)
    assert rollout.state_in.shape[2] == 8 * (1 if shared else 2)
    assert rollout.seq_starts.sum() > 3 * 3  # episodes of 4 and max_seq_len 3 cut often
    rows = assert_replays(runner, rollout)
    assert sorted(rows.tolist()) == list(range(len(rollout.actions)))  # every row once


def test_the_sb3_layout_feeds_the_observation_to_the_lstm_and_its_output_to_hidden_layers():
    env = RepeatFirst(length=4)
    net = RecurrentActorCritic(env.observation_space, env.action_space,
                               dataclasses.replace(MODEL, **SB3_LAYOUT))
    extras = env.action_space.n + 1  # the previous action one-hot and reward
    assert not net.pi_trunk and not net.vf_trunk
    assert net.lstm.input_size == net.vf_lstm.input_size == env.observation_space.shape[0] + extras
    assert [m.in_features for m in net.pi] == [8, 16] and [m.in_features for m in net.vf] == [8, 16]
    obs = torch.as_tensor(env.observation_space.sample())[None].float()
    zero = torch.zeros(1)
    dist_inputs, values, _ = net.step(obs, net.initial_state(1), zero, zero)
    prev = torch.tensor([[1.0, 0.0, 0.0]])  # action 0 one-hot, reward 0; a zero state
    h = net.lstm(torch.cat([obs, prev], -1))[0]
    expected = net.pi[1](torch.tanh(net.pi[0](h)))  # MODEL's activation
    torch.testing.assert_close(dist_inputs, expected)
    assert values.shape == (1,)


def test_continuous_actions_replay_with_the_previous_action_fed_back():
    """A Gaussian policy (Pendulum) with the previous action and reward as LSTM inputs:
    the stored previous actions are the actions of the step before, zero at a start."""
    runner, rollout = sample("Pendulum-v1", steps=9, num_envs=2)
    assert rollout.prev_actions.shape == (18, 1)
    for env in range(2):  # env-major rows: each env's 9 steps in time order
        rows = slice(9 * env, 9 * env + 9)
        np.testing.assert_array_equal(rollout.prev_actions[rows][1:], rollout.actions[rows][:-1])
        assert rollout.prev_actions[rows][0] == 0
    assert_replays(runner, rollout)


def test_the_state_is_zero_at_every_episode_start_and_carried_otherwise():
    _, rollout = sample(lambda: RepeatFirst(length=4), steps=14)
    starts, states = rollout.seq_starts, rollout.state_in
    # RepeatFirst's first observation shows the cue: those rows start episodes.
    episode_start = (rollout.obs[:, 0] != 0)[starts]
    assert episode_start.any() and (~episode_start).any()
    assert np.all(states[episode_start] == 0)
    assert np.all(np.abs(states[~episode_start]).sum(axis=(1, 2)) > 0)


def test_padding_reaches_no_loss_term():
    """Outputs and loss on padded sequences equal those of each sequence stepped alone
    (no padding at all), and garbage in what padded steps read changes nothing."""
    runner, rollout = sample(StatelessCartPole, steps=10)
    batch = PPOBatch.from_rollout(rollout)
    cfg = PPOHyperparams(model=MODEL)
    model, chosen = runner.model, torch.arange(1, 5)
    with torch.no_grad():
        dist_inputs, values, rows, _ = unroll_rows(model, batch, chosen)
        # Naive reference: each chosen sequence stepped alone from its stored state.
        all_rows, mask = padded_index(batch.sequences.starts)
        assert (~mask[:, chosen]).any()  # there is padding among them
        ref = {}
        for s in chosen.tolist():
            state = (batch.sequences.state_in[s, 0][None], batch.sequences.state_in[s, 1][None])
            for r in all_rows[:, s][mask[:, s]].tolist():
                d, v, state = model.step(batch.obs[r][None], state,
                                         batch.prev_actions[r][None], batch.prev_rewards[r][None])
                ref[r] = (d[0], v[0])
        assert sorted(ref) == sorted(rows.tolist())
        ref_inputs = torch.stack([ref[r][0] for r in rows.tolist()])
        ref_values = torch.stack([ref[r][1] for r in rows.tolist()])
        torch.testing.assert_close(dist_inputs, ref_inputs, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(values, ref_values, rtol=1e-5, atol=1e-5)
        mb, fwd_inputs, fwd_values, _ = _forward(model, batch, chosen)
        loss, _ = ppo_loss(fwd_inputs, fwd_values, mb, cfg, model.dist, 0.2, 0.01)
        ref_loss, _ = ppo_loss(ref_inputs, ref_values, batch.index(rows), cfg, model.dist,
                               0.2, 0.01)
        torch.testing.assert_close(loss, ref_loss, rtol=1e-5, atol=1e-6)
        # Padded steps read row 0 (sequence 0's, not chosen): garbage there changes nothing.
        batch.obs = batch.obs.clone()
        batch.obs[0] = 1e6
        again, values_again, _, _ = unroll_rows(model, batch, chosen)
        torch.testing.assert_close(again, dist_inputs)
        torch.testing.assert_close(values_again, values)


def test_a_recurrent_policy_refuses_a_stateless_call_and_ape_x_refuses_it():
    model = RecurrentActorCritic(gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(2), MODEL)
    with pytest.raises(TypeError, match="state"):
        model(torch.zeros(1, 2))
    from distrl import ApexConfig

    with pytest.raises(ValueError, match="R2D2"):
        ApexConfig(model=MODEL)
    with pytest.raises(ValueError, match="max_seq_len"):
        ModelConfig(use_lstm=True, max_seq_len=0)


@pytest.mark.parametrize("shared", [True, False])
def test_forget_bias_sets_the_forget_gate_of_every_lstm_and_nothing_else(shared):
    space, acts = gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(2)
    cfg = dataclasses.replace(MODEL, vf_share_layers=shared, lstm_forget_bias=1.0)
    model = RecurrentActorCritic(space, acts, cfg)
    default = RecurrentActorCritic(space, acts, dataclasses.replace(cfg, lstm_forget_bias=None))
    n, bound = cfg.lstm_cell_size, 1 / np.sqrt(cfg.lstm_cell_size)  # torch's uniform init
    lstms = [m for m in (model.lstm, model.vf_lstm) if m is not None]
    assert len(lstms) == (1 if shared else 2)
    for lstm in lstms:
        # The gate sees bias_ih + bias_hh; gates in torch's order (input, forget, cell, output).
        bias = (lstm.bias_ih_l0 + lstm.bias_hh_l0).detach()
        torch.testing.assert_close(bias[n:2 * n], torch.ones(n))
        others = torch.cat([bias[:n], bias[2 * n:]])
        assert others.abs().max() <= 2 * bound and others.std() > 0
    default_forget = (default.lstm.bias_ih_l0 + default.lstm.bias_hh_l0)[n:2 * n]
    assert default_forget.abs().max() <= 2 * bound
    with pytest.raises(ValueError, match="lstm_forget_bias"):
        ModelConfig(use_lstm=True, lstm_forget_bias=float("nan"))
