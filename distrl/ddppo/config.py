"""DDPPOConfig: DD-PPO's knobs and their rules (Wijmans et al. 2019, arXiv 1911.00357).

Every worker samples and trains; at every minibatch the gradients are all-reduced so
all replicas stay identical; no central learner. ddppo/collective.py holds the maths
over torch.distributed; ddppo/remote.py runs it on Ray actors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from distrl.core.config import check_positive
from distrl.ppo.config import PPOHyperparams

BACKENDS = ("gloo", "nccl", "mpi")


@dataclass(frozen=True)
class DDPPOConfig(PPOHyperparams):
    """DD-PPO: PPO's knobs, RLlib's DD-PPO defaults, workers and straggler preemption."""

    minibatch_size: int = 50
    """Samples per SGD step on each worker; the effective minibatch is this x num_workers."""
    use_kl_loss: bool = False
    """Must stay False: see kl_coeff."""
    kl_coeff: float = 0.0
    """Must stay 0: an adaptive KL penalty needs the KL of the whole batch after every
    round, i.e. a central decision, which DD-PPO exists to avoid. Tune entropy_coeff or
    clip_param instead."""
    kl_target: float = 0.0
    """Must stay 0 (see kl_coeff)."""
    rollout_fragment_length: int = 100
    """Steps per env per round on each worker."""
    train_batch_size: int | None = None
    """Do not set: each worker trains on rollout_fragment_length x num_envs_per_worker."""
    batch_mode: Literal["truncate_episodes", "complete_episodes"] = "truncate_episodes"
    """Must be truncate_episodes: equal fragments keep every worker's collectives in step."""
    num_workers: int = 2
    """Ray actors that each sample and train (RLlib's num_workers)."""
    num_envs_per_worker: int = 5
    """Vectorised sub-envs per worker."""
    num_cpus_per_worker: float = 1.0
    """CPUs Ray reserves for each worker."""
    num_gpus_per_worker: float = 0.0
    """GPUs per worker (the driver does no learning and gets none); needed for nccl."""
    backend: Literal["gloo", "nccl", "mpi"] = "gloo"
    """torch.distributed backend: gloo (CPU), nccl (GPU workers), mpi (torch built with MPI)."""
    shm_allreduce: bool = True
    """With gloo and every worker on one node, sum gradients through shared memory
    (~0.1 ms per minibatch) instead of TCP loopback (~1 ms on the reference machine)."""
    keep_local_weights_in_sync: bool = True
    """Copy rank 0's weights to the driver after every round (else only when checkpointing)."""
    preemption_threshold: float = 0.6
    """Once this fraction of workers has a full fragment, the rest stop early; 1.0: off.
    With 2 workers only a value <= 0.5 can preempt."""
    preemption_min_share: float = 0.25
    """A preempted worker still collects at least this share of its fragment."""
    collective_timeout_s: float = 60.0
    """A collective that waits this long (a dead or frozen peer) fails the round."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.train_batch_size is not None:
            raise ValueError(
                f"Do not set `train_batch_size` ({self.train_batch_size}) for DD-PPO: each "
                "worker's batch is rollout_fragment_length x num_envs_per_worker. Set those."
            )
        if self.use_kl_loss or self.kl_coeff != 0.0 or self.kl_target != 0.0:
            raise ValueError(
                "DD-PPO has no KL penalty (set use_kl_loss=False, kl_coeff=0, kl_target=0): "
                "adapting its coefficient needs the KL of the whole batch after each round, "
                "a central decision that would un-decentralize DD-PPO. Tune entropy_coeff or "
                "clip_param instead."
            )
        if self.batch_mode != "truncate_episodes":
            raise ValueError(
                "DD-PPO needs batch_mode='truncate_episodes': every worker must bring the same "
                "number of minibatches to each round's all-reduces, so fragments have a fixed "
                "length; complete episodes would not."
            )
        if self.model.observation_filter != "NoFilter":
            raise ValueError("DD-PPO does not merge observation statistics across workers "
                             "yet: leave observation_filter at 'NoFilter' (or use PPO).")
        if self.num_workers < 1:
            raise ValueError(
                f"`num_workers` ({self.num_workers}) must be >= 1: in DD-PPO the workers do "
                "all sampling and training (there is no central learner)."
            )
        if self.backend not in BACKENDS:
            raise ValueError(f"`backend` ({self.backend!r}) must be one of {BACKENDS}.")
        if self.backend == "nccl" and self.num_gpus_per_worker <= 0:
            raise ValueError("backend='nccl' runs on GPUs: set num_gpus_per_worker > 0, or "
                             "use backend='gloo' on CPU workers.")
        check_positive(self, "rollout_fragment_length", "num_envs_per_worker",
                       "collective_timeout_s")
        if self.minibatch_size > self.worker_batch_size:
            raise ValueError(
                f"`minibatch_size` ({self.minibatch_size}) must be <= rollout_fragment_length x "
                f"num_envs_per_worker ({self.worker_batch_size}), each worker's batch."
            )
        if not 0 < self.preemption_threshold <= 1 or not 0 < self.preemption_min_share <= 1:
            raise ValueError("`preemption_threshold` and `preemption_min_share` must lie in "
                             "(0, 1]; preemption_threshold=1.0 turns preemption off.")
        if self.num_cpus_per_worker < 0 or self.num_gpus_per_worker < 0:
            raise ValueError("`num_cpus_per_worker` and `num_gpus_per_worker` must be >= 0.")

    @property
    def worker_batch_size(self) -> int:
        """Samples a worker trains on in a round without preemption."""
        return self.rollout_fragment_length * self.num_envs_per_worker

    @property
    def num_minibatches(self) -> int:
        """Minibatches per epoch, the same on every worker even when preempted."""
        return -(-self.worker_batch_size // self.minibatch_size)

