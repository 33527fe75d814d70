"""Env runners as Ray actors: batch sizes, weight versions, restarts, errors."""

import json
import time

import gymnasium as gym
import numpy as np
import pytest
import torch

from distrl import PPOConfig, RunConfig, train_ppo
from distrl.core.sampling import seed_for
from distrl.models.actor_critic import ActorCritic
from distrl.models.config import ModelConfig
from distrl.ppo.remote import RayRunnerGroup
from tests.fakes import counting, hang_once_in_one_process
from tests.integration.conftest import kill

pytestmark = pytest.mark.ray


def group(env="CartPole-v1", n=2, envs=4, run=None):
    def kwargs(i, restart):
        return dict(env=env, num_envs=envs, model=ModelConfig(), gamma=0.99, lambda_=0.95,
                    seed=seed_for(0, i, restart))
    return RayRunnerGroup(kwargs, n, num_cpus=1, run=run or RunConfig())


def driver_model(seed):
    torch.manual_seed(seed)
    return ActorCritic(gym.spaces.Box(-np.inf, np.inf, (4,)), gym.spaces.Discrete(2), ModelConfig())


def weights_of(model):
    return {k: v.numpy().copy() for k, v in model.state_dict().items()}


def test_runners_return_exactly_the_configured_batch(ray_local, tmp_path):
    rollouts = (g := group()).sample(weights_of(driver_model(0)), 0, steps_per_env=16)
    g.close()
    assert [r.size for r in rollouts] == [64, 64]
    cfg = PPOConfig(train_batch_size=96, minibatch_size=32, num_epochs=1, num_env_runners=2,
                    num_envs_per_env_runner=3)
    result = train_ppo(cfg, RunConfig(max_env_steps=400, logdir=str(tmp_path), progress=False))
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["learner/batch_size"] for r in rows] == [96] * len(rows)
    assert result["env/steps_total"] >= 400


def test_runners_act_with_the_newest_weights(ray_local):
    g = group()
    for version, seed in ((1, 1), (2, 2)):
        model = driver_model(seed)
        for r in g.sample(weights_of(model), version, steps_per_env=8):
            assert r.weights_version == version
            with torch.no_grad():
                dist_inputs, values = model(torch.from_numpy(r.obs.copy()))
            logp = model.dist.log_prob(dist_inputs, torch.from_numpy(r.actions.copy()))
            np.testing.assert_allclose(r.logp, logp.numpy(), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(r.values, values.numpy(), rtol=1e-5, atol=1e-6)
    g.close()


def test_a_killed_runner_is_restarted_and_its_sample_retaken(ray_local):
    g = group()
    w = weights_of(driver_model(0))
    g.sample(w, 0, steps_per_env=4)
    kill(g.sup.actors[0])  # and wait for the death: a call sent at once may be served
    rollouts = g.sample(w, 1, steps_per_env=4)
    assert [r.size for r in rollouts] == [16, 16]
    assert g.sup.restarts == [1, 0]
    assert g.metrics() == {"faults/restarts/env_runners": 1}
    assert rollouts[0].weights_version == 1  # the new actor got the current weights
    g.close()


def test_runner_errors_reach_the_driver(ray_local):
    g = group(env=counting(end=10, nan_at=2), n=1)
    with pytest.raises(Exception, match="non-finite observation"):
        g.sample(weights_of(ActorCritic(gym.spaces.Box(-np.inf, np.inf, (1,)),
                                        gym.spaces.Discrete(2), ModelConfig())), 0, 4)
    g.close()


# alone: a timing bound (the actor timeout)
@pytest.mark.alone
def test_a_hung_runner_is_named_replaced_and_its_sample_retaken(ray_local, tmp_path, capfd):
    # One runner's env blocks for 10 minutes at its 20th step; the call times out after 4 s.
    g = group(env=hang_once_in_one_process(str(tmp_path), at=20), n=2, envs=1,
              run=RunConfig(actor_timeout_s=4.0))
    w = weights_of(ActorCritic(gym.spaces.Box(-np.inf, np.inf, (1,)), gym.spaces.Discrete(2),
                               ModelConfig()))
    try:
        t0 = time.perf_counter()
        rollouts = g.sample(w, 0, steps_per_env=40)
        elapsed = time.perf_counter() - t0
        restarts = list(g.sup.restarts)
    finally:
        g.close()
    assert [r.size for r in rollouts] == [40, 40]
    assert sorted(restarts) == [0, 1]
    assert 4.0 <= elapsed < 30.0
    assert "hung: no answer within 4 s; replaced (restart 1/3)" in capfd.readouterr().out


def test_a_runner_that_keeps_dying_stops_the_run_after_max_restarts(ray_local):
    g = group(n=1, run=RunConfig(max_restarts=1))
    w = weights_of(driver_model(0))
    try:
        kill(g.sup.actors[0])
        g.sample(w, 0, steps_per_env=4)  # replaced once
        kill(g.sup.actors[0])
        with pytest.raises(RuntimeError, match=r"env_runners 0 died.*max_restarts=1"):
            g.sample(w, 1, steps_per_env=4)
    finally:
        g.close()
