"""Ape-X DQN's config and its rules (Horgan et al. 2018, arXiv 1803.00933): RLlib's
names and defaults (the removed ApexTrainer), each rule a ValueError that says what to
change. The loss, n-step fragments and the epsilon ladder are in apex/dqn.py (n-step
returns in core/returns.py); the replay in apex/replay.py; the roles in apex/roles.py,
on Ray in apex/remote.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from distrl.core.config import check_positive
from distrl.models.config import ModelConfig, check_choices


@dataclass(frozen=True)
class ApexConfig:
    """Ape-X: epsilon-ladder actors, sharded prioritized replay, one learner."""

    num_workers: int = 32
    """Actors that act and build n-step transitions (0: actor, replay and learner in one
    process without Ray, i.e. prioritized double/dueling n-step DQN)."""
    num_envs_per_worker: int = 1
    """Vectorised sub-envs per actor."""
    num_cpus_per_worker: float = 1.0
    """CPUs Ray reserves for each actor."""
    rollout_fragment_length: int = 50
    """Env steps per sub-env in each batch an actor sends to a replay shard."""
    n_step: int = 3
    """Steps of reward summed before bootstrapping (never across an episode end)."""
    gamma: float = 0.99
    """Discount factor."""
    lr: float = 5e-4
    """Adam learning rate."""
    adam_epsilon: float = 1e-8
    """Adam epsilon."""
    grad_clip: float | None = 40.0
    """Clip the global gradient norm to this (None: no clipping)."""
    double_q: bool = True
    """Double Q-learning: the online net picks the next action, the target net rates it."""
    dueling: bool = True
    """Dueling heads: Q = V + A - mean(A)."""
    train_batch_size: int = 512
    """Transitions per learner update."""
    learning_starts: int = 50_000
    """Transitions stored in replay before the learner starts."""
    target_network_update_freq: int = 500_000
    """Copy the online net to the target net every this many trained transitions."""
    max_weight_sync_delay: int = 400
    """An actor gets the newest weights after sending this many env steps."""
    training_intensity: float | None = None
    """Replayed (trained) : sampled transitions; None: the learner trains as fast as it can
    (in-process: one update per fragment)."""
    capacity: int = 2_000_000
    """Transitions the replay holds, split evenly over the shards."""
    num_replay_buffer_shards: int = 4
    """Replay shard actors (in-process: one buffer)."""
    replay_buffer_shards_colocated_with_driver: bool = True
    """Place the replay shards on the learner's (driver's) node; else wherever Ray (or
    `placement_strategy`, given CPUs per shard) puts them."""
    num_cpus_per_replay_shard: float = 0.0
    """CPUs Ray reserves for each replay shard (0: shards share their node's CPUs; the
    seed reserves 1 each)."""
    prioritized_replay_alpha: float = 0.6
    """Priority exponent: P(i) ~ (|td_i| + eps) ** alpha."""
    prioritized_replay_beta: float = 0.4
    """Importance-sampling exponent."""
    prioritized_replay_eps: float = 1e-6
    """Added to |td| so no transition gets priority 0."""
    checkpoint_replay: bool = False
    """In process (num_workers=0): save the replay, the actor's envs and every counter in
    checkpoints, so that a resume continues exactly (the replay is large: about
    replay/bytes_per_transition x capacity). Ray runs refill their shards on resume."""
    worker_side_prioritization: bool = True
    """Actors compute initial priorities with their own net (else: the max priority)."""
    epsilon_base: float = 0.4
    """Epsilon ladder: actor i of N explores with base ** (1 + alpha * i / (N - 1))."""
    epsilon_alpha: float = 7.0
    """Epsilon ladder exponent (see epsilon_base)."""
    learner_queue_size: int = 16
    """Replayed batches waiting for the learner thread."""
    replay_requests_per_shard: int = 2
    """Sample requests in flight per shard, so the learner never waits on one shard."""
    min_time_s_per_reporting: float = 1.0
    """An iteration (one metrics line) lasts at least this long..."""
    min_sample_timesteps_per_reporting: int = 1_000
    """...and samples at least this many env steps."""
    model: ModelConfig = field(default_factory=lambda: ModelConfig(hiddens=(256,),
                                                                 activation="relu"))
    """Q-network: dense layers after the encoder (a conv stack for images)."""

    def __post_init__(self) -> None:
        check_choices(self)
        if self.model.use_lstm:
            raise ValueError("Ape-X's Q-network is feed-forward: use_lstm needs recurrent "
                             "replay (R2D2, another algorithm). Use PPO or DD-PPO for memory.")
        check_positive(self, "rollout_fragment_length", "n_step", "train_batch_size",
                       "capacity", "num_replay_buffer_shards", "num_envs_per_worker",
                       "learner_queue_size", "replay_requests_per_shard",
                       "target_network_update_freq", "lr", "max_weight_sync_delay")
        if self.num_workers < 0:
            raise ValueError(f"`num_workers` ({self.num_workers}) must be >= 0 "
                             "(0: one process without Ray).")
        if self.training_intensity is not None and self.training_intensity <= 0:
            raise ValueError(
                f"`training_intensity` ({self.training_intensity}) must be > 0: it is the "
                "ratio of trained to sampled transitions (e.g. 1.0, or 8.0 to replay each "
                "transition ~8 times); leave it unset to train as fast as the learner can.")
        if self.num_replay_buffer_shards > self.capacity:
            raise ValueError(
                f"`num_replay_buffer_shards` ({self.num_replay_buffer_shards}) is more than "
                f"`capacity` ({self.capacity}): each shard holds capacity / shards "
                "transitions. Use fewer shards or a larger capacity.")
        if self.shard_capacity < self.train_batch_size:
            raise ValueError(
                f"each replay shard holds capacity / num_replay_buffer_shards = "
                f"{self.shard_capacity} transitions, fewer than `train_batch_size` "
                f"({self.train_batch_size}). Raise capacity to at least "
                f"{self.train_batch_size * self.num_replay_buffer_shards} or lower the batch.")
        if self.prioritized_replay_alpha < 0.0:
            raise ValueError(f"`prioritized_replay_alpha` ({self.prioritized_replay_alpha}) "
                             "must be >= 0 (0: uniform replay).")
        check_positive(self, "prioritized_replay_eps", "adam_epsilon")
        _check_range(self, "gamma", 0.0, 1.0)
        _check_range(self, "prioritized_replay_beta", 0.0, 1.0)
        if self.grad_clip is not None and self.grad_clip <= 0:
            raise ValueError(f"`grad_clip` ({self.grad_clip}) must be > 0, or None.")
        for name in ("learning_starts", "min_sample_timesteps_per_reporting",
                     "min_time_s_per_reporting", "num_cpus_per_worker",
                     "num_cpus_per_replay_shard", "epsilon_alpha"):
            if getattr(self, name) < 0:
                raise ValueError(f"`{name}` ({getattr(self, name)}) must be >= 0.")
        if self.model.observation_filter != "NoFilter":
            raise ValueError("Ape-X actors do not share observation statistics: leave "
                             "observation_filter at 'NoFilter'.")
        if not 0.0 < self.epsilon_base <= 1.0:
            raise ValueError(f"`epsilon_base` ({self.epsilon_base}) must be in (0, 1].")

    @property
    def num_shards(self) -> int:
        """Replay buffers actually made: one when everything runs in one process."""
        return self.num_replay_buffer_shards if self.num_workers else 1

    @property
    def shard_capacity(self) -> int:
        return self.capacity // self.num_shards


def _check_range(cfg: object, name: str, low: float, high: float) -> None:
    value = getattr(cfg, name)
    if not low <= value <= high:
        raise ValueError(f"`{name}` ({value}) must lie in [{low:g}, {high:g}].")
