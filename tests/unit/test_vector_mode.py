"""--vector-mode: async sub-envs in subprocesses and threaded ones step as sync ones do, an
error on a thread leaves in order, and a game run refuses any mode."""

import os
import sys
import threading
import time
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch

from distrl import ApexConfig, LeagueConfig, PPOConfig, RunConfig, train_league
from distrl.apex.roles import DQNLearner
from distrl.apex.train import make_engine
from distrl.core.checkpoint import trusted_loads
from distrl.core.sampling import EnvLoop
from distrl.envs.make import make_vec_env
from distrl.envs.thread_vec import ThreadedVectorEnv
from distrl.ppo.train import runner_kwargs
from tests.fakes import with_user_envs

CFG = PPOConfig(train_batch_size=64, minibatch_size=32, num_epochs=1, num_env_runners=0,
                num_envs_per_env_runner=2)


@pytest.fixture(autouse=True)
def user_envs(monkeypatch):
    with_user_envs(monkeypatch)


def steps(vec, actions, seed=7):
    out = [vec.reset(seed=seed)[0]]
    for a in actions:
        obs, reward, terminated, truncated, _ = vec.step(a)
        out += [obs, reward, terminated, truncated]
    vec.close()
    return out


@pytest.mark.parametrize("mode, kind", [("async", gym.vector.AsyncVectorEnv),
                                        ("threads", ThreadedVectorEnv)])
@pytest.mark.parametrize("env", ["CartPole-v1", "distrl_user_envs:countdown"])
def test_async_and_threaded_sub_envs_step_as_sync_ones_for_the_same_seed(env, mode, kind):
    actions = np.random.default_rng(0).integers(0, 2, (50, 3))
    vec = make_vec_env(env, 3, max_episode_steps=20, vector_mode=mode)
    assert isinstance(vec, kind)
    assert vec.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    sync = make_vec_env(env, 3, max_episode_steps=20, vector_mode="sync")
    assert isinstance(sync, gym.vector.SyncVectorEnv)
    got, want = steps(vec, actions), steps(sync, actions)
    assert sum(x.sum() for x in want[3::4]) > 0  # episodes ended: autoreset was stepped
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b)


class Stepped(gym.Env):
    """A sub-env that records which thread stepped it; the one made with ``fail`` raises
    on its step, the others take 50 ms, long enough to still run after a fast failure."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,))
    action_space = gym.spaces.Discrete(2)

    def __init__(self, fail=False):
        self.fail, self.threads, self.finished = fail, [], 0

    def reset(self, *, seed=None, options=None):
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.threads.append(threading.get_ident())
        if self.fail:
            raise RuntimeError("broken sub-env")
        time.sleep(0.05)
        self.finished += 1
        return np.zeros(1, np.float32), 1.0, False, False, {"index": action}


def test_threads_step_every_other_sub_env_and_merge_infos_in_order():
    vec = ThreadedVectorEnv([Stepped] * 5, threads=2)
    vec.reset(seed=0)
    _, reward, *_, infos = vec.step(np.array([0, 1, 0, 1, 1]))
    np.testing.assert_array_equal(infos["index"], [0, 1, 0, 1, 1])
    np.testing.assert_array_equal(reward, np.ones(5))
    threads = [env.threads[0] for env in vec.envs]
    here = threading.get_ident()
    assert threads[0::2] == [here] * 3 and set(threads[1::2]) == {threads[1]} != {here}
    vec.close()


def test_an_error_on_the_calling_thread_leaves_once_the_other_block_is_stepped():
    vec = ThreadedVectorEnv([lambda: Stepped(fail=True), Stepped], threads=2)
    vec.reset(seed=0)
    with pytest.raises(RuntimeError, match="broken sub-env"):
        vec.step(np.array([0, 0]))
    assert vec.envs[1].finished == 1  # not still stepping while the error is handled
    vec.close()


def test_threaded_envs_saved_mid_episode_go_on_as_the_originals_do():
    actions = np.random.default_rng(1).integers(0, 2, (40, 3))
    loop = EnvLoop("CartPole-v1", 3, 0, vector_mode="threads")
    for a in actions[:10]:
        loop.envs.step(a)
    copy = trusted_loads(loop.get_state())[0]  # the envs a checkpoint keeps
    assert isinstance(copy, ThreadedVectorEnv) and copy.pool is not None
    for a in actions[10:]:
        np.testing.assert_array_equal(copy.step(a)[0], loop.envs.step(a)[0])
    copy.close()
    loop.close()


@pytest.mark.parametrize("mode, assigned, blocks", [(1, {"CPU": 1.0}, 1), (1, {"CPU": 3.0}, 3),
                                                  (1, {}, 1), (0, {}, 2)])
def test_threads_take_the_cpus_ray_reserved_for_the_runner(monkeypatch, mode, assigned, blocks):
    def resources():  # as Ray's: a worker's only
        assert mode == 1, "only available when the process is a worker"
        return assigned

    context = SimpleNamespace(worker=SimpleNamespace(mode=mode), get_assigned_resources=resources)
    fake_ray = SimpleNamespace(is_initialized=lambda: True, get_runtime_context=lambda: context,
                               WORKER_MODE=1)
    monkeypatch.setitem(sys.modules, "ray", fake_ray)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    vec = ThreadedVectorEnv([Stepped] * 4)
    assert len(vec.blocks) == blocks  # the driver (mode 0): the cores of its affinity
    vec.close()


def test_auto_keeps_the_native_vector_env_and_sync_does_not():
    auto = make_vec_env("CartPole-v1", 2)
    assert not isinstance(auto, gym.vector.SyncVectorEnv | gym.vector.AsyncVectorEnv)
    auto.close()


def test_runners_of_ppo_and_apex_step_their_envs_as_run_says():
    kwargs = runner_kwargs(CFG, RunConfig(vector_mode="async"))(0, 0)
    assert kwargs["vector_mode"] == "async"
    config = ApexConfig(num_workers=0, num_envs_per_worker=2)
    spaces = make_vec_env("CartPole-v1", 1).single_observation_space, gym.spaces.Discrete(2)
    learner = DQNLearner(*spaces, config, torch.device("cpu"))
    engine, _ = make_engine(config, RunConfig(vector_mode="async"), learner, spaces[0])
    try:
        assert isinstance(engine.actor.loop.envs, gym.vector.AsyncVectorEnv)
    finally:
        engine.close()


def test_any_mode_is_refused_for_games():
    with pytest.raises(ValueError, match=r"`vector_mode` applies to single-agent gymnasium "
                                          r"envs.*Drop --vector-mode"):
        train_league(LeagueConfig(), RunConfig(env="pettingzoo:connect_four_v3",
                                               vector_mode="async"))
