"""DD-PPO's rules and its straggler-preemption arithmetic."""

import pytest

from distrl.ddppo.collective import Preemption, min_steps_per_env, workers_to_wait_for
from distrl.ddppo.config import DDPPOConfig


@pytest.mark.parametrize("kwargs,match", [
    (dict(num_workers=0), r"`num_workers` \(0\) must be >= 1.*no central learner"),
    (dict(train_batch_size=500), r"Do not set `train_batch_size`.*rollout_fragment_length x"),
    (dict(kl_coeff=0.2), "un-decentralize DD-PPO"),
    (dict(kl_target=0.01), "un-decentralize DD-PPO"),
    (dict(use_kl_loss=True), "un-decentralize DD-PPO"),
    (dict(backend="nvlink"), r"`backend` \('nvlink'\) must be one of"),
    (dict(backend="nccl"), "set num_gpus_per_worker > 0"),
    (dict(batch_mode="complete_episodes"), "needs batch_mode=.truncate_episodes.*fixed"),
    (dict(minibatch_size=600), r"minibatch_size.*<= rollout_fragment_length x"),
    (dict(preemption_threshold=0.0), "preemption_threshold"),
    (dict(preemption_min_share=1.5), "preemption_min_share"),
    (dict(rollout_fragment_length=0), "rollout_fragment_length"),
    (dict(clip_param=-1.0), "clip_param"),  # PPO's own rules still hold
])
def test_ddppo_config_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        DDPPOConfig(**kwargs)


def test_defaults_and_derived_sizes():
    cfg = DDPPOConfig()
    assert cfg.rollout_fragment_length == 100 and cfg.num_envs_per_worker == 5
    assert cfg.minibatch_size == 50
    assert cfg.worker_batch_size == 500 and cfg.num_minibatches == 10
    assert (cfg.kl_coeff, cfg.kl_target, cfg.backend) == (0.0, 0.0, "gloo")


@pytest.mark.parametrize("world,threshold,needed", [
    (5, 0.6, 3),  # 0.6 x 5 is 3.0000000000000004 in floats: still 3
    (2, 0.6, 2),  # with 2 workers, 0.6 waits for both: no preemption
    (2, 0.5, 1),
    (10, 0.6, 6),
    (4, 1.0, 4),
    (3, 0.01, 1),
])
def test_workers_to_wait_for(world, threshold, needed):
    assert workers_to_wait_for(world, threshold) == needed


def test_min_steps_per_env():
    assert min_steps_per_env(DDPPOConfig()) == 25  # 25% of 100
    # 8 minibatches over 2 envs need >= 4 steps per env even though 25% of 8 is 2.
    cfg = DDPPOConfig(rollout_fragment_length=8, num_envs_per_worker=2, minibatch_size=2)
    assert cfg.num_minibatches == 8 and min_steps_per_env(cfg) == 4
    assert min_steps_per_env(DDPPOConfig(preemption_min_share=1.0)) == 100


def test_preemption_waits_for_min_share_and_enough_finished_workers():
    finished = [0]
    asked = []

    def count():
        asked.append(1)
        return finished[0]

    stop = Preemption(needed=2, min_steps=10, count_finished=count, poll_s=0.0)
    assert not stop(5) and not asked  # below the minimum share: the store is not asked
    assert not stop(10)
    finished[0] = 1
    assert not stop(11)
    finished[0] = 2
    assert stop(12) and len(asked) == 3


def test_preemption_polls_the_store_at_most_every_poll_s():
    asked = []
    stop = Preemption(needed=1, min_steps=0, count_finished=lambda: asked.append(1) or 0,
                      poll_s=60.0)
    for k in range(100):
        stop(k)
    assert len(asked) == 1


def test_deployment_errors_come_before_any_worker_starts():
    import torch.distributed as dist

    from distrl.core.config import RunConfig
    from distrl.ddppo.train import train_ddppo

    with pytest.raises(ValueError, match=r"driver does no learning.*num_gpus_per_worker"):
        train_ddppo(DDPPOConfig(), RunConfig(device="cuda"))
    if not dist.is_mpi_available():
        with pytest.raises(ValueError, match="needs a torch built with MPI"):
            train_ddppo(DDPPOConfig(backend="mpi"), RunConfig())
