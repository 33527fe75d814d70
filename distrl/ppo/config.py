"""PPO's hyperparameters: the loss and SGD knobs PPO, DD-PPO and league learners share
(PPOHyperparams), and PPOConfig (those plus PPO's env runners).

Schulman et al. 2017, arXiv 1707.06347. Names and meanings follow RLlib's PPOConfig so
that RLlib users feel at home; defaults are chosen for fast, robust learning.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from typing import Annotated, Literal

import tyro

from distrl.core.config import check_positive
from distrl.core.schedules import (
    ScheduleT,
    schedule_value,
    validate_lr_schedule,
    validate_schedule,
)
from distrl.models.config import ModelConfig, check_choices


@dataclass(frozen=True)
class PPOHyperparams:
    """The loss and SGD knobs that PPO and DD-PPO share (ppo_update reads only these)."""

    lr: float = 3e-4
    """Adam learning rate (ignored when lr_schedule is set)."""
    lr_schedule: ScheduleT | None = None
    """Learning rate as [[timestep, value], ...], linearly interpolated over env steps."""
    gamma: float = 0.99
    """Discount factor."""
    lambda_: Annotated[float, tyro.conf.arg(aliases=("--lambda",))] = 0.95
    """GAE lambda."""
    use_critic: bool = True
    """Learn a value function as baseline (needed to bootstrap truncated fragments)."""
    use_gae: bool = True
    """Use GAE(lambda); off = lambda 1 (bootstrapped Monte Carlo advantages)."""
    use_kl_loss: bool = True
    """Add an adaptive KL(old || new) penalty to the loss."""
    kl_coeff: float = 0.2
    """Initial KL penalty coefficient."""
    kl_target: float = 0.01
    """KL target: the coefficient x1.5 when KL > 2 x target, x0.5 when KL < target / 2."""
    clip_param: float = 0.2
    """PPO ratio clip epsilon."""
    vf_clip_param: float | None = None
    """Clip of the squared value error (RLlib's meaning; None: no clip). RLlib's 10.0
    silences the value gradient wherever |error| > 3.2, i.e. early on any env whose
    returns exceed ~3: set it only with the scale of your returns in mind."""
    vf_loss_coeff: float = 0.5
    """Weight of the value loss."""
    entropy_coeff: float | ScheduleT = 0.0
    """Entropy bonus: a float, or a schedule [[timestep, value], ...]."""
    grad_clip: float | None = 0.5
    """Clip the global gradient norm to this (None: no clipping)."""
    minibatch_size: int = 256
    """Samples per SGD step."""
    num_epochs: int = 10
    """Passes over the train batch per iteration (RLlib's num_sgd_iter)."""
    shuffle: bool = True
    """Shuffle the train batch before each epoch."""
    advantage_normalization: Literal["batch", "minibatch", "none"] = "batch"
    """Standardize advantages over the whole train batch (RLlib) or over each minibatch
    (SB3, CleanRL), or not at all (the loss's other terms then weigh against
    advantages in reward units, e.g. a league magnet against chips)."""
    compile_loss: bool = False
    """torch.compile each minibatch's forward and loss (feed-forward models, no extra loss
    terms): fused kernels, less Python a step; the first update compiles for seconds and
    needs a C++ compiler on CPU. Float rounding differs from eager's. Coefficients that
    change between updates (an adapting KL coefficient, an entropy schedule) compile it
    again each time, and past torch's recompile limit (8) it runs eager: use it with
    fixed ones (use_kl_loss=False), as the humanoid entry does."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """Network architecture."""

    def __post_init__(self) -> None:
        check_choices(self)
        check_positive(self, "lr", "minibatch_size", "num_epochs", "clip_param")
        if self.vf_clip_param is not None and self.vf_clip_param <= 0:
            raise ValueError(f"`vf_clip_param` ({self.vf_clip_param}) must be > 0, or None.")
        if not self.use_critic:
            raise ValueError(
                "`use_critic=False` cannot work: env runners cut episodes into fragments, and "
                "only a value function can estimate the return past the cut. Keep "
                "use_critic=True (set use_gae=False for lambda=1 advantages)."
            )
        # Lists (Python, JSON) become tuples of floats: the frozen config stays hashable
        # and equal to the same schedule written as tuples.
        if isinstance(self.entropy_coeff, numbers.Real):
            if self.entropy_coeff < 0:
                raise ValueError(f"`entropy_coeff` ({self.entropy_coeff}) must be >= 0.0.")
        else:
            sched = validate_schedule(self.entropy_coeff, "entropy_coeff")
            object.__setattr__(self, "entropy_coeff", sched)
            if any(v < 0 for _, v in sched):
                raise ValueError("`entropy_coeff` schedule values must be >= 0.0.")
        if self.lr_schedule is not None:
            object.__setattr__(self, "lr_schedule", validate_lr_schedule(self.lr_schedule))
        if not 0 <= self.gamma <= 1 or not 0 <= self.lambda_ <= 1:
            raise ValueError(
                f"`gamma` ({self.gamma}) and `lambda_` ({self.lambda_}) must lie in [0, 1]."
            )
        if self.grad_clip is not None and self.grad_clip <= 0:
            raise ValueError(f"`grad_clip` ({self.grad_clip}) must be > 0, or None to disable it.")
        if self.kl_coeff < 0 or self.kl_target < 0:
            raise ValueError("`kl_coeff` and `kl_target` must be >= 0.")

    @property
    def gae_lambda(self) -> float:
        """The lambda env runners use: use_gae=False means lambda 1."""
        return self.lambda_ if self.use_gae else 1.0

    def lr_at(self, timestep: int) -> float:
        return self.lr if self.lr_schedule is None else schedule_value(self.lr_schedule, timestep)

    def entropy_coeff_at(self, timestep: int) -> float:
        if isinstance(self.entropy_coeff, tuple):
            return schedule_value(self.entropy_coeff, timestep)
        return float(self.entropy_coeff)

    def advantage_stats(self) -> tuple[float, float] | None:
        """(mean, std) to standardize a batch's advantages with: (0, 1) when they stay as
        they are, None for the batch's own."""
        return (0.0, 1.0) if self.advantage_normalization == "none" else None


@dataclass(frozen=True)
class PPOConfig(PPOHyperparams):
    """PPO: env runners sample, one learner in the driver updates (deployment in RunConfig)."""

    train_batch_size: int = 2048
    """Env samples per training iteration, over all env runners: exactly
    rollout_fragment_length x max(num_env_runners, 1) x num_envs_per_env_runner."""
    rollout_fragment_length: int | Literal["auto"] = "auto"
    """Steps per env per sample call; auto = train_batch_size / (runners x envs per runner),
    which must divide evenly."""
    num_env_runners: int = 2
    """Ray actors that sample in parallel; 0 samples in the driver with no Ray at all."""
    num_envs_per_env_runner: int = 8
    """Vectorised sub-envs per runner (and in the driver when num_env_runners=0)."""
    num_cpus_per_env_runner: float = 1.0
    """CPUs Ray reserves for each env runner."""
    normalize_rewards: bool = False
    """Divide rewards by the running std of the discounted return (SB3's VecNormalize,
    CleanRL's NormalizeReward), clipped to +-10; reported returns stay unscaled."""
    overlap: bool = False
    """Runners sample the next batch with the weights of one update ago while the learner
    trains: faster wall time where sampling and learning cost alike, one update of policy
    lag that PPO's clipped ratio absorbs."""
    recompute_advantages: bool = False
    """Before each epoch after the first, value the batch's steps again with the value
    function being trained and recompute GAE's advantages and value targets (Andrychowicz
    et al. 2021, Tianshou's recompute_adv). Feed-forward policies; one more forward of
    the batch an epoch, and its steps kept beside it (about twice the observations)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self, "train_batch_size", "num_envs_per_env_runner")
        if self.recompute_advantages and self.model.use_lstm:
            raise ValueError("recompute_advantages takes feed-forward policies: a recurrent "
                             "batch would have to be unrolled again from its stored states. "
                             "Drop recompute_advantages or use_lstm.")
        if self.minibatch_size > self.train_batch_size:
            raise ValueError(
                f"`minibatch_size` ({self.minibatch_size}) must be <= `train_batch_size` "
                f"({self.train_batch_size}): each epoch splits the train batch into minibatches. "
                "Lower minibatch_size or raise train_batch_size."
            )
        frag = self.rollout_fragment_length
        if frag != "auto" and (not isinstance(frag, int) or frag <= 0):
            raise ValueError(
                f"`rollout_fragment_length` ({frag!r}) must be a positive int or 'auto'."
            )
        if self.num_env_runners < 0:
            raise ValueError(
                f"`num_env_runners` ({self.num_env_runners}) must be >= 0 (0 = sample in-process)."
            )
        if self.num_cpus_per_env_runner < 0:
            raise ValueError("`num_cpus_per_env_runner` must be >= 0.")
        self._check_batch_is_filled_exactly()

    @property
    def in_driver(self) -> bool:
        """num_env_runners=0: one sampler in the driver's own process, and no Ray."""
        return self.num_env_runners == 0

    @property
    def samplers(self) -> int:
        """How many sample at once: each runner, or the driver's one sampler."""
        return max(self.num_env_runners, 1)

    @property
    def num_envs(self) -> int:
        """Sub-envs over all samplers."""
        return self.samplers * self.num_envs_per_env_runner

    def _check_batch_is_filled_exactly(self) -> None:
        # Every env samples the same fragment, so a batch is always fragment x envs
        # samples: anything else would silently train on a batch of another size.
        envs, tbs, frag = self.num_envs, self.train_batch_size, self.rollout_fragment_length
        counts = f"{self.samplers} x {self.num_envs_per_env_runner}"
        if frag == "auto":
            if tbs % envs:  # ceil(tbs / envs) steps per env would overshoot the batch
                lo, hi = tbs // envs * envs, (tbs // envs + 1) * envs
                use = f"{lo} or {hi}" if lo else f"{hi}"
                raise ValueError(
                    f"`train_batch_size` ({tbs}) must be a multiple of max(num_env_runners, 1) "
                    f"x num_envs_per_env_runner ({counts} = {envs}) with "
                    "rollout_fragment_length='auto', so that every env samples the same number "
                    f"of steps: set train_batch_size={use}, or change the env counts."
                )
        elif frag * envs != tbs:
            fix = f"set train_batch_size={frag * envs}"
            if tbs % envs == 0:
                fix += f", or rollout_fragment_length={tbs // envs} (or 'auto')"
            raise ValueError(
                f"`rollout_fragment_length` x max(num_env_runners, 1) x num_envs_per_env_runner "
                f"({frag} x {counts} = {frag * envs}) must equal `train_batch_size` ({tbs}), "
                f"the samples of one iteration: {fix}."
            )

    def fragment_length(self) -> int:
        """Steps per env per sample call; x num_envs it is exactly train_batch_size."""
        if self.rollout_fragment_length != "auto":
            return self.rollout_fragment_length
        return self.train_batch_size // self.num_envs

