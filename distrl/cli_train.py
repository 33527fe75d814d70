"""``distrl train``: its flags over their defaults (a tuned entry's, a resumed run's saved
configs), then the run and its verdict line."""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import sys
from typing import Annotated, Any

import tyro

from distrl.cli_help import env_mismatch, train_description, train_help, unknown_args_message
from distrl.core.checkpoint import Checkpoint
from distrl.core.config import RunConfig
from distrl.core.display import configs_json, headline
from distrl.core.metrics import strict_json
from distrl.core.resume import resumed_configs, saved_configs
from distrl.envs.errors import debug_wanted
from distrl.registry import ALGORITHMS
from distrl.tuned import tuned


def _command(name: str, config_cls: type) -> type:
    """`distrl train NAME`'s flags: RunConfig and the algorithm's config in one flat
    namespace."""
    return dataclasses.make_dataclass(f"Train_{name}", [
        ("run", Annotated[RunConfig, tyro.conf.OmitArgPrefixes]),
        ("config", Annotated[config_cls, tyro.conf.OmitArgPrefixes]),
    ], frozen=True)


COMMANDS = {name: _command(name, a.config) for name, a in ALGORITHMS.items()}
SHADOWED = {"lr": "lr_schedule"}
"""A field whose schedule, when set, overrides it: --lr given alone drops the schedule
(a tuned entry's, a resumed run's) that would silently win."""


def train(args: list[str]) -> None:
    """``distrl train ALGO [FLAGS]``: parse, train, print the verdict (or the JSON)."""
    try:
        own, args = _own_flags(args)
        name, show_config = own.tuned, own.print_config
        algo, args = _algorithm(args)
        resumed = _resumed(algo, own.resume)
        # One command, not a union of subcommands: tyro's errors then name it.
        cli, unknown = tyro.cli(COMMANDS[algo], args=args, prog=f"distrl train {algo}",
                                description=train_description(algo),
                                default=resumed or _default(name, algo),
                                return_unknown_args=True)
        if unknown:
            _usage_error(unknown_args_message(algo, COMMANDS[algo], unknown))
        config, run = _flags_over_schedules(cli.config, args), cli.run
        if resumed is None:
            run = _tuned_run(name, algo, run, args)
        # A resumed run's env is its checkpoint's (a factory env is read only later).
        if run.resume is None and (mismatch := env_mismatch(algo, run)) is not None:
            raise ValueError(mismatch)
        if resumed is not None:  # the flags were parsed over the saved configs
            run = dataclasses.replace(run, resume_as_given=True)
        else:
            config = _tuned_envs(name, algo, config, args)
        if show_config:
            return _print_config(algo, config, run)
        result = ALGORITHMS[algo].train()(config, run)
    except (ValueError, FileNotFoundError, RuntimeError) as err:
        if debug_wanted(args):
            raise
        raise SystemExit(f"distrl: error: {err}") from None
    if cli.run.json:
        print(strict_json(result))
    else:
        game = bool(Checkpoint(result["checkpoint"]).policy_ids)
        print(f"done ({result['stopped_by']}): {result.get('env/steps_total', 0):,} env steps "
              f"in {result.get('time/total_s', 0.0):.1f} s, {headline(result, game)}; "
              f"checkpoint {result['checkpoint']}")
    if result["stopped_by"] == "interrupted":  # saved, yet stopped from outside: as Ctrl-C
        raise SystemExit(130)                    # anywhere else, so `&&` goes no further


def _print_config(algo: str, config: Any, run: RunConfig) -> None:
    """The configs a run would train with (--tuned, the flags and a resumed checkpoint's
    merged as the run merges them) as JSON on stdout; nothing trains, Ray never starts."""
    if run.resume:
        config, run = resumed_configs(Checkpoint(run.resume), config, run)
    print(json.dumps(configs_json(algo, config, run), indent=1))


def _own_flags(args: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """``--tuned NAME`` and ``--print-config``, taken out of the flags (they pick the
    defaults and what to do, not a config field), and the value of ``--resume``, left in
    (a RunConfig field) but read first: the saved configs become the flags' defaults."""
    own = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    own.add_argument("--tuned")
    own.add_argument("--print-config", action="store_true")
    ours, rest = own.parse_known_args(args)
    peek = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    peek.add_argument("--resume")
    ours.resume = peek.parse_known_args(rest)[0].resume
    return ours, rest


def _resumed(algo: str | None, path: str | None) -> Any | None:
    """With --resume, the saved configs as the flags' defaults: a flag given changes
    that field, every other keeps its saved value, and --help shows the saved values.
    Per-invocation fields (address, device, ...) keep their own defaults."""
    if path is None or algo not in COMMANDS:
        return None
    ckpt = Checkpoint(path)
    if ckpt.algo != algo:
        return None  # start_run names the right command
    config, run = saved_configs(ckpt, ALGORITHMS[algo].config, factory=False)
    fresh = RunConfig()
    run = dataclasses.replace(run, logdir=None, **{
        k: getattr(fresh, k) for k in RunConfig.PER_INVOCATION})
    return COMMANDS[algo](run=run, config=config)


def _algorithm(args: list[str]) -> tuple[str, list[str]]:
    """The algorithm `distrl train` names first, and the flags after it."""
    if not args or args[0] in ("-h", "--help"):
        print(train_help(), end="", file=sys.stdout if args else sys.stderr)
        raise SystemExit(0 if args else 2)
    if args[0] not in COMMANDS:
        close = difflib.get_close_matches(args[0], COMMANDS, n=1)
        _usage_error(f"distrl: error: no algorithm {args[0]!r}"
                     + (f" (did you mean {close[0]}?)" if close else "")
                     + f"; `distrl train ALGO` takes one of {', '.join(COMMANDS)}.")
    return args[0], args[1:]


def _usage_error(message: str) -> None:
    """A command line that cannot be parsed: exit status 2, as argparse and tyro."""
    print(message, file=sys.stderr)
    raise SystemExit(2)


def _default(name: str | None, algo: str) -> Any:
    """The flags' defaults: a tuned example's (--tuned NAME), else the configs'."""
    if name is None:
        return None
    t = tuned(name, algo)
    return COMMANDS[algo](run=RunConfig(env=t.env, env_config=dict(t.env_config),
                                        vector_mode=t.vector_mode,
                                        stop_return=t.stop_return), config=t.config)


def _given(args: list[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in args)


def _tuned_run(name: str | None, algo: str, run: RunConfig, args: list[str]) -> RunConfig:
    """A tuned entry's env keyword arguments belong to its env: another --env starts
    without them (unless --env-config gives some)."""
    if name is None or _given(args, "--env-config") or run.env == tuned(name, algo).env:
        return run
    return dataclasses.replace(run, env_config={})


def _tuned_envs(name: str | None, algo: str, config: Any, args: list[str]) -> Any:
    """A tuned entry's sub-envs split over the runner count the flags chose, unless
    the envs per runner were given too."""
    if name is None or _given(args, "--num-envs-per-env-runner"):
        return config
    t = tuned(name, algo)
    if t.num_envs is None:
        return config
    per_runner = t.num_envs // max(config.num_env_runners, 1)
    return dataclasses.replace(config, num_envs_per_env_runner=per_runner)


def _flags_over_schedules(config: Any, args: list[str]) -> Any:
    """A value the user gives beats the schedule the defaults carried: ``--tuned cartpole
    --lr 5e-4`` trains at 5e-4, not on the entry's lr_schedule (which shadows lr)."""
    for field, schedule in SHADOWED.items():
        if (hasattr(config, schedule) and getattr(config, schedule) is not None
                and _given(args, _flag_name(field)) and not _given(args, _flag_name(schedule))):
            config = dataclasses.replace(config, **{schedule: None})
    return config


def _flag_name(field: str) -> str:
    return "--" + field.replace("_", "-")
