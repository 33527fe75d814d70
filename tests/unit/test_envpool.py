"""EnvPool envs behind the vector interface the samplers use: NEXT_STEP resets,
uint8 Atari frames end to end, clipped rewards with the game's score reported; and
double-buffered sampling over two pools (--vector-mode async)."""

import os

import numpy as np
import pytest
import torch

pytest.importorskip("envpool")

from distrl import ApexConfig, ModelConfig, PPOConfig, RunConfig, train_apex, train_ppo
from distrl.apex.roles import ApexActor
from distrl.core.sampling import DoubleBuffered, EnvLoop, make_loop
from distrl.envs.envpool_vec import ALE_V5, EnvPoolVector, ale_v5_differences
from distrl.envs.make import make_vec_env
from distrl.ppo.env_runner import EnvRunner
from tests.unit.test_recurrent import assert_replays


class Left:
    """Always action 0 (CartPole falls within ~10 steps)."""

    def act(self, obs, generator, context):
        return torch.zeros(obs.shape[0], dtype=torch.int64), {}


def test_an_envpool_cartpole_ends_and_resets_as_gymnasiums_does():
    pool = make_vec_env("envpool:CartPole-v1", 3)
    gym_vec = make_vec_env("CartPole-v1", 3)
    assert pool.single_observation_space.shape == gym_vec.single_observation_space.shape
    loop = EnvLoop("envpool:CartPole-v1", 3, seed=0)
    traj = loop.collect(Left(), 30, None)
    ends = traj.terminated | traj.truncated
    assert ends.any()
    t, i = np.argwhere(ends)[0]
    assert not traj.valid[t + 1, i]  # the step after an end is the reset
    assert traj.valid[t + 2, i] and traj.rewards[t + 1, i] == 0.0
    # Each finished episode's return is its number of steps (reward 1 per step).
    np.testing.assert_array_equal(traj.episode_returns, traj.episode_lengths)


def test_pong_frames_stay_uint8_from_the_pool_to_the_batch():
    loop = EnvLoop("envpool:Pong-v5", 2, seed=0)
    traj = loop.collect(Left(), 4, None)
    assert traj.obs.dtype == np.uint8 and traj.obs.shape == (4, 2, 4, 84, 84)


class FakePool:
    """Rewards 3 then -2 then 0 in one env; the episode ends at the second step."""

    def __init__(self):
        self.t = 0

    def send(self, actions):
        pass

    def recv(self):
        rewards = [np.array([3.0]), np.array([-2.0]), np.array([0.0])][self.t]
        done = np.array([self.t == 1])
        self.t += 1
        return np.zeros((1, 4, 84, 84), np.uint8), rewards, done, np.array([False]), {}


def test_atari_rewards_are_clipped_and_the_score_reported():
    vec = EnvPoolVector("envpool:Pong-v5", 1)
    vec.pool.close()
    vec.pool = FakePool()
    _, r1, *_ = vec.step(np.zeros(1))
    _, r2, _, _, info = vec.step(np.zeros(1))
    assert (r1[0], r2[0]) == (1.0, -1.0)
    assert info["_episode"][0] and info["episode"]["r"][0] == 1.0  # 3 - 2, unclipped
    _, r3, _, _, info = vec.step(np.zeros(1))  # the reset step starts a new score
    assert r3[0] == 0.0 and info["episode"]["r"][0] == 0.0


def test_an_unknown_task_is_one_line_naming_how_to_list_them():
    with pytest.raises(ValueError, match=r"EnvPool has no task 'Pongg-v5'.*list_all_envs"):
        make_vec_env("envpool:Pongg-v5", 1)


class Lean:
    """Pushes the cart toward the pole's lean (episodes of tens of steps); records, per
    call, which envs it acted for and whether the other half's step was in flight."""

    def __init__(self, in_flight=None):
        self.in_flight, self.calls = in_flight, []

    def act(self, obs, generator, context):
        other = 1 - (context.rows.start or 0) // max(len(obs), 1)
        self.calls.append((context.rows, self.in_flight[other] if self.in_flight else None))
        return (obs[:, 2] > 0).long(), {"cart": obs[:, 0]}


def test_double_buffered_halves_sample_what_one_pool_of_all_envs_does():
    one = EnvLoop("envpool:CartPole-v1", 4, seed=3).collect(Lean(), 100, None)
    policy = Lean()
    two = DoubleBuffered("envpool:CartPole-v1", 4, seed=3).collect(policy, 100, None)
    for field in ("obs", "actions", "rewards", "terminated", "truncated", "valid", "next_obs"):
        np.testing.assert_array_equal(getattr(two, field), getattr(one, field), err_msg=field)
    np.testing.assert_array_equal(two.extras["cart"], one.extras["cart"])
    assert two.steps_per_env == one.steps_per_env == 100
    assert set(one.episode_envs.tolist()) == {0, 1, 2, 3}  # episodes ended in every env

    def episodes(t):
        return sorted(zip(t.episode_envs.tolist(), t.episode_returns.tolist(),
                          t.episode_lengths.tolist(), strict=True))

    assert episodes(two) == episodes(one)
    assert {(c[0].start, c[0].stop) for c in policy.calls} == {(0, 2), (2, 4)}


def test_preemption_stops_both_halves_where_one_loop_stops():
    """DD-PPO's stop_early sees the same fewest-valid-steps count after each step."""
    asked = {"one": [], "two": []}

    def stop(who):
        return lambda k: asked[who].append(k) or k >= 7

    one = EnvLoop("envpool:CartPole-v1", 4, seed=3).collect(Lean(), 100, None, stop("one"))
    two = DoubleBuffered("envpool:CartPole-v1", 4, seed=3).collect(Lean(), 100, None,
                                                                   stop("two"))
    assert asked["two"] == asked["one"] == list(range(1, 8))
    assert two.steps_per_env == one.steps_per_env == 7
    for field in ("obs", "actions", "rewards", "valid", "next_obs"):
        np.testing.assert_array_equal(getattr(two, field), getattr(one, field), err_msg=field)


def test_one_half_steps_while_the_policy_acts_on_the_other():
    loop = DoubleBuffered("envpool:CartPole-v1", 4, seed=0)
    in_flight = [False, False]
    for k, half in enumerate(loop.halves):
        send, recv = half.envs.step_async, half.envs.step_wait

        def step_async(actions, k=k, send=send):
            in_flight[k] = True
            send(actions)

        def step_wait(k=k, recv=recv):
            in_flight[k] = False
            return recv()

        half.envs.step_async, half.envs.step_wait = step_async, step_wait
    policy = Lean(in_flight)
    loop.collect(policy, 20, None)
    loop.collect(policy, 20, None)
    # Every act but the first of each collect call finds the other half stepping.
    overlapped = [busy for _, busy in policy.calls]
    assert overlapped.count(False) == 2 and len(overlapped) >= 80
    assert not overlapped[0] and overlapped[1]


def test_double_buffering_needs_an_even_number_of_envs():
    run = RunConfig(env="envpool:CartPole-v1", vector_mode="async")
    with pytest.raises(ValueError, match=r"two halves of each runner's envs in turns: "
                                         r"num_envs_per_env_runner \(3\) must be even"):
        train_ppo(PPOConfig(num_env_runners=0, num_envs_per_env_runner=3,
                            train_batch_size=96, minibatch_size=32), run)
    with pytest.raises(ValueError, match=r"num_envs_per_worker \(3\) must be even"):
        train_apex(ApexConfig(num_envs_per_worker=3), run)
    with pytest.raises(ValueError, match=r"two halves.*\(3\) must be even"):
        make_loop("envpool:CartPole-v1", 3, 0, vector_mode="async")
    assert isinstance(make_loop("envpool:CartPole-v1", 2, 0, vector_mode="async"),
                      DoubleBuffered)
    assert isinstance(make_loop("envpool:CartPole-v1", 3, 0), EnvLoop)


def test_an_lstm_carries_each_halfs_state_and_replays_what_it_sampled():
    """Replaying the rollout's sequences from their stored states gives the outputs the
    sampler acted with, on both halves: each half's state is its own envs'."""
    model = ModelConfig(hiddens=(16,), use_lstm=True, lstm_cell_size=8, max_seq_len=5)
    runner = EnvRunner("envpool:CartPole-v1", 4, model, 0.99, 0.95, 0, vector_mode="async")
    rollout = runner.sample(30)
    assert np.abs(rollout.state_in).sum() > 0
    assert_replays(runner, rollout)


def test_ape_x_actors_explore_with_each_halfs_own_epsilons():
    actor = ApexActor("envpool:CartPole-v1", 4, ModelConfig(hiddens=(8,)), True,
                      [0.0, 0.0, 1.0, 1.0], 0.99, 3, 0, False, vector_mode="async")
    traj = actor.loop.collect(actor.policy, 200, actor.generator)
    greedy = traj.actions == traj.extras["q"].argmax(-1)
    assert greedy[:, :2].all()  # epsilon 0
    assert 0.3 < greedy[:, 2:].mean() < 0.7  # epsilon 1: random of 2 actions


def test_each_half_gets_half_the_threads_unless_the_env_config_says():
    """The two pools step in turns: each takes half the threads one pool of all the envs
    would (EnvPool's default: one per env, at most the cores); a user's own wins."""
    loop = DoubleBuffered("envpool:CartPole-v1", 4, seed=0)
    expected = max(1, min(4, os.cpu_count()) // 2)
    assert [h.envs.options["num_threads"] for h in loop.halves] == [expected, expected]
    loop = DoubleBuffered("envpool:CartPole-v1", 4, seed=0, env_config={"num_threads": 3})
    assert [h.envs.options["num_threads"] for h in loop.halves] == [3, 3]


def test_a_checkpoint_of_double_buffered_envpool_says_a_resume_starts_fresh_episodes(
        capsys, monkeypatch):
    from distrl.core import checkpoint

    monkeypatch.setattr(checkpoint, "_UNSAVABLE", set())
    loop = DoubleBuffered("envpool:CartPole-v1", 2, seed=0)
    assert loop.get_state() is None and loop.get_state() is None
    said = capsys.readouterr().err.splitlines()  # once, not at every save; no source line
    assert len(said) == 1 and said[0].startswith("distrl: envpool:CartPole-v1's envs cannot "
                                                 "be saved (")
    assert said[0].endswith("); a resume starts fresh episodes.")
    loop.set_state(None)  # a resume from it: the envs go on as they are
    assert loop.collect(Lean(), 3, None).obs.shape == (3, 2, 4)


def test_making_a_pool_says_nothing_of_its_float64_bounds():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # gymnasium's "precision lowered" would raise here
        EnvPoolVector("envpool:CartPole-v1", 2).close()


def _flags(env, limit, steps):
    """(terminated, truncated, episode length) of env 0 at each of ``steps`` steps of
    action 0 from reset(seed=0), the episode truncated after ``limit`` steps."""
    vec = make_vec_env(env, 2, max_episode_steps=limit, clip_rewards=False)
    vec.reset(seed=0)
    out = []
    for _ in range(steps):
        _, _, term, trunc, info = vec.step(np.zeros(2, np.int64))
        out.append((bool(term[0]), bool(trunc[0]), int(info["episode"]["l"][0])
                    if "episode" in info else None))
    vec.close()
    return out


@pytest.mark.parametrize("env", ["envpool:CartPole-v1", "CartPole-v1"])
def test_a_terminal_last_allowed_step_is_terminated_through_envpool_as_gymnasium(env):
    """EnvPool calls an episode that terminates on its last allowed step truncated; its
    return would then bootstrap from a terminal state. Both paths must say terminated
    (and truncated, as gymnasium's TimeLimit), and reset at the next step."""
    free = _flags(env, 500, 30)
    end = next(t for t, (term, _, _) in enumerate(free) if term) + 1  # its length
    at_limit = _flags(env, end, end + 2)
    assert at_limit[end - 1][:2] == (True, True)
    assert at_limit[:end - 1] == free[:end - 1]  # nothing else changed before it
    assert not any(at_limit[end][:2])  # the reset step
    cut = _flags(env, end - 1, end + 2)
    assert cut[end - 2][:2] == (False, True)  # truncated one step before it would end
    assert not any(cut[end - 1][:2]) and not any(cut[end][:2])  # reset, then a new episode


def test_envpool_atari_names_where_it_differs_from_ale_v5_and_can_match_it():
    assert set(ale_v5_differences("envpool:Pong-v5")) == {
        "repeat_action_probability", "use_fire_reset", "noop_max"}
    assert ale_v5_differences("envpool:Pong-v5")["repeat_action_probability"] == {
        "envpool": 0.0, "ale_v5": 0.25}
    assert ale_v5_differences("envpool:Pong-v5", ALE_V5) == {}
    assert ale_v5_differences("envpool:CartPole-v1") == {}  # no Atari settings
    vec = make_vec_env("envpool:Pong-v5", 2, env_config=ALE_V5)
    assert vec.pool.config["repeat_action_probability"] == 0.25
    vec.close()
    with pytest.raises(ValueError, match="noop_max must be >= 1"):
        make_vec_env("envpool:Pong-v5", 2, env_config={"noop_max": 0})
