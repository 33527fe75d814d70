"""DD-PPO's bit-exact resume, the twin of tests/integration/test_exact_resume_scaled.py (PPO and
APPO in process). DD-PPO runs only on Ray, and has none of the three things that test
turns on: no reward scaling (DDPPOConfig has no normalize_rewards; its workers' runners
keep no running returns), no observation filter (refused: the workers would not merge
its statistics) and no overlap (each worker samples, then trains). What a resume must
bring back is then the replicas' weights, rank 0's optimizer and each worker's two
random streams (actions, minibatch order); all are compared bit for bit here."""

from dataclasses import fields

import pytest
import torch

from distrl.core.checkpoint import Checkpoint
from distrl.core.config import RunConfig
from distrl.ddppo.config import DDPPOConfig
from distrl.ddppo.train import train_ddppo
from distrl.models.config import ModelConfig

pytestmark = pytest.mark.ray

SMALL = DDPPOConfig(num_workers=2, num_envs_per_worker=2, rollout_fragment_length=16,
                    minibatch_size=8, num_epochs=2, model=ModelConfig(hiddens=(16,)),
                    collective_timeout_s=20.0)


def test_ddppo_has_no_reward_scaling_observation_filter_or_overlap():
    """If one is added, extend the resume test below (and the unit twin's defects)."""
    names = {f.name for f in fields(DDPPOConfig)}
    assert "normalize_rewards" not in names and "overlap" not in names
    with pytest.raises(ValueError, match="observation_filter"):
        DDPPOConfig(model=ModelConfig(observation_filter="MeanStdFilter"))


def test_ddppo_resumes_its_weights_optimizer_and_random_streams_bit_exactly(ray_local,
                                                                           tmp_path):
    def train(name, steps, resume=False):
        logdir = str(tmp_path / name)
        return train_ddppo(SMALL, RunConfig(env="CartPole-v1", seed=3, logdir=logdir,
                                            max_env_steps=steps, progress=False,
                                            resume=logdir if resume else None))

    straight = train("a", 256)
    assert train("b", 128)["iteration"] == 2
    resumed = train("b", 256, resume=True)
    assert straight["iteration"] == resumed["iteration"] == 4
    assert straight["env/steps_total"] == resumed["env/steps_total"]
    a, b = Checkpoint(tmp_path / "a"), Checkpoint(tmp_path / "b")
    wa, wb = a.policy_weights(), b.policy_weights()
    assert wa.keys() == wb.keys()
    differ = [k for k in wa if not torch.equal(wa[k], wb[k])]
    assert not differ, f"{differ} differ after the resume"
    oa, ob = a.learner_state()["optimizer"], b.learner_state()["optimizer"]
    assert oa["param_groups"] == ob["param_groups"]
    assert oa["state"].keys() == ob["state"].keys() and oa["state"]
    differ = [f"{i}/{k}" for i, sa in oa["state"].items() for k, v in sa.items()
              if not torch.equal(v, ob["state"][i][k])]
    assert not differ, f"optimizer state {differ} differs after the resume"
    sa, sb = a.runner_states(), b.runner_states()
    assert len(sa) == len(sb) == SMALL.num_workers
    for (runner_a, shuffle_a), (runner_b, shuffle_b) in zip(sa, sb, strict=True):
        assert runner_a[2] is None  # no running returns: nothing to scale rewards with
        assert torch.equal(runner_a[1], runner_b[1])  # the worker's action sampler
        assert torch.equal(shuffle_a, shuffle_b)  # its minibatch order
