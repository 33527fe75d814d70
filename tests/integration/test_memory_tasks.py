"""The memory tasks against hand-computed cases: what each observation hides, what
RepeatAfter rewards, what a frame stack can see; the tuned recurrent entries build and
run on a user's own env."""

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from distrl.cli import main
from distrl.envs.memory_tasks import PendulumNoVel, RepeatAfter, StatelessCartPole
from distrl.models.recurrent import actor_critic
from distrl.tuned import tuned

ENVMODS = Path(__file__).parents[1] / "envmods"


def test_pendulum_novel_drops_exactly_the_angular_velocity():
    full, novel = gym.make("Pendulum-v1"), PendulumNoVel()
    obs, _ = full.reset(seed=3)
    seen, _ = novel.reset(seed=3)
    assert novel.observation_space.shape == (2,)
    np.testing.assert_array_equal(seen, obs[:2])
    for a in ([2.0], [-1.0], [0.5]):
        obs, r, *_ = full.step(np.array(a, np.float32))
        seen, r_novel, *_ = novel.step(np.array(a, np.float32))
        np.testing.assert_array_equal(seen, obs[:2])
        assert r_novel == r


def play(env: gym.Env, actions: list[int], seed: int = 0):
    """Observations, rewards and dones of ``actions`` from a reset."""
    obs, _ = env.reset(seed=seed)
    seen, rewards, dones = [obs], [], []
    for a in actions:
        obs, r, term, trunc, _ = env.step(a)
        seen.append(obs)
        rewards.append(r)
        dones.append(term or trunc)
    return np.array(seen), rewards, dones


@pytest.mark.parametrize("k", [1, 4, 16])
def test_repeat_after_rewards_exactly_the_symbol_seen_k_steps_earlier(k):
    seen, _, _ = play(RepeatAfter(k), [0] * k)
    symbols = seen[:, 0]
    np.testing.assert_array_equal(seen[:, 1], [1.0] + [0.0] * k)  # the cue is marked
    np.testing.assert_array_equal(seen[:, 2], [0.0] * k + [1.0])  # so is the query
    assert set(symbols) <= {-1.0, 1.0}
    cue = int(symbols[0] > 0)
    for answer, reward in ((cue, 1.0), (1 - cue, -1.0)):
        _, rewards, dones = play(RepeatAfter(k), [0] * k + [answer])
        assert rewards == [0.0] * k + [reward]
        assert dones == [False] * k + [True]


def test_repeat_after_draws_fresh_symbols_every_step_and_episode():
    firsts = {float(play(RepeatAfter(16), [], seed=s)[0][0, 0]) for s in range(20)}
    assert firsts == {-1.0, 1.0}
    seen, _, _ = play(RepeatAfter(64), [0] * 64)
    assert 10 < (seen[:, 0] > 0).sum() < 55  # distractors are not constant


@pytest.mark.parametrize(("k", "stack", "sees_cue"), [(3, 4, True), (4, 4, False),
                                                      (64, 4, False)])
def test_a_frame_stack_sees_its_last_observations_and_no_further(k, stack, sees_cue):
    flat, _, _ = play(RepeatAfter(k), [0] * k)
    stacked, _, _ = play(RepeatAfter(k, stack=stack), [0] * k)
    assert stacked.shape == (k + 1, 3 * stack)
    padded = np.concatenate([np.zeros((stack - 1, 3), np.float32), flat])
    for t in range(k + 1):  # oldest first, zeros before the episode's start
        np.testing.assert_array_equal(stacked[t], padded[t:t + stack].ravel())
    # What the query step shows: the cue's marker is in it only if k < stack, so a
    # feed-forward policy over the stack cannot beat a mean return of 0 otherwise.
    assert (stacked[k].reshape(stack, 3)[:, 1] == 1.0).any() == sees_cue


def test_feedforward_over_a_short_stack_averages_zero_at_best():
    # The best feed-forward answer per query observation, over 400 episodes: if the
    # observation said nothing of the cue, even this oracle would average ~0.
    answers: dict[bytes, list[float]] = {}
    for seed in range(400):
        seen, _, _ = play(RepeatAfter(6, stack=4), [0] * 6, seed=seed)
        flat, _, _ = play(RepeatAfter(6), [0] * 6, seed=seed)
        answers.setdefault(seen[6].tobytes(), []).append(flat[0, 0])
    best = sum(abs(sum(cues)) for cues in answers.values()) / 400
    assert best < 0.25


def test_stack_must_be_positive():
    with pytest.raises(ValueError, match="`stack` \\(0\\) must be >= 1"):
        StatelessCartPole(stack=0)


@pytest.mark.parametrize(("name", "stop"), [("stateless_cartpole", 500.0),
                                            ("pendulum_novel", -200.0)])
def test_the_recurrent_tuned_entries_build_at_the_zoo_budget(name, stop):
    t = tuned(name)
    assert (t.env_step_budget, t.stop_return) == (100_000, stop)
    config = t.for_runners(0)
    assert config.model.use_lstm and config.num_envs_per_env_runner == t.num_envs
    factory = {"stateless_cartpole": StatelessCartPole, "pendulum_novel": PendulumNoVel}[name]
    assert t.env == f"distrl.envs.memory_tasks:{factory.__name__}"
    env = factory()
    model = actor_critic(env.observation_space, env.action_space, config.model)
    obs = torch.as_tensor(env.reset(seed=0)[0])[None]
    state = model.initial_state(1)
    prev_a = torch.zeros((1, *env.action_space.shape), dtype=torch.float32) \
        if name == "pendulum_novel" else torch.zeros(1, dtype=torch.long)
    _, values, _ = model.step(obs, state, prev_a, torch.zeros(1))
    assert values.shape == (1,)


def test_pendulum_novel_backprops_through_whole_episodes():
    # Its sequences span an episode (32-step sequences: median -426 against -343).
    t = tuned("pendulum_novel")
    episode = gym.make("Pendulum-v1").spec.max_episode_steps
    assert t.config.model.max_seq_len >= episode
    assert (t.config.train_batch_size // t.num_envs) % episode == 0  # fragments of whole episodes


def test_pendulum_novel_trains_on_a_users_own_wrapper(tmp_path, monkeypatch, capsys):
    monkeypatch.syspath_prepend(str(ENVMODS))
    main(["train", "ppo", "--tuned", "pendulum_novel", "--env", "distrl_pendulum_wrapper:make",
          "--num-env-runners", "0", "--num-envs-per-env-runner", "2", "--train-batch-size",
          "128", "--minibatch-size", "64", "--num-epochs", "1", "--max-env-steps", "256",
          "--logdir", str(tmp_path), "--no-progress"])
    assert "done (max_env_steps): 256 env steps" in capsys.readouterr().out


def test_the_cli_builds_sb3s_layout_and_the_run_evaluates(tmp_path, capsys):
    """--hiddens with no sizes and --lstm-head-hiddens: the LSTM reads the observation,
    a layer follows it; the saved run plays `distrl eval` with that network."""
    main(["train", "ppo", "--env", "distrl.envs.memory_tasks:StatelessCartPole", "--use-lstm",
          "--hiddens", "--lstm-head-hiddens", "16", "--lstm-cell-size", "8",
          "--num-env-runners", "0", "--num-envs-per-env-runner", "2", "--train-batch-size",
          "64", "--minibatch-size", "64", "--num-epochs", "1", "--max-env-steps", "128",
          "--logdir", str(tmp_path), "--no-progress"])
    model = json.loads((tmp_path / "config.json").read_text())["config"]["model"]
    assert (model["hiddens"], model["lstm_head_hiddens"]) == ([], [16])
    main(["eval", str(tmp_path), "--episodes", "2", "--json"])
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["episodes"] == 2
