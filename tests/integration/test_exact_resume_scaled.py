"""Bit-exact resume with reward scaling and the observation filter on, in process: a run
of 6 iterations and a run of 2, stopped and resumed to 6, end with the same weights,
optimizer, minibatch generator, reward and observation statistics and runners' states.

What must come back for that: the learner's statistics of discounted returns (the
reward scale), every runner env's running discounted return (the carry the next
fragment's returns start from), and the observation filter (buffers of the network).
A resume that drops one drifts by ~1e-5 in the weights, which approximate comparisons
miss; here everything is compared with torch.equal / np.array_equal.

DD-PPO needs Ray: tests/integration/test_ddppo.py::test_checkpoint_resumes_exactly_and_evaluates.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from distrl import PPOConfig, RunConfig, train_ppo
from distrl.appo.config import APPOConfig
from distrl.appo.sampler import ThreadSampler
from distrl.core.checkpoint import Checkpoint
from distrl.models.config import ModelConfig
from distrl.models.filters import return_std, stats_from_json

MODEL = ModelConfig(hiddens=(16,), observation_filter="MeanStdFilter")
# 4 envs x 16 steps a batch; short CartPole episodes end inside fragments and carry over
# fragment ends, so the per-env running returns matter both ways.
PPO = PPOConfig(num_env_runners=0, num_envs_per_env_runner=4, train_batch_size=64,
                minibatch_size=32, num_epochs=2, normalize_rewards=True, overlap=True,
                model=MODEL)
# APPO has no overlap knob (APPOConfig refuses it): its runner always samples beside the
# learner, which is what overlap turns on for PPO.
APPO = APPOConfig(num_env_runners=0, num_envs_per_env_runner=4, train_batch_size=64,
                  minibatch_size=32, num_epochs=2, normalize_rewards=True, model=MODEL)
# 2 iterations, then 4 more: reward scaling acts a step late (statistics merge after the
# update that used the old ones; with overlap the next batch is already sampled), so a
# wrong running return first moves the weights 4 iterations after the resume.
STEPS_STOP, STEPS_END = 128, 384


class LockstepSampler(ThreadSampler):
    """APPO's in-process sampler made deterministic: its thread samples one fragment
    per published version, with that version, as soon as it is published, and a pause
    waits for that fragment. The learner still trains while the next fragment is
    sampled, and a save still keeps one pending fragment; only the race over which
    weights a fragment acts with is gone (the real thread may start a fragment before or
    after the learner publishes, which no bit-exact comparison survives)."""

    sampled: int | None = None  # the version of the last fragment sampled

    def resume(self, pending):
        if pending:  # a checkpoint's fragment: its version is already sampled
            self.sampled = pending[-1].weights_version
        super().resume(pending)

    def pause(self):
        deadline = time.monotonic() + 60.0
        while (self._thread is not None and self._error is None
               and self.sampled != self._weights[1] and time.monotonic() < deadline):
            time.sleep(0.001)
        return super().pause()

    def _run(self):
        try:
            while not self._stop.is_set():
                with self._lock:
                    weights, version = self._weights
                if version == self.sampled:
                    self._stop.wait(0.001)
                    continue
                self.ready.put(self.runner.fragment(self.steps_per_env, weights, version))
                self.sampled = version
        except BaseException as err:  # raised in the driver by take()
            self._error = err


def train(algo, logdir, max_env_steps, resume=False):
    run = RunConfig(env="CartPole-v1", seed=3, max_env_steps=max_env_steps, progress=False,
                    logdir=str(logdir), resume=str(logdir) if resume else None)
    if algo == "ppo":
        return train_ppo(PPO, run)
    import distrl.appo.train as appo_train

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(appo_train, "ThreadSampler", LockstepSampler)
        return appo_train.train_appo(APPO, run)


@pytest.fixture(scope="module", params=["ppo", "appo"])
def runs(request, tmp_path_factory):
    """(straight run's checkpoint, stopped-and-resumed run's checkpoint, results)."""
    tmp = tmp_path_factory.mktemp(request.param)
    straight = train(request.param, tmp / "a", STEPS_END)
    stopped = train(request.param, tmp / "b", STEPS_STOP)
    resumed = train(request.param, tmp / "b", STEPS_END, resume=True)
    return Checkpoint(tmp / "a"), Checkpoint(tmp / "b"), (straight, stopped, resumed)


def test_the_runs_scale_rewards_filter_observations_and_save_a_pending_batch(runs):
    a, _, (straight, stopped, resumed) = runs
    assert stopped["iteration"] == 2
    assert straight["iteration"] == resumed["iteration"] == 6
    assert straight["env/steps_total"] == resumed["env/steps_total"] >= STEPS_END
    assert return_std(stats_from_json(a.algo_state()["returns"])) > 1.0
    assert float(a.policy_weights()["obs_count"]) >= STEPS_END  # every iteration's obs
    algo = a.algo
    pending = a.trusted(algo, "pending.pkl")["rollouts" if algo == "ppo" else "fragments"]
    assert len(pending) == 1  # sampled beside the last update, kept by the save
    assert a.runner_states()[0][2] is not None  # the runner's per-env running returns


def test_every_weight_and_the_observation_filter_are_bit_identical(runs):
    a, b, _ = runs
    wa, wb = a.policy_weights(), b.policy_weights()
    assert wa.keys() == wb.keys() and {"obs_mean", "obs_var", "obs_count"} <= wa.keys()
    differ = [k for k in wa if not torch.equal(wa[k], wb[k])]
    assert not differ, f"{differ} differ after the resume"


def test_the_optimizer_and_minibatch_generator_are_bit_identical(runs):
    a, b, _ = runs
    la, lb = a.learner_state(), b.learner_state()
    assert torch.equal(la["generator"], lb["generator"])
    oa, ob = la["optimizer"], lb["optimizer"]
    assert oa["param_groups"] == ob["param_groups"]
    assert oa["state"].keys() == ob["state"].keys() and oa["state"]
    differ = [f"{i}/{k}" for i, sa in oa["state"].items() for k, v in sa.items()
              if not torch.equal(v, ob["state"][i][k])]
    assert not differ, f"optimizer state {differ} differs after the resume"


def test_the_reward_statistics_and_runner_returns_are_bit_identical(runs):
    a, b, _ = runs
    sa, sb = a.algo_state(), b.algo_state()
    assert sa["kl_coeff"] == sb["kl_coeff"]
    ra, rb = stats_from_json(sa["returns"]), stats_from_json(sb["returns"])
    assert ra.count == rb.count
    assert np.array_equal(ra.mean, rb.mean) and np.array_equal(ra.m2, rb.m2)
    (runner_a,), (runner_b,) = a.runner_states(), b.runner_states()
    assert np.array_equal(runner_a[2], runner_b[2]), "the per-env running returns differ"
    assert torch.equal(runner_a[1], runner_b[1])  # the runner's action sampler
