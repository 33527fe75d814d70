"""What the command line says besides training: the commands, the algorithms and their
tuned examples, the flag a user meant, and which algorithm an env belongs to."""

from __future__ import annotations

import dataclasses
import difflib
import textwrap
import typing
from typing import Annotated

from distrl.core.config import RunConfig
from distrl.envs.make import env_name
from distrl.registry import ALGORITHMS
from distrl.tuned import TABLES

GAMES = ("league", "alphazero")
"""The algorithms that play multi-agent games (PettingZoo, OpenSpiel); the others train
single-agent gymnasium envs."""

GAME_PREFIXES = ("pettingzoo", "openspiel")

COMMANDS_HELP = """
commands:
  train ALGO   train an algorithm on an env: {algos}
  eval RUN     play a saved run's policy: mean return, videos, win rates of a game run
  play RUN     play a game in the terminal against a saved league or AlphaZero run
  export RUN   write a saved policy as one file that runs without distrl (TorchScript, ONNX)
  plot RUN...  draw runs' return, win rates and Elo against env steps and time (a PNG)

examples:
  distrl train ppo --env CartPole-v1 --stop-return 475 --logdir runs/cartpole
  distrl train ppo --tuned cartpole --num-env-runners 0    # tuned, in one process, no Ray
  distrl eval runs/cartpole --episodes 20
  distrl eval runs/c4 --search 50 --opponent run:runs/c4-old  # head-to-head, searching
  distrl play runs/c4 --search 50 --first                   # you against it
  distrl export runs/cartpole --format torchscript
  distrl plot runs/cartpole runs/cartpole-2 --out cartpole.png
  distrl train ppo --help                                   # every flag, with its doc
"""

ALIASES: dict[str, tuple[str, ...]] = {
    "--learning-rate": ("--lr",),
    "--n-steps": ("--rollout-fragment-length",),
    "--num-steps": ("--rollout-fragment-length",),
    "--batch-size": ("--minibatch-size", "--train-batch-size"),
    "--sgd-minibatch-size": ("--minibatch-size",),
    "--n-epochs": ("--num-epochs",),
    "--update-epochs": ("--num-epochs",),
    "--num-sgd-iter": ("--num-epochs",),
    "--gae-lambda": ("--lambda",),
    "--clip-range": ("--clip-param",),
    "--clip-coef": ("--clip-param",),
    "--clip-range-vf": ("--vf-clip-param",),
    "--ent-coef": ("--entropy-coeff",),
    "--vf-coef": ("--vf-loss-coeff",),
    "--max-grad-norm": ("--grad-clip",),
    "--target-kl": ("--kl-target",),
    "--norm-adv": ("--advantage-normalization",),
    "--normalize-advantage": ("--advantage-normalization",),
    "--total-timesteps": ("--max-env-steps",),
    "--timesteps": ("--max-env-steps",),
    "--stop-timesteps": ("--max-env-steps",),
    "--stop-reward": ("--stop-return",),
    "--n-envs": ("--num-envs-per-env-runner", "--num-envs-per-worker"),
    "--num-envs": ("--num-envs-per-env-runner", "--num-envs-per-worker"),
    "--num-envs-per-worker": ("--num-envs-per-env-runner",),
    "--num-workers": ("--num-env-runners",),
    "--num-rollout-workers": ("--num-env-runners", "--num-workers"),
    "--env-id": ("--env",),
    "--env-name": ("--env",),
    "--buffer-size": ("--capacity", "--replay-capacity"),
    "--target-network-frequency": ("--target-network-update-freq",),
    "--target-update-interval": ("--target-network-update-freq",),
    "--checkpoint-freq": ("--checkpoint-every",),
    "--restore": ("--resume",),
    "--log-dir": ("--logdir",),
    "--tensorboard-log": ("--logdir",),
    "--num-gpus": ("--device",),
    "--cuda": ("--device",),
}
"""Names users bring from Stable-Baselines3, CleanRL and RLlib, with distrl's flags for
them (the first this command has is suggested)."""


def main_help(usage: str) -> str:
    return usage + COMMANDS_HELP.format(algos=", ".join(ALGORITHMS))


def tuned_names(algo: str) -> list[str]:
    return sorted(TABLES.get(algo, {}))


def train_help() -> str:
    """`distrl train --help`: the algorithms, one line each, with their tuned examples."""
    width = max(map(len, ALGORITHMS))
    pad = " " * (width + 4)
    rows = [f"  {name:<{width}}  {a.doc}"
            + (f"\n{pad}--tuned {' | '.join(tuned_names(name))}" if tuned_names(name) else "")
            for name, a in ALGORITHMS.items()]
    return ("usage: distrl train ALGO [--tuned NAME] [--print-config] [FLAGS]\n\n"
            "algorithms:\n" + "\n".join(rows) + "\n\n"
            "--tuned NAME starts from a tuned example; any flag still overrides.\n"
            "`distrl train ALGO --help` lists every flag of ALGO, with its doc.\n")


def train_description(algo: str) -> str:
    """The top of `distrl train ALGO --help`: what it is and its tuned examples."""
    names = " | ".join(tuned_names(algo)) or "(none for this algorithm)"
    options = [("--tuned NAME", f"start from a tuned example: {names}; any flag still "
                "overrides (with --help: shows its values)"),
               ("--print-config", "print the configs in force (after --tuned, the flags and "
                "--resume) as JSON, and stop")]
    rows = [textwrap.fill(text, 78, initial_indent=f"{flag:<16}", subsequent_indent=" " * 16)
            for flag, text in options]
    return ALGORITHMS[algo].doc + "\n\n" + "\n".join(rows)


def unknown_args_message(algo: str, cmd: type, unknown: list[str]) -> str:
    """One line for the arguments tyro did not take: each flag with the real one it
    most likely means."""
    known = flag_names(cmd)
    said = []
    for arg in unknown:
        if not arg.startswith("--"):
            if not said:  # a value after an unknown flag belongs to it
                said.append(f"unexpected argument {arg!r}")
            continue
        flag = arg.split("=", 1)[0].replace("_", "-")
        meant = suggest(flag, known)
        said.append(f"unknown flag {arg.split('=', 1)[0]}"
                    + (f" (did you mean {meant}?)" if meant else ""))
    return (f"distrl: error: {'; '.join(said)}. `distrl train {algo} --help` lists every "
            "flag.")


def suggest(flag: str, known: set[str]) -> str | None:
    """The flag of ``known`` that ``flag`` most likely means: a name from another
    library, else the closest spelling."""
    for alias in ALIASES.get(flag, ()):
        if alias in known:
            return alias
    close = difflib.get_close_matches(flag, sorted(known), n=1, cutoff=0.6)
    return close[0] if close else None


def flag_names(cls: type) -> set[str]:
    """The flags of a command dataclass (nested configs without prefixes, as the
    commands' OmitArgPrefixes give them), with their aliases and --no- forms."""
    out: set[str] = set()
    hints = typing.get_type_hints(cls, include_extras=True)
    for f in dataclasses.fields(cls):
        hint, meta = hints[f.name], ()
        if typing.get_origin(hint) is Annotated:
            hint, *meta = typing.get_args(hint)
        if dataclasses.is_dataclass(hint):
            out |= flag_names(hint)
            continue
        flag = "--" + f.name.rstrip("_").replace("_", "-")
        out |= {flag, *(a for m in meta for a in getattr(m, "aliases", None) or ())}
        if hint is bool:
            out.add("--no-" + flag[2:])
    return out


def env_mismatch(algo: str, run: RunConfig) -> str | None:
    """One line when the env cannot be this algorithm's: a game algorithm left on the
    default gymnasium env, or a single-agent one given a multi-agent game."""
    name = env_name(run.env)
    game = name.split(":", 1)[0] in GAME_PREFIXES
    if algo in GAMES and name == RunConfig.env:
        examples = sorted({t.env for t in TABLES.get(algo, {}).values()}
                          | set(_game_examples(algo)))
        tuned = tuned_names(algo)
        return (f"`distrl train {algo}` plays a multi-agent game: pass --env, e.g. "
                + " or ".join(f"--env {e}" for e in examples)
                + (f", or start from --tuned {tuned[0]}" if tuned else "") + ".")
    if algo not in GAMES and game:
        return (f"{name!r} is a multi-agent game and {algo} trains single-agent gymnasium "
                f"envs: train it with `distrl train league --env {name}` (PPO learners in a "
                f"self-play league) or `distrl train alphazero --env {name}` (search, for "
                "two-player board games).")
    return None


def _game_examples(algo: str) -> tuple[str, ...]:
    if algo == "alphazero":  # two-player, perfect information
        return ("openspiel:tic_tac_toe",)
    return ("openspiel:kuhn_poker",)

