"""Weights & Biases logging (RunConfig.wandb_project): the scalars TensorBoard gets, at
the same steps, and the run's configs. wandb is imported here only, and only when a run
asks for it (``pip install 'distrl[wandb]'``).

Offline-safe: without an API key (WANDB_API_KEY, or `wandb login`) the run logs offline
under its logdir, for `wandb sync` later; WANDB_MODE, when set, decides instead. An online
start that fails (no network) falls back to offline rather than failing the run."""

from __future__ import annotations

import dataclasses
import importlib.util
import netrc
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from distrl.core.config import RunConfig, to_json
from distrl.envs.make import env_name

NEEDS = "--wandb-project needs the wandb package: pip install 'distrl[wandb]'."


def check_wandb(project: str | None) -> None:
    """Fail before any worker starts when W&B is asked for but not installed."""
    if project is not None and importlib.util.find_spec("wandb") is None:
        raise ImportError(NEEDS)


class WandbLogger:
    """One W&B run, fed by MetricsLogger."""

    def __init__(self, run: Any):
        self.run = run

    def log(self, scalars: dict[str, float], step: int) -> None:
        self.run.log(scalars, step=step)

    def close(self) -> None:
        self.run.finish()


def open_wandb(algo: str, config: Any, run: RunConfig, logdir: Path) -> WandbLogger | None:
    """A W&B run named after the logdir, writing under it (or $WANDB_DIR); None when the
    run did not ask for one."""
    if run.wandb_project is None:
        return None
    try:
        import wandb
    except ImportError:
        raise ImportError(NEEDS) from None
    logdir.mkdir(parents=True, exist_ok=True)
    mode = os.environ.get("WANDB_MODE") or ("online" if has_credentials() else "offline")
    # console="off": W&B must not wrap stderr, where the live progress table is drawn.
    kwargs = dict(project=run.wandb_project, name=logdir.name,
                  dir=os.environ.get("WANDB_DIR") or str(logdir),
                  config=configs(algo, config, run),
                  settings=wandb.Settings(console="off", silent=True))
    return WandbLogger(_init(wandb, mode, kwargs))


def _init(wandb: Any, mode: str, kwargs: dict[str, Any]) -> Any:
    """wandb.init in ``mode``; offline when an online start fails; one line when offline."""
    try:
        wb = wandb.init(mode=mode, **kwargs)
    except Exception as err:
        if mode != "online":
            raise
        first = str(err).splitlines()[0] if str(err) else ""
        wb = wandb.init(mode="offline", **kwargs)
        _say(f"W&B could not start online ({type(err).__name__}: {first}); logs offline "
             f"to {wb.settings.sync_dir} instead")
        return wb
    if mode == "offline":
        why = "WANDB_MODE=offline" if os.environ.get("WANDB_MODE") else "no W&B API key"
        _say(f"W&B logs offline ({why}) to {wb.settings.sync_dir}; `wandb sync` of that "
             "directory uploads it (after `wandb login`)")
    return wb


def _say(text: str) -> None:
    print(f"distrl: {text}.", file=sys.stderr, flush=True)


def has_credentials() -> bool:
    """Whether W&B has an API key: in the environment, or in ~/.netrc from `wandb login`."""
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        return True
    host = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname
    try:
        return netrc.netrc(os.environ.get("NETRC")).authenticators(host or "") is not None
    except (OSError, netrc.NetrcParseError):
        return False  # no ~/.netrc (or one we cannot read): no key there


def configs(algo: str, config: Any, run: RunConfig) -> dict[str, Any]:
    """The run's configs as W&B shows them (a factory env by its name)."""
    return {"algo": algo, "config": to_json(config),
            "run": to_json(dataclasses.replace(run, env=env_name(run.env)))}
