"""Runner-side policy cache: many policies, one module skeleton per architecture, and
weights as zero-copy views of one flat float32 buffer per policy.

On Ray the buffer is the read-only numpy array that ``ray.get`` maps from the node's
shared-memory object store, so every runner on a node reads the same physical pages and
an extra policy costs a runner only its small view objects. Pure torch/numpy: the Ray
side is distrl.store.remote.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from distrl.models.builders import builder_for
from distrl.models.config import ModelConfig


@dataclass(frozen=True)
class PolicySpec:
    """What a policy id maps to: its spaces and architecture."""

    obs_space: gym.Space
    """Observation space the policy acts on."""
    act_space: gym.Space
    """Action space it acts in."""
    model: Any = field(default_factory=ModelConfig)
    """The builder's config, hashable (a frozen dataclass): a ModelConfig for actor_critic."""
    builder: str = "actor_critic"
    """Name of the registered builder (register_builder) that makes the module."""

    def __post_init__(self) -> None:
        builder_for(self.builder)  # an unknown name fails where the spec is written

    def key(self) -> tuple:
        """Equal keys share one module skeleton (gym spaces are not hashable)."""
        return (self.builder, repr(self.obs_space), repr(self.act_space), self.model)

    def build(self) -> nn.Module:
        return builder_for(self.builder)(self.obs_space, self.act_space, self.model)


@dataclass(frozen=True)
class FlatLayout:
    """Where each named parameter lies in a flat float32 buffer."""

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    offsets: tuple[int, ...]
    size: int

    @staticmethod
    def of(module: torch.nn.Module) -> FlatLayout:
        names, shapes, offsets, n = [], [], [], 0
        for name, p in module.state_dict().items():
            names.append(name)
            shapes.append(tuple(p.shape))
            offsets.append(n)
            n += p.numel()
        return FlatLayout(tuple(names), tuple(shapes), tuple(offsets), n)

    def flatten(self, state: dict[str, torch.Tensor]) -> np.ndarray:
        flat = np.empty(self.size, dtype=np.float32)
        for name, shape, off in zip(self.names, self.shapes, self.offsets, strict=True):
            flat[off : off + int(np.prod(shape))] = state[name].detach().cpu().numpy().ravel()
        return flat

    def views(self, flat: np.ndarray) -> dict[str, torch.Tensor]:
        """Tensors sharing memory with ``flat``: no copy is made."""
        self._check(flat)
        base = frozen_tensor(flat)
        return {name: base[off : off + int(np.prod(shape))].view(shape)
                for name, shape, off in zip(self.names, self.shapes, self.offsets, strict=True)}

    def arrays(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        """Numpy views of ``flat`` by name, for a reader that copies them into a module
        of its own (``load_state_dict``) instead of acting with views."""
        self._check(flat)
        return {name: flat[off : off + int(np.prod(shape))].reshape(shape)
                for name, shape, off in zip(self.names, self.shapes, self.offsets, strict=True)}

    def _check(self, flat: np.ndarray) -> None:
        if flat.dtype != np.float32 or flat.size != self.size:
            raise ValueError(f"buffer of {flat.size} {flat.dtype} does not fit a layout of "
                             f"{self.size} float32: the policy's spec does not match its weights.")


def readonly_tensor(array: np.ndarray) -> torch.Tensor:
    """A tensor sharing memory with ``array``, which may be a read-only view of Ray's
    shared memory: callers only read through it, so torch's warning is moot."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(array)


def frozen_tensor(array: np.ndarray) -> torch.Tensor:
    """A tensor sharing memory with ``array`` through which nothing can be written.

    ``array`` is the node's one shared copy, read by every runner there, and the mapping
    Ray gives a reader is writable whatever numpy's flag says; torch.from_numpy ignores
    that flag. Flagging the tensor's storage (as torch's FakeTensor does) makes every
    in-place op (add_, zero_, copy_, x[i] = ...) raise RuntimeError ("Cannot access data
    pointer of Tensor ..."), in or out of inference mode, at no cost to reads and with no
    copy. Inference tensors would refuse writes only outside inference mode, and runners
    act inside it. ``.numpy()`` and ``.data_ptr()`` are refused too: read ``array`` or
    use ``.const_data_ptr()``.
    """
    tensor = readonly_tensor(array)
    torch._C._set_throw_on_mutable_data_ptr(tensor)  # private; in torch since 2.1
    return tensor


def flatten_policy(model: nn.Module) -> np.ndarray:
    """The flat buffer a publisher hands to the store."""
    return FlatLayout.of(model).flatten(model.state_dict())


def flatten_arrays(weights: dict[str, np.ndarray]) -> np.ndarray:
    """A state dict's arrays as one new float32 buffer, in the dict's order: a module's
    ``state_dict`` order, the one FlatLayout.of follows."""
    return np.concatenate([np.ravel(w) for w in weights.values()]).astype(np.float32,
                                                                          copy=False)


@dataclass
class CachedPolicy:
    """One policy as a runner acts with it."""

    version: int
    """Version of the weights the views show."""
    skeleton: nn.Module
    """The architecture's shared module; acts with ``params`` passed in."""
    params: dict[str, torch.Tensor]
    """State_dict names -> read-only views of ``flat`` (writes raise RuntimeError)."""
    flat: np.ndarray
    """The buffer the views point into; held so that it stays mapped."""

    def __call__(self, obs: torch.Tensor, **kwargs: Any) -> Any:
        """The skeleton's output: (distribution inputs, values) for actor_critic;
        ``kwargs`` go to the skeleton (actor_critic's ``value``)."""
        return self.skeleton(obs, self.params, **kwargs)

    @property
    def recurrent(self) -> bool:
        return getattr(self.skeleton, "recurrent", False)

    @property
    def arch(self) -> int:
        """Policies of one skeleton share an architecture (games.batched stacks them)."""
        return id(self.skeleton)

    @property
    def functional(self) -> nn.Module:
        return self.skeleton

    def layers(self) -> Any:
        """Its weights as the skeleton's forward_stacked takes them (games.batched)."""
        return self.skeleton.layers(self.params)

    def step(self, obs: torch.Tensor, state: Any, prev_actions: torch.Tensor,
             prev_rewards: torch.Tensor) -> Any:
        """A recurrent skeleton's step with these weights (models.recurrent)."""
        return self.skeleton.step(obs, state, prev_actions, prev_rewards, self.params)

    def initial_state(self, n: int) -> Any:
        return self.skeleton.initial_state(n)


class PolicyCache:
    """Views of the policies a runner uses, newest version only, LRU-bounded."""

    def __init__(self, max_cached_policies: int = 64):
        if max_cached_policies <= 0:
            raise ValueError(f"`max_cached_policies` ({max_cached_policies}) must be > 0.")
        self.max_cached_policies = max_cached_policies
        self._policies: OrderedDict[str, CachedPolicy] = OrderedDict()
        self._skeletons: dict[tuple, tuple[nn.Module, FlatLayout]] = {}

    def __contains__(self, policy_id: str) -> bool:
        return policy_id in self._policies

    def __len__(self) -> int:
        return len(self._policies)

    def ids(self) -> list[str]:
        """Cached policy ids, least recently used first."""
        return list(self._policies)

    def version(self, policy_id: str) -> int:
        """Cached version, or -1 when the policy is not cached."""
        cached = self._policies.get(policy_id)
        return -1 if cached is None else cached.version

    def stale(self, latest: dict[str, int]) -> list[str]:
        """Ids whose published version is newer than the cached one (or not cached)."""
        return [pid for pid, v in latest.items() if v > self.version(pid)]

    def put(self, policy_id: str, version: int, spec: PolicySpec,
            flat: np.ndarray) -> CachedPolicy:
        """Map a version's buffer; an older or equal version than cached changes nothing."""
        if version <= self.version(policy_id):
            return self.get(policy_id)
        skeleton, layout = self._skeleton(spec)
        self._policies[policy_id] = CachedPolicy(version, skeleton, layout.views(flat), flat)
        self._policies.move_to_end(policy_id)
        while len(self._policies) > self.max_cached_policies:
            self._policies.popitem(last=False)  # least recently used
        return self._policies[policy_id]

    def get(self, policy_id: str) -> CachedPolicy:
        """The cached policy, marked most recently used; KeyError when not cached."""
        self._policies.move_to_end(policy_id)
        return self._policies[policy_id]

    def drop(self, policy_id: str) -> None:
        self._policies.pop(policy_id, None)

    def _skeleton(self, spec: PolicySpec) -> tuple[nn.Module, FlatLayout]:
        key = spec.key()
        if key not in self._skeletons:
            skeleton = spec.build().requires_grad_(False)
            self._skeletons[key] = (skeleton, FlatLayout.of(skeleton))
        return self._skeletons[key]

