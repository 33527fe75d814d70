"""PPO: clipped surrogate, value loss, entropy bonus and adaptive KL penalty.

Schulman et al. 2017, arXiv 1707.06347. Names and meanings follow RLlib's PPOConfig so
that RLlib users feel at home; defaults are chosen for fast, robust learning.
"""

from __future__ import annotations

import copy
import numbers
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

import gymnasium as gym
import torch
import tyro

from distrl.learner import Learner
from distrl.nets import ActorCritic, ModelConfig, mask_logits
from distrl.schedules import ScheduleT, schedule_value, validate_schedule
from distrl.types import PPOBatch, Rollout


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
    advantage_normalization: Literal["batch", "minibatch"] = "batch"
    """Standardize advantages over the whole train batch (RLlib) or over each minibatch
    (SB3, CleanRL)."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """Network architecture."""

    def __post_init__(self) -> None:
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
            sched = validate_schedule(self.lr_schedule, "lr_schedule")
            object.__setattr__(self, "lr_schedule", sched)
            for t, v in sched:
                if v <= 0:
                    raise ValueError(f"`lr_schedule` value {v} at timestep {t:g} must be > 0: "
                                     "Adam cannot step with a learning rate <= 0.")
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

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self, "train_batch_size", "num_envs_per_env_runner")
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
    def num_envs(self) -> int:
        """Sub-envs over all runners (the driver's when num_env_runners=0)."""
        return max(self.num_env_runners, 1) * self.num_envs_per_env_runner

    def _check_batch_is_filled_exactly(self) -> None:
        # Every env samples the same fragment, so a batch is always fragment x envs
        # samples: anything else would silently train on a batch of another size.
        envs, tbs, frag = self.num_envs, self.train_batch_size, self.rollout_fragment_length
        counts = f"{max(self.num_env_runners, 1)} x {self.num_envs_per_env_runner}"
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


def check_positive(cfg: object, *names: str) -> None:
    for name in names:
        value = getattr(cfg, name)
        if value <= 0:
            raise ValueError(f"`{name}` ({value}) must be > 0.")


def ppo_loss(
    dist_inputs: torch.Tensor,  # [B, D] current policy
    values: torch.Tensor,  # [B] current value predictions
    batch: PPOBatch,
    cfg: PPOHyperparams,
    dist,  # Categorical or DiagGaussian
    kl_coeff: float,
    entropy_coeff: float,
    magnet_coeff: float = 0.0,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Total loss and its parts (detached) for one minibatch."""
    logp = dist.log_prob(dist_inputs, batch.actions)
    ratio = torch.exp(logp - batch.logp)
    adv = batch.advantages
    surrogate = torch.min(adv * ratio, adv * ratio.clamp(1 - cfg.clip_param, 1 + cfg.clip_param))
    policy_loss = -surrogate.mean()
    entropy = dist.entropy(dist_inputs).mean()
    vf_err = (values - batch.value_targets).pow(2)
    if cfg.vf_clip_param is not None:
        vf_err = vf_err.clamp(max=cfg.vf_clip_param)
    vf_loss = vf_err.mean()
    loss = policy_loss + cfg.vf_loss_coeff * vf_loss - entropy_coeff * entropy
    parts = {"policy_loss": policy_loss, "vf_loss": vf_loss, "entropy": entropy}
    if cfg.use_kl_loss and kl_coeff > 0:  # skipped otherwise: it costs a softmax per step
        parts["kl"] = dist.kl(batch.dist_inputs, dist_inputs).mean()
        loss = loss + kl_coeff * parts["kl"]
    if magnet_coeff > 0 and batch.magnet_dist_inputs is not None:
        parts["magnet_kl"] = dist.kl(dist_inputs, batch.magnet_dist_inputs).mean()
        loss = loss + magnet_coeff * parts["magnet_kl"]
    return loss, {k: v.detach() for k, v in parts.items()}


def update_kl_coeff(kl_coeff: float, kl: float, kl_target: float) -> float:
    """RLlib's adaptive rule: x1.5 above 2 x target, x0.5 below target / 2."""
    if kl > 2.0 * kl_target:
        return kl_coeff * 1.5
    if kl < 0.5 * kl_target:
        return kl_coeff * 0.5
    return kl_coeff


def ppo_update(
    learner: Learner,
    batch: PPOBatch,
    cfg: PPOHyperparams,
    kl_coeff: float,
    entropy_coeff: float,
    generator: torch.Generator | None = None,
    num_minibatches: int | None = None,
    magnet_coeff: float = 0.0,
) -> dict[str, float]:
    """num_epochs of minibatch SGD on one train batch; returns mean metrics.

    Each epoch splits the batch into ``num_minibatches`` near-equal parts (default
    ceil(len / minibatch_size)); DD-PPO fixes the count so that every worker steps
    equally often (its all-reduce runs in the learner's grad hook) even when preemption
    cut its batch short. The reported ``kl`` is KL(sampling || updated policy) over the
    whole batch after the last step, the quantity the KL coefficient adapts to.
    """
    model = learner.model
    n = len(batch)
    parts_per_epoch = num_minibatches or -(-n // cfg.minibatch_size)
    sums: dict[str, torch.Tensor] = {}
    steps = 0
    for _ in range(cfg.num_epochs):
        order = torch.randperm(n, generator=generator) if cfg.shuffle else torch.arange(n)
        for idx in torch.tensor_split(order, parts_per_epoch):
            mb = batch.index(idx)
            if cfg.advantage_normalization == "minibatch" and len(mb) > 1:
                adv = mb.advantages
                mb.advantages = (adv - adv.mean()) / (adv.std() + 1e-8)
            dist_inputs, values = model(mb.obs)
            dist_inputs = mask_logits(dist_inputs, mb.action_mask)
            loss, parts = ppo_loss(dist_inputs, values, mb, cfg, model.dist, kl_coeff,
                                   entropy_coeff, magnet_coeff)
            parts.update(learner.step(loss, len(mb)))
            for k, v in parts.items():
                sums[k] = sums.get(k, 0.0) + v
            steps += 1
    metrics = {k: float(v) / steps for k, v in sums.items()}
    with torch.no_grad():
        dist_inputs = mask_logits(model(batch.obs)[0], batch.action_mask)
        metrics["kl"] = float(model.dist.kl(batch.dist_inputs, dist_inputs).mean())
    return metrics


@dataclass(frozen=True)
class Magnet:
    """Magnetic mirror descent (Sokota et al. 2023, arXiv 2206.05825) for league learners:
    a KL(policy || magnet) term in the loss. Self-play PPO with an entropy bonus approaches
    an entropy-regularised equilibrium, and with a small bonus it cycles; a magnet that
    becomes the policy every ``update_steps`` makes each phase a proximal step whose
    fixed point is a Nash equilibrium."""

    coeff: Annotated[float, tyro.conf.arg(name="magnet-coeff")] = 0.0
    """Weight of KL(policy || magnet) in the loss (0: off)."""
    update_steps: Annotated[int, tyro.conf.arg(name="magnet-update-steps")] = 0
    """A learner's env steps between magnet updates (each makes the magnet the current
    policy); 0: the magnet stays the initial policy."""

    def __post_init__(self) -> None:
        if self.coeff < 0 or self.update_steps < 0:
            raise ValueError(f"magnet coeff ({self.coeff}) and update_steps "
                             f"({self.update_steps}) must be >= 0.")


class PolicyTrainer:
    """One learning policy of a league: an ActorCritic on the shared Learner, its own
    adaptive KL coefficient and env steps (for its schedules). The same object trains in
    the driver (num_env_runners=0) and inside a Ray PolicyLearner."""

    def __init__(self, obs_space: gym.Space, act_space: gym.Space, cfg: PPOHyperparams,
                 device: torch.device | str = "cpu", magnet: Magnet = Magnet()):
        self.obs_space, self.act_space, self.cfg = obs_space, act_space, cfg
        self.magnet_cfg = magnet
        self.device = torch.device(device)
        self.env_steps = 0
        self.reset()

    def reset(self) -> None:
        """Fresh weights, optimizer, KL coefficient and magnet; env steps keep counting."""
        self.model = ActorCritic(self.obs_space, self.act_space, self.cfg.model).to(self.device)
        self.learner = Learner(self.model, self.cfg.lr_at(self.env_steps), self.cfg.grad_clip)
        self.kl_coeff = self.cfg.kl_coeff
        self.magnet = copy.deepcopy(self.model) if self.magnet_cfg.coeff > 0 else None
        self.magnet_at = self.env_steps

    def update(self, rollout: Rollout, generator: torch.Generator | None = None
               ) -> dict[str, float]:
        """One PPO update (num_epochs of minibatches) on the rollout."""
        cfg = self.cfg
        self.env_steps += rollout.size
        self.learner.set_lr(cfg.lr_at(self.env_steps))
        batch = PPOBatch.from_rollout(rollout, self.device)
        if self.magnet is not None:
            batch.magnet_dist_inputs = self._magnet_inputs(batch)
        metrics = ppo_update(self.learner, batch, cfg, self.kl_coeff,
                             cfg.entropy_coeff_at(self.env_steps), generator,
                             magnet_coeff=self.magnet_cfg.coeff)
        if cfg.use_kl_loss:
            self.kl_coeff = update_kl_coeff(self.kl_coeff, metrics["kl"], cfg.kl_target)
        return metrics

    def _magnet_inputs(self, batch: PPOBatch) -> torch.Tensor:
        """The magnet's masked logits on the batch, after moving it to the policy when due."""
        every = self.magnet_cfg.update_steps
        if every and self.env_steps - self.magnet_at >= every:
            self.magnet.load_state_dict(self.model.state_dict())
            self.magnet_at = self.env_steps
        with torch.no_grad():
            return mask_logits(self.magnet(batch.obs, value=False)[0], batch.action_mask)

    def get_state(self) -> dict[str, Any]:
        magnet = None if self.magnet is None else self.magnet.state_dict()
        return {**self.learner.get_state(), "kl_coeff": self.kl_coeff,
                "env_steps": self.env_steps, "magnet": magnet, "magnet_at": self.magnet_at}

    def set_state(self, state: dict[str, Any]) -> None:
        self.learner.set_state(state)
        self.kl_coeff, self.env_steps = float(state["kl_coeff"]), int(state["env_steps"])
        if self.magnet is not None:
            self.magnet.load_state_dict(state["magnet"])
            self.magnet_at = int(state["magnet_at"])
