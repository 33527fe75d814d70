"""The LSTM's auxiliary next-observation loss (ModelConfig.lstm_next_obs_loss): its value
against a loop over each sequence's consecutive steps, where its gradient goes, and the
head's place in the network."""

import dataclasses
import itertools

import gymnasium as gym
import numpy as np
import pytest
import torch

from distrl import ModelConfig
from distrl.core.sequences import unroll_rows
from distrl.core.types import PPOBatch
from distrl.envs.memory_tasks import StatelessCartPole
from distrl.models.recurrent import RecurrentActorCritic
from distrl.ppo.config import PPOHyperparams
from distrl.ppo.env_runner import EnvRunner
from distrl.ppo.loss import minibatch_loss, ppo_loss

MODEL = ModelConfig(use_lstm=True, lstm_cell_size=8, hiddens=(), lstm_head_hiddens=(16,),
                    max_seq_len=5, lstm_next_obs_loss=0.5)


def sampled_batch(model=MODEL, steps=40, seed=0):
    runner = EnvRunner(StatelessCartPole, 3, model, 0.99, 0.95, seed)
    torch.manual_seed(seed)
    return runner.model, PPOBatch.from_rollout(runner.sample(steps))


def loop_reference(model, batch, seqs=None):
    """Each sequence (of ``seqs``; default all) alone, from its stored state; every pair
    of consecutive steps in it: the head's guess from the LSTM's output and action at t
    against obs[t+1] - obs[t], standardized per dimension over all pairs."""
    starts = [*torch.nonzero(batch.sequences.starts).squeeze(1).tolist(), len(batch)]
    inputs, targets = [], []
    for s, (begin, end) in enumerate(itertools.pairwise(starts)):
        if seqs is not None and s not in seqs:
            continue
        rows = torch.arange(begin, end)[:, None]
        state = batch.sequences.state_in[s:s + 1]
        _, _, features = model.unroll(batch.obs[rows], (state[:, 0], state[:, 1]),
                                      batch.prev_actions[rows], batch.prev_rewards[rows])
        for t in range(end - begin - 1):
            action = np.eye(2)[int(batch.actions[begin + t])]
            inputs.append(np.concatenate([features[t, 0].numpy(), action]))
            targets.append((batch.obs[begin + t + 1] - batch.obs[begin + t]).numpy())
    targets = np.array(targets)
    targets = (targets - targets.mean(0)) / (targets.std(0, ddof=1) + 1e-6)
    w, b = model.next_obs.weight.detach().numpy(), model.next_obs.bias.detach().numpy()
    guesses = np.array(inputs) @ w.T + b
    return float(((guesses - targets) ** 2).mean()), len(targets)


def test_the_loss_is_the_error_over_consecutive_steps_of_each_sequence():
    model, batch = sampled_batch()
    assert batch.sequences.starts.sum() > 3 * 40 / MODEL.max_seq_len  # episodes cut some
    with torch.no_grad():
        _, _, _, loss = unroll_rows(model, batch, next_obs_loss=True)
        expected, pairs = loop_reference(model, batch)
    assert pairs == len(batch) - int(batch.sequences.starts.sum())
    assert float(loss) == pytest.approx(expected, rel=1e-5)
    # The same over a minibatch of sequences (every other one), padded to its longest.
    chosen = torch.arange(0, int(batch.sequences.starts.sum()), 2)
    with torch.no_grad():
        _, _, _, part = unroll_rows(model, batch, chosen, next_obs_loss=True)
        expected_part, _ = loop_reference(model, batch, set(chosen.tolist()))
    assert float(part) == pytest.approx(expected_part, rel=1e-5)
    assert float(part) != pytest.approx(float(loss), rel=1e-3)
    with torch.no_grad():
        _, _, _, none = unroll_rows(model, batch)
    assert none is None


def test_minibatch_loss_adds_it_weighted_and_it_trains_only_the_policy_lstm_and_head():
    model, batch = sampled_batch()
    model.requires_grad_(True)  # the sampler's copy is frozen
    cfg = PPOHyperparams(minibatch_size=64, num_epochs=1, model=MODEL)
    idx = torch.arange(int(batch.sequences.starts.sum()))
    _, loss, parts = minibatch_loss(model, batch, idx, cfg, 0.0, 0.0)
    with torch.no_grad():
        dist_inputs, values, rows, _ = unroll_rows(model, batch, idx)
        ppo_only, _ = ppo_loss(dist_inputs, values, batch.index(rows), cfg, model.dist, 0.0, 0.0)
    weighted = float(ppo_only) + 0.5 * float(parts["next_obs_loss"])
    assert float(loss.detach()) == pytest.approx(weighted, rel=1e-5)
    _, _, _, aux = unroll_rows(model, batch, idx, next_obs_loss=True)
    aux.backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    assert grads["lstm.weight_ih_l0"].abs().sum() > 0
    assert grads["next_obs.weight"].abs().sum() > 0
    untouched = [n for n in grads if n.startswith(("vf", "pi.")) and grads[n] is not None]
    assert untouched == []  # the critic's LSTM and both heads: the auxiliary task's not


def test_the_head_comes_last_so_other_weights_do_not_change_and_zero_builds_none():
    space, acts = gym.spaces.Box(-1, 1, (2,)), gym.spaces.Discrete(2)
    torch.manual_seed(3)
    with_head = RecurrentActorCritic(space, acts, MODEL).state_dict()
    torch.manual_seed(3)
    plain = RecurrentActorCritic(space, acts, dataclasses.replace(MODEL, lstm_next_obs_loss=0))
    assert plain.next_obs is None
    assert set(with_head) - set(plain.state_dict()) == {"next_obs.weight", "next_obs.bias"}
    for name, value in plain.state_dict().items():
        torch.testing.assert_close(with_head[name], value)
    assert with_head["next_obs.weight"].shape == (2, 8 + 2)  # LSTM output and one-hot action


def test_bad_settings_say_what_to_change():
    for weight in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="lstm_next_obs_loss"):
            dataclasses.replace(MODEL, lstm_next_obs_loss=weight)
    with pytest.raises(ValueError, match="needs use_lstm"):
        ModelConfig(lstm_next_obs_loss=1.0)
    assert MODEL.feedforward().lstm_next_obs_loss == 0.0
    image = gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)
    with pytest.raises(ValueError, match="flat observations"):
        RecurrentActorCritic(image, gym.spaces.Discrete(2),
                             dataclasses.replace(MODEL, conv_filters=((4, 4, 2),)))
