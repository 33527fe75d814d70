"""DD-PPO's gradient hook on 2 local processes (torch.multiprocessing, no Ray), summing
through gloo or through the node-local shared-memory all-reduce."""

import os

import gymnasium as gym
import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from distrl.core.learner import Learner
from distrl.core.types import PPOBatch, Rollout
from distrl.ddppo.collective import WeightedAllReduce, pooled_mean_std
from distrl.ddppo.config import DDPPOConfig
from distrl.ddppo.shm_allreduce import ShmAllReduce, shm_supported
from distrl.models.actor_critic import ActorCritic
from distrl.models.distributions import Categorical
from distrl.ppo.loss import ppo_update

SIZES = (40, 20)  # samples per rank: rank 0 has twice rank 1's, as after a preemption
MINIBATCHES = 2
CFG = DDPPOConfig(num_epochs=2, shuffle=False, minibatch_size=20, rollout_fragment_length=20,
                  num_envs_per_worker=2, lr=1e-2, grad_clip=0.3, entropy_coeff=0.01)
OBS, ACT = gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(3)


def shard(rank: int) -> Rollout:
    """Rank's samples: a fixed random rollout under a fixed policy (same in every process)."""
    g = np.random.default_rng(rank)
    n = SIZES[rank]
    torch.manual_seed(100 + rank)
    model = ActorCritic(OBS, ACT, CFG.model)
    obs = g.normal(size=(n, 4)).astype(np.float32)
    with torch.no_grad():
        dist_inputs, values = model(torch.from_numpy(obs))
    actions = torch.from_numpy(g.integers(0, 3, n))
    logp = Categorical.log_prob(dist_inputs, actions)
    adv = g.normal(size=n).astype(np.float32) * (1 + rank)  # different scales per rank
    return Rollout(obs, actions.numpy(), logp.numpy(), dist_inputs.numpy(), values.numpy(), adv,
                   adv + values.numpy(), np.zeros(0), np.zeros(0, np.int64), n, 0)


def fresh_learner(grad_hook: WeightedAllReduce | None = None) -> Learner:
    torch.manual_seed(0)
    return Learner(ActorCritic(OBS, ACT, CFG.model), CFG.lr, CFG.grad_clip, grad_hook)


def numel() -> int:
    """Elements of the gradient buffer: the model's parameters and the sample count."""
    return sum(p.numel() for p in fresh_learner().params) + 1


def _worker(rank: int, shm_path: str, out: str) -> None:
    torch.set_num_threads(1)
    if shm_path:
        reduce = ShmAllReduce.attach(shm_path, rank, 2, numel(), [os.getppid()] * 2, 30.0)
    else:
        # A file store: a port picked free beforehand may be taken by then (a test beside).
        dist.init_process_group("gloo", init_method=f"file://{out}/store", rank=rank,
                                world_size=2)
        reduce = None  # torch.distributed's all_reduce
    # 1. The hook alone on hand-made gradients.
    p = torch.nn.Parameter(torch.zeros(3))
    p.grad = torch.tensor([1.0, 2.0, 3.0]) * (rank + 1)
    unused = torch.nn.Parameter(torch.zeros(2))  # no grad on this rank
    WeightedAllReduce(reduce)([p, unused], n=SIZES[rank])
    # 2. A whole DD-PPO update on this rank's shard.
    rollout = shard(rank)
    stats = pooled_mean_std(rollout.advantages, torch.device("cpu"), reduce)
    learner = fresh_learner(WeightedAllReduce(reduce))
    ppo_update(learner, PPOBatch.from_rollout(rollout, adv_mean_std=stats), CFG, 0.0, 0.01,
               num_minibatches=MINIBATCHES)
    torch.save({"grad": p.grad, "unused": unused.grad, "stats": stats,
                "params": learner.model.state_dict()}, f"{out}/rank{rank}.pt")
    if not shm_path:
        dist.destroy_process_group()


def run_two_ranks(tmp_path, sum_with: str) -> list[dict]:
    shm = ShmAllReduce.create(2, numel(), [], 1.0, directory=str(tmp_path)) \
        if sum_with == "shm" else None
    try:
        mp.spawn(_worker, args=(shm.path if shm else "", str(tmp_path)), nprocs=2)
    finally:
        if shm:
            shm.unlink()
    return [torch.load(tmp_path / f"rank{r}.pt") for r in range(2)]


@pytest.mark.parametrize("sum_with", [
    "gloo",
    pytest.param("shm", marks=pytest.mark.skipif(not shm_supported(), reason="x86-64 Linux")),
])
def test_hook_equals_weighted_mean_and_pooled_update(tmp_path, sum_with):
    """With shm, the float64 advantage statistics must come back exact (rtol 1e-9)."""
    r0, r1 = run_two_ranks(tmp_path, sum_with)
    base = torch.tensor([1.0, 2.0, 3.0])
    expected = (SIZES[0] * base * 1 + SIZES[1] * base * 2) / sum(SIZES)
    torch.testing.assert_close(r0["grad"], expected)
    assert torch.equal(r0["grad"], r1["grad"]) and torch.equal(r0["unused"], torch.zeros(2))

    a, b = shard(0), shard(1)
    pooled_adv = np.concatenate([a.advantages, b.advantages]).astype(np.float64)
    np.testing.assert_allclose(r0["stats"], (pooled_adv.mean(), pooled_adv.std()), rtol=1e-9)

    # Reference: one process, pooled batch ordered so that pooled minibatch j is
    # (rank 0's minibatch j) + (rank 1's minibatch j).
    ha, hb = SIZES[0] // MINIBATCHES, SIZES[1] // MINIBATCHES
    order = np.concatenate([np.r_[j * ha:(j + 1) * ha, SIZES[0] + j * hb:SIZES[0] + (j + 1) * hb]
                            for j in range(MINIBATCHES)])
    pooled = Rollout.concat([a, b])
    pooled = Rollout(*(getattr(pooled, f)[order] for f in (
        "obs", "actions", "logp", "dist_inputs", "values", "advantages", "value_targets")),
        np.zeros(0), np.zeros(0, np.int64), sum(SIZES), 0)
    learner = fresh_learner()
    ppo_update(learner, PPOBatch.from_rollout(pooled), CFG, 0.0, 0.01,
               num_minibatches=MINIBATCHES)
    for k, v in learner.model.state_dict().items():
        assert torch.equal(r0["params"][k], r1["params"][k]), f"{k}: ranks differ"
        torch.testing.assert_close(r0["params"][k], v, rtol=1e-5, atol=1e-6)
