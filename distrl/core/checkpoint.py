"""Checkpoints: one directory per component plus a JSON manifest.

    checkpoint/
      manifest.json            algo, format, counters, and every component's files
      run/config.json          the run and algorithm configs
      policy/policy.json       spaces, builder and model config: enough to rebuild the net
      policy/weights.pt        tensors only: torch.load(..., weights_only=True)
      learner/state.pt         optimizer and RNG states: tensors and numbers (weights_only)
      progress/progress.json   counters, the episode window, algorithm state
      runners/state.pkl        env states and a factory env: a pickle, TRUSTED ONLY

Everything a shared checkpoint is used for (``distrl eval``, reading the weights) loads
without unpickling; only ``--resume`` reads the pickle, so resume only runs you trust.
Later components (replay shards, a league's history, many learners) add directories.

A save writes a fresh temp directory, fsyncs every file and directory, and renames it
into place, so a crash leaves either the old checkpoint or the new one, never a mix.
What a killed save leaves beside it (.checkpoint.tmp-*, .checkpoint.old-*) is read by
find_checkpoint when checkpoint/ is gone, and removed by the next good save.
"""

from __future__ import annotations

import importlib
import io
import json
import os
import pickle
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cloudpickle
import gymnasium as gym
import numpy as np
import torch
from gymnasium.utils import EzPickle

FORMAT = 1
MANIFEST = "manifest.json"
DIR = "checkpoint"
MOVED = {
    "distrl.sampling": ("distrl.core.sampling",), "distrl.envs": ("distrl.envs.make",),
    "distrl.filters": ("distrl.models.filters",), "distrl.types": ("distrl.core.types",),
    "distrl.config": ("distrl.core.config",), "distrl.env_runner": ("distrl.ppo.env_runner",),
    "distrl.multiagent": ("distrl.games.games",), "distrl.matches": ("distrl.games.matches",),
    "distrl.apex": ("distrl.apex.roles",), "distrl.algos.apex": ("distrl.apex.config",),
    "distrl.algos.ppo": ("distrl.ppo.config", "distrl.league.config"),
    "distrl.algos.ddppo": ("distrl.ddppo.config",), "distrl.algos.league": (
        "distrl.league.config", "distrl.league.rules"),
    "distrl.nets": ("distrl.models.config", "distrl.models.actor_critic",
                    "distrl.models.q_network", "distrl.models.encoders",
                    "distrl.models.distributions"),
    **{f"distrl.league.{m}": (f"distrl.games.{m}",) for m in (
        "games", "matches", "seats", "batched", "policies", "scoring", "nash")},
    "distrl.core.filters": ("distrl.models.filters",),
    "distrl.runtime.distributed_learners": ("distrl.league.learners",),
    **{f"distrl.core.{old}": (f"distrl.envs.{new}",) for old, new in (
        ("envs", "make"), ("thread_vec", "thread_vec"), ("async_vec", "async_vec"),
        ("envpool_vec", "envpool_vec"), ("env_errors", "errors"),
        ("memory_tasks", "memory_tasks"))},
}
"""Where the names a trusted pickle (runners/state.pkl) may refer to went when the code
was regrouped by algorithm: checkpoints written before still resume."""


def save_checkpoint(directory: Path, algo: str, info: dict[str, Any],
                    components: dict[str, dict[str, Any]]) -> Path:
    """Write ``components`` ({component: {file name: object}}) atomically and durably.

    A file's suffix says how its object is written: .json (JSON), .pt (torch.save of
    tensors and numbers), .pkl (cloudpickle).
    """
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.tmp-", dir=directory.parent))
    try:
        for component, files in components.items():
            (tmp / component).mkdir()
            for name, obj in files.items():
                _write(tmp / component / name, obj)
            _fsync(tmp / component)
        manifest = {"format": FORMAT, "algo": algo, **info,
                    "components": {c: sorted(files) for c, files in components.items()}}
        _write(tmp / MANIFEST, manifest)
        _fsync(tmp)
        _swap_into_place(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return directory


def _write(path: Path, obj: Any) -> None:
    if path.suffix == ".json":
        data = json.dumps(obj, indent=1).encode()
    elif path.suffix == ".pt":
        buffer = io.BytesIO()
        torch.save(obj, buffer)
        data = buffer.getvalue()
    elif path.suffix == ".pkl":
        data = cloudpickle.dumps(obj)
    else:
        raise ValueError(f"checkpoint file {path.name!r}: use .json, .pt or .pkl")
    with open(path, "xb") as f:  # the temp directory is new: nothing may exist yet
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _fsync(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _swap_into_place(tmp: Path, directory: Path) -> None:
    """Two renames: the old checkpoint steps aside, the new one takes its name. A crash
    between them leaves the old one under a name find_checkpoint still looks at."""
    old = None
    if directory.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{directory.name}.old-", dir=directory.parent))
        os.rename(directory, old / directory.name)
    os.rename(tmp, directory)
    _fsync(directory.parent)
    # This save's old directory, and every one a killed save left (each may hold a
    # whole replay): the new checkpoint is in place, nothing needs them now.
    for leftover in _leftovers(directory):
        shutil.rmtree(leftover, ignore_errors=True)


def _leftovers(directory: Path) -> list[Path]:
    """The temp and old directories saves of ``directory`` make beside it (never itself)."""
    name = directory.name
    return [*directory.parent.glob(f".{name}.tmp-*"), *directory.parent.glob(f".{name}.old-*")]


def find_checkpoint(path: str | Path) -> Path:
    """Accept a checkpoint directory or a run's logdir; returns the checkpoint directory."""
    p = Path(path)
    for candidate in (p, p / DIR):
        if (candidate / MANIFEST).is_file():
            return candidate
    # A save killed between its two renames leaves no checkpoint/: the previous one in an
    # old-* directory, the new one in its tmp-* directory (complete once its manifest,
    # written last, reads).
    found = _newest_leftover(p / DIR)
    if found is not None:
        return found
    raise FileNotFoundError(
        f"no checkpoint at {str(p)!r}: pass a run's logdir or its {DIR}/ directory "
        f"(a directory holding {MANIFEST})."
    )


def _newest_leftover(directory: Path) -> Path | None:
    """The leftover checkpoint with the highest iteration in its manifest; those whose
    manifest is missing or unreadable (a save killed while writing it) are skipped."""
    found: dict[Path, int] = {}
    for leftover in _leftovers(directory):
        candidate = leftover / directory.name if ".old-" in leftover.name else leftover
        try:
            iteration = read_manifest(candidate).get("iteration")
        except (OSError, ValueError):
            continue
        if isinstance(iteration, int):
            found[candidate] = iteration
    return max(found, key=found.__getitem__, default=None)


def read_manifest(directory: Path) -> dict[str, Any]:
    """A checkpoint's manifest; a damaged one is a ValueError naming the file, which the
    CLI shows as one `distrl: error:` line."""
    path = directory / MANIFEST
    try:
        manifest = json.loads(path.read_bytes())
        if not isinstance(manifest, dict):
            raise ValueError("not a JSON object")
    except ValueError as err:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ValueError(f"checkpoint manifest {str(path)!r} is damaged ({err}); resume "
                         "from another copy of the run, or start a new one.") from None
    return manifest


@dataclass(frozen=True)
class SavedPolicy:
    """policy/policy.json: what rebuilds the saved network without unpickling."""

    builder: str
    """A name of models.builders (actor_critic, recurrent_actor_critic, q_network)."""
    obs_space: gym.Space
    act_space: gym.Space
    model: dict[str, Any]
    """The ModelConfig as JSON."""


class Checkpoint:
    """A saved checkpoint, read a component file at a time."""

    def __init__(self, path: str | Path):
        self.path = find_checkpoint(path)
        self.manifest = read_manifest(self.path)
        if self.manifest.get("format") != FORMAT:
            raise ValueError(f"checkpoint {str(self.path)!r} has format "
                             f"{self.manifest.get('format')}; this distrl reads {FORMAT}.")

    @property
    def algo(self) -> str:
        return self.manifest["algo"]

    @property
    def policy_ids(self) -> list[str]:
        """The ids of the policies a game run saved (league, AlphaZero) in its learner
        state; [] for a single-agent run."""
        if "policy_ids" in self.manifest:
            return list(self.manifest["policy_ids"])
        # Saved before the manifest listed them: a game run's learner state holds its
        # policies' weights by id.
        weights = self.learner_state().get("weights")
        return sorted(weights) if isinstance(weights, dict) else []

    # What core.loop.save_run writes, read by name: the only places that know the paths.

    def run_config(self) -> dict[str, Any]:
        """The RunConfig as JSON (env None for a factory env) with ``env_name``."""
        return self.json("run", "config.json")["run"]

    def algo_config(self) -> dict[str, Any]:
        """The algorithm's config as JSON."""
        return self.json("run", "config.json")["config"]

    def policy(self) -> SavedPolicy:
        spec = self.json("policy", "policy.json")
        return SavedPolicy(spec["builder"], space_from_json(spec["obs_space"]),
                           space_from_json(spec["act_space"]), spec["model"])

    def policy_weights(self) -> dict[str, torch.Tensor]:
        """The acting policy's state_dict."""
        return self.tensors("policy", "weights.pt")

    def learner_state(self) -> dict[str, Any]:
        """The learner's state (optimizer, RNG; a game run's policies by id)."""
        return self.tensors("learner", "state.pt")

    def progress(self) -> dict[str, Any]:
        """core.loop.Progress as JSON."""
        return self.json("progress", "progress.json")["progress"]

    def algo_state(self) -> dict[str, Any]:
        """The algorithm's own counters and state (PPO: the KL coefficient)."""
        return self.json("progress", "progress.json")["algo"]

    def replay_state(self) -> dict[str, Any]:
        """The replay of an algorithm that keeps one (Ape-X, AlphaZero)."""
        return self.tensors("replay", "state.pt")

    def runner_states(self) -> list[Any]:
        """The env runners' states, envs in mid-episode included: a trusted pickle."""
        return self.trusted("runners", "state.pkl")["runner_states"]

    def env_factory(self) -> Any:
        """The factory env a run trained on (None for an env given by name): a trusted
        pickle."""
        return self.trusted("runners", "state.pkl")["env_factory"]

    def json(self, component: str, name: str) -> Any:
        return json.loads(self._file(component, name).read_text())

    def tensors(self, component: str, name: str) -> Any:
        """Tensors, numbers, lists and dicts only: never unpickles arbitrary objects. A
        file holding anything else is refused in one line naming it (a ValueError), not
        with torch's advice to load it unsafely."""
        try:
            return torch.load(self._file(component, name), map_location="cpu", weights_only=True)
        except pickle.UnpicklingError:
            raise ValueError(
                f"checkpoint file {str(self.path / component / name)!r} is not tensors "
                "and numbers only, so it is not loaded (unpickling it could run code); "
                "distrl writes no such file: the run was damaged or altered.") from None

    def trusted(self, component: str, name: str) -> Any:
        """A pickle: only for resuming runs you trust (it can run code when loaded)."""
        return trusted_loads(self._file(component, name).read_bytes())

    def _file(self, component: str, name: str) -> Path:
        path = self.path / component / name
        if not path.is_file():
            raise FileNotFoundError(f"checkpoint {str(self.path)!r} has no {component}/{name}")
        return path


class _MovedNames(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        for new in MOVED.get(module, ()):
            found = getattr(importlib.import_module(new), name, None)
            if found is not None:
                return found
        return super().find_class(module, name)


def games_in_progress(state: Any, env_name: str) -> bytes | None:
    """A pickle of envs in mid-episode and what continuing them needs (for trusted_loads),
    or None when they cannot be pickled: then a resume starts fresh episodes (said in one
    line, once per env and process: not at every save)."""
    out = io.BytesIO()
    try:
        _WholeState(out).dump(state)
    except Exception as err:  # a process, socket, C handle ...: each raises its own kind
        if env_name not in _UNSAVABLE:
            _UNSAVABLE.add(env_name)
            print(f"distrl: {env_name}'s envs cannot be saved ({type(err).__name__}: {err}); "
                  "a resume starts fresh episodes.", file=sys.stderr, flush=True)
        return None
    return out.getvalue()


_UNSAVABLE: set[str] = set()
"""The envs whose games_in_progress this process has said cannot be saved."""


class _WholeState(cloudpickle.CloudPickler):
    """Pickles EzPickle objects with their state. EzPickle (gymnasium's MuJoCo envs,
    PettingZoo's classic games) pickles only the constructor's arguments, so an env in
    mid-episode would come back new and never reset."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, EzPickle):
            return _blank, (type(obj),), dict(obj.__dict__), None, None, _set_dict
        return super().reducer_override(obj)


def _blank(cls: type) -> Any:
    return cls.__new__(cls)


def _set_dict(obj: Any, state: dict[str, Any]) -> None:
    obj.__dict__.update(state)


def trusted_loads(data: bytes) -> Any:
    """pickle.loads for distrl's own pickles (trusted input only), finding names under
    the modules they moved to (MOVED)."""
    return _MovedNames(io.BytesIO(data)).load()


def space_to_json(space: gym.Space) -> dict[str, Any]:
    """Box and Discrete (the spaces distrl's nets take) as JSON."""
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.Box):
        return {"type": "Box", "low": space.low.tolist(), "high": space.high.tolist(),
                "shape": list(space.shape), "dtype": str(space.dtype)}
    raise ValueError(f"cannot save space {space}: only Box and Discrete are supported")


def space_from_json(d: dict[str, Any]) -> gym.Space:
    if d["type"] == "Discrete":
        return gym.spaces.Discrete(d["n"], start=d["start"])
    dtype = np.dtype(d["dtype"])
    return gym.spaces.Box(np.array(d["low"], dtype), np.array(d["high"], dtype),
                          tuple(d["shape"]), dtype)
