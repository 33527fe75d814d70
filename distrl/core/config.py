"""Run settings shared by every algorithm: env, seed, stopping, logging, Ray, device.

How many workers sample (and train) is the algorithm's: PPOConfig.num_env_runners,
DDPPOConfig.num_workers.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, TypeVar

import tyro

from distrl.envs.make import EnvSpec, VectorMode
from distrl.models.config import check_choices

T = TypeVar("T")

JSONObject = Annotated[dict[str, Any], tyro.constructors.PrimitiveConstructorSpec(
    nargs=1, metavar="JSON", instance_from_str=lambda args: _json_object(args[0]),
    is_instance=lambda x: isinstance(x, dict), str_from_instance=lambda x: [json.dumps(x)])]
"""A dict given on the command line as one JSON object."""


def _json_object(text: str) -> dict[str, Any]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object like '{{\"key\": 1}}', got {text!r}")
    return value


@dataclass(frozen=True)
class RunConfig:
    """Where and how long a run goes: env, stopping, logging, checkpoints, Ray."""

    env: Annotated[EnvSpec, tyro.conf.arg(constructor=str, metavar="ENV")] = "CartPole-v1"
    """Gymnasium env id, module:EnvId (the module registers it), module:callable (a factory
    or Env class), or (from Python) a factory returning an Env."""
    env_config: JSONObject = dataclasses.field(default_factory=dict)
    """Keyword arguments for gym.make or the factory, as a JSON object."""
    max_episode_steps: int | None = None
    """Truncate every episode (training and evaluation) after this many steps (None: the
    env's own limit; an env that declares none gets 10,000)."""
    vector_mode: VectorMode = "auto"
    """How a runner steps its sub-envs: auto = the env's native vector implementation if
    any, else sync; sync = gymnasium's SyncVectorEnv, in the runner's process; threads =
    the same, its sub-envs stepped in blocks on one thread a core, for an env whose step
    releases the GIL (MuJoCo's: identical trajectories, faster); async =
    the envs step while the policy acts: gymnasium's AsyncVectorEnv, one subprocess per
    sub-env, for an env where stepping is the cost; for envpool: envs, two pools of half
    the envs each (an even number), one stepping while the policy acts on the other."""
    seed: int = 0
    """Seed of weights, envs and sampling; equal seeds give equal in-process runs."""
    stop_return: float | None = None
    """Stop once the mean return of the last 100 episodes (or the evaluation's) reaches this."""
    stop_on: Literal["train", "eval"] = "train"
    """Which return stop_return applies to: training episodes, or evaluation episodes."""
    evaluation_interval: int = 0
    """Evaluate every N iterations on separate env instances in the driver (0: never)."""
    evaluation_duration: int = 10
    """Episodes per evaluation."""
    evaluation_explore: bool = False
    """Sample actions in evaluation instead of acting greedily."""
    max_env_steps: int = 1_000_000
    """Stop after this many env steps."""
    max_time_s: float | None = None
    """Also stop once the run has trained this many seconds (time/total_s, resumes included);
    checked between iterations."""
    logdir: str | None = None
    """Directory for metrics.jsonl, TensorBoard events and checkpoints (default runs/<name>)."""
    checkpoint_every: int = 0
    """Also checkpoint every N iterations (0: only at the end)."""
    resume: str | None = None
    """Continue the run saved in this logdir or checkpoint directory."""
    address: str | None = None
    """Ray cluster to join (else $RAY_ADDRESS, else an embedded local cluster)."""
    placement_strategy: Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] | None = None
    """Place each actor group (env runners, DD-PPO workers, Ape-X actors, match runners)
    as one Ray placement group of a bundle per actor with this strategy (None: Ray's
    default scheduling, actor by actor)."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Learner device; auto picks CUDA when available."""
    num_torch_threads: int = 1
    """Torch intra-op threads of the learner: the driver's, or each league learner
    actor's (small nets run fastest on one; a league's learners update while its
    runners wait, so two use both cores of a two-core machine)."""
    max_restarts: int = 3
    """Replacements of a dead or hung actor of any kind (runner, worker, learner, replay,
    policy store) per slot before the run stops with the actor's last error."""
    actor_timeout_s: float = 600.0
    """An actor that does not answer a call (one sample, one DD-PPO round) within this
    is taken for hung: it is killed and replaced like a dead one."""
    resume_reset: tuple[str, ...] = ()
    """On resume, fields to set back to their defaults, which giving the default value
    cannot say: e.g. ('stop_return',) turns a saved stop_return off, 'magnet.coeff' a
    nested field."""
    resume_as_given: Annotated[bool, tyro.conf.Suppress] = False
    """On resume, every field of the configs passed is the run's new value, not only those
    that differ from the defaults: the CLI parses its flags over the saved configs."""
    json: bool = False
    """Print the final result as one JSON object on the last stdout line."""
    progress: bool = True
    """Show live progress on the terminal (only when stderr is a TTY)."""
    debug: bool = False
    """Show an error's full traceback instead of its one line (also: DISTRL_DEBUG=1)."""
    wandb_project: str | None = None
    """Also log the TensorBoard scalars and the configs to this Weights & Biases project
    (pip install 'distrl[wandb]'); offline under the logdir unless a W&B API key is
    configured or WANDB_MODE says otherwise."""

    PER_INVOCATION: ClassVar[tuple[str, ...]] = (
        "resume", "address", "placement_strategy", "device", "num_torch_threads",
        "max_restarts", "actor_timeout_s", "resume_reset", "resume_as_given", "json", "debug",
        "progress", "wandb_project")
    """Fields a resumed run takes from the new invocation, never from its checkpoint."""

    def __post_init__(self) -> None:
        check_choices(self)
        if not isinstance(self.env_config, dict):
            raise ValueError(f"`env_config` ({self.env_config!r}) must be a dict of keyword "
                             "arguments for the env, e.g. {'max_episode_steps': 200}.")
        if self.evaluation_interval < 0 or self.evaluation_duration <= 0:
            raise ValueError(f"`evaluation_interval` ({self.evaluation_interval}) must be >= 0 "
                             f"and `evaluation_duration` ({self.evaluation_duration}) > 0.")
        if self.stop_on == "eval" and not self.evaluation_interval:
            raise ValueError("`stop_on='eval'` needs evaluations: set evaluation_interval "
                             "(e.g. --evaluation-interval 5).")
        if self.max_restarts < 0 or self.actor_timeout_s <= 0:
            raise ValueError(f"`max_restarts` ({self.max_restarts}) must be >= 0 and "
                             f"`actor_timeout_s` ({self.actor_timeout_s}) > 0.")
        for name in ("max_env_steps", "num_torch_threads"):
            if getattr(self, name) <= 0:
                raise ValueError(f"`{name}` ({getattr(self, name)}) must be > 0.")
        if self.max_time_s is not None and self.max_time_s <= 0:
            raise ValueError(f"`max_time_s` ({self.max_time_s}) must be > 0 (or None: no limit).")
        if self.max_episode_steps is not None and self.max_episode_steps <= 0:
            raise ValueError(f"`max_episode_steps` ({self.max_episode_steps}) must be > 0 "
                             "(or None: the env's own limit).")
        if self.checkpoint_every < 0:
            raise ValueError(f"`checkpoint_every` ({self.checkpoint_every}) must be >= 0.")


def to_json(config: Any) -> dict[str, Any]:
    """A config dataclass as JSON-ready data (tuples become lists)."""
    return dataclasses.asdict(config)


def from_json(cls: type[T], data: dict[str, Any]) -> T:
    """The inverse of to_json: nested config dataclasses rebuilt, lists made tuples."""
    hints = typing.get_type_hints(cls)
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        value, hint = data[f.name], hints[f.name]
        if dataclasses.is_dataclass(hint) and isinstance(value, dict):
            kwargs[f.name] = from_json(hint, value)
        else:
            kwargs[f.name] = _tuples(value)
    return cls(**kwargs)


def _tuples(value: Any) -> Any:
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def check_positive(cfg: object, *names: str) -> None:
    """ValueError naming the first of ``names`` whose value in ``cfg`` is not > 0."""
    for name in names:
        value = getattr(cfg, name)
        if value <= 0:
            raise ValueError(f"`{name}` ({value}) must be > 0.")

