"""Command line: ``distrl train ppo ...`` and ``distrl eval CHECKPOINT ...``.

Flags are generated from the config dataclasses (tyro), so the CLI and the Python API
share every name: ``--clip-param`` is ``PPOConfig.clip_param``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Annotated

import tyro

from distrl.algos.ddppo import DDPPOConfig
from distrl.algos.ppo import PPOConfig
from distrl.config import RunConfig
from distrl.tuned import tuned

USAGE = """usage: distrl train {ppo,ddppo} [--help] [--tuned NAME] [FLAGS]
       distrl eval CHECKPOINT [--episodes N] [--seed S]
"""


@dataclass(frozen=True)
class TrainPPO:
    """Train PPO. Deployment flags and PPO hyperparameters share one flat namespace."""

    run: Annotated[RunConfig, tyro.conf.OmitArgPrefixes]
    ppo: Annotated[PPOConfig, tyro.conf.OmitArgPrefixes]


@dataclass(frozen=True)
class TrainDDPPO:
    """Train DD-PPO: every worker samples and trains; gradients are all-reduced."""

    run: Annotated[RunConfig, tyro.conf.OmitArgPrefixes]
    ddppo: Annotated[DDPPOConfig, tyro.conf.OmitArgPrefixes]


@dataclass(frozen=True)
class Eval:
    """Mean greedy return of a saved policy."""

    checkpoint: tyro.conf.Positional[str]
    """A run's logdir, its checkpoint/ directory, or a checkpoint.pt file."""
    episodes: int = 10
    """Episodes to run."""
    seed: int = 0
    """Seed of the evaluation envs."""
    json: bool = False
    """Print the result as one JSON object."""


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:2] == ["train", "ppo"]:
        _train(argv[2:], "ppo")
    elif argv[:2] == ["train", "ddppo"]:
        _train(argv[2:], "ddppo")
    elif argv[:1] == ["eval"]:
        _eval(argv[1:])
    else:
        sys.stderr.write(USAGE)
        raise SystemExit(0 if argv[:1] in (["-h"], ["--help"]) else 2)


def _train(args: list[str], algo: str) -> None:
    try:
        name, args = _pop_tuned(args)
        if algo == "ppo":
            from distrl.train.ppo import train_ppo

            cli = tyro.cli(TrainPPO, args=args, prog="distrl train ppo",
                           default=_defaults(name, algo))
            result = train_ppo(cli.ppo, cli.run)
        else:
            from distrl.train.ddppo import train_ddppo

            cli = tyro.cli(TrainDDPPO, args=args, prog="distrl train ddppo",
                           default=_defaults(name, algo))
            result = train_ddppo(cli.ddppo, cli.run)
    except (ValueError, FileNotFoundError, RuntimeError) as err:
        raise SystemExit(f"distrl: error: {err}") from None
    if cli.run.json:
        print(json.dumps(result))
    else:
        print(f"done ({result['stopped_by']}): {result.get('env/steps_total', 0):,} env steps "
              f"in {result.get('time/total_s', 0.0):.1f} s, mean return "
              f"{result.get('env/episode_return_mean', float('nan')):.1f}; "
              f"checkpoint {result['checkpoint']}")


def _pop_tuned(args: list[str]) -> tuple[str | None, list[str]]:
    """Take ``--tuned NAME`` out of the flags: it picks the defaults the others override."""
    for i, arg in enumerate(args):
        if arg == "--tuned" and i + 1 < len(args):
            return args[i + 1], args[:i] + args[i + 2 :]
        if arg.startswith("--tuned="):
            return arg.split("=", 1)[1], args[:i] + args[i + 1 :]
    return None, args


def _defaults(name: str | None, algo: str) -> TrainPPO | TrainDDPPO | None:
    if name is None:
        return None
    t = tuned(name, algo)
    run = RunConfig(env=t.env, stop_return=t.stop_return)
    if algo == "ddppo":
        return TrainDDPPO(run=run, ddppo=t.config)
    return TrainPPO(run=run, ppo=t.ppo_for(PPOConfig().num_env_runners))


def _eval(args: list[str]) -> None:
    from distrl.evaluation import evaluate

    cli = tyro.cli(Eval, args=args, prog="distrl eval")
    try:
        returns = evaluate(cli.checkpoint, cli.episodes, cli.seed)
    except (ValueError, FileNotFoundError) as err:
        raise SystemExit(f"distrl: error: {err}") from None
    mean = sum(returns) / len(returns)
    if cli.json:
        print(json.dumps({"episode_return_mean": mean, "episodes": len(returns),
                          "returns": returns}))
    else:
        print(f"mean greedy return over {len(returns)} episodes: {mean:.2f}")
