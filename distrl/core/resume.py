"""Resume: the configs a resumed run takes from its checkpoint and from the new
invocation (nested configs merged field by field; resume_reset for defaults), and the
directory it continues in.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

from distrl.core.checkpoint import MANIFEST, Checkpoint
from distrl.core.config import RunConfig, from_json
from distrl.envs.make import env_name


def saved_configs(ckpt: Checkpoint, config_cls: type, factory: bool = True
                  ) -> tuple[Any, RunConfig]:
    """The algorithm and run configs a checkpoint was saved with. A factory env is in the
    trusted pickle: read only with ``factory`` (else the env stays RunConfig's default)."""
    saved = ckpt.run_config()
    env = saved["env"]
    if env is None:
        env = ckpt.env_factory() if factory else RunConfig.env
    return (from_json(config_cls, ckpt.algo_config()), from_json(RunConfig, {**saved, "env": env}))


def resume_logdir(path: str | Path) -> Path:
    """The run directory of ``--resume PATH`` (a logdir, or its checkpoint/ directory):
    a resumed run goes on writing there, wherever it was first written."""
    path = Path(path)
    return path.parent if (path / MANIFEST).is_file() else path


def resumed_configs(ckpt: Checkpoint, config: Any, run: RunConfig) -> tuple[Any, RunConfig]:
    """The checkpoint's configs, with the fields the caller set applied on top (those
    that differ from the class defaults, nested configs field by field; every field with
    run.resume_as_given), and those named in run.resume_reset set back to their
    defaults; every change is reported. The one place a resume merges configs."""
    saved_config, saved_run = saved_configs(ckpt, type(config))
    env = saved_run.env
    if env_name(run.env) not in (env_name(RunConfig.env), env_name(env)):
        raise ValueError(
            f"a resumed run keeps its env: the checkpoint trained on {env_name(env)!r}, "
            f"not {env_name(run.env)!r}. Drop --env (env=) to resume, or start a new run."
        )
    if run.env_config and run.env_config != saved_run.env_config:
        raise ValueError(
            f"a resumed run keeps its env_config ({saved_run.env_config}): its envs are "
            "restored as they were. Drop --env-config (env_config=), or start a new run."
        )
    if config.model != type(config)().model and config.model != saved_config.model:
        raise ValueError(f"a resumed run keeps its network ({saved_config.model}); "
                         "drop the model flags or start a new run.")
    resets = _reset_paths(run.resume_reset, config, run)
    every = run.resume_as_given
    merged_run = _merge(saved_run, run, RunConfig(), resets, every,
                        skip=("env", "env_config", "logdir", *RunConfig.PER_INVOCATION))
    keep = {k: getattr(run, k) for k in RunConfig.PER_INVOCATION}
    keep["logdir"] = run.logdir or str(resume_logdir(run.resume))
    config = _merge(saved_config, config, type(config)(), resets, every, skip=("model",))
    return config, dataclasses.replace(merged_run, **keep)


def _reset_paths(names: tuple[str, ...], config: Any, run: RunConfig) -> set[str]:
    """run.resume_reset checked against the fields of both configs (dotted for nested)."""
    known = _paths(config) | _paths(run)
    unknown = sorted(set(names) - known)
    if unknown:
        raise ValueError(f"resume_reset names {unknown}, which are no fields of this run; "
                         f"use names like 'stop_return' or 'magnet.coeff'.")
    return set(names)


def _paths(config: Any, prefix: str = "") -> set[str]:
    out = set()
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        out.add(prefix + f.name)
        if dataclasses.is_dataclass(value):
            out |= _paths(value, f"{prefix}{f.name}.")
    return out


def _merge(saved: Any, given: Any, default: Any, resets: set[str], every: bool,
           skip: tuple[str, ...] = (), prefix: str = "") -> Any:
    """``saved`` with each field of ``given`` that differs from ``default`` (``every``:
    each field of ``given``; nested configs merged field by field, so one given field
    leaves its siblings as saved) and each field in ``resets`` set back to ``default``'s
    value."""
    changes = {}
    for f in dataclasses.fields(saved):
        name = prefix + f.name
        old, new, base = getattr(saved, f.name), getattr(given, f.name), getattr(default, f.name)
        if f.name in skip:
            continue
        if name in resets:
            value = base
        elif dataclasses.is_dataclass(old) and type(old) is type(new):
            value = _merge(old, new, base, resets, every, prefix=name + ".")
        else:
            value = new if every or new != base else old
        if value != old:
            if not dataclasses.is_dataclass(old):
                print(f"distrl: resume: {name} {old!r} -> {value!r}", file=sys.stderr,
                      flush=True)
            changes[f.name] = value
    return dataclasses.replace(saved, **changes) if changes else saved
