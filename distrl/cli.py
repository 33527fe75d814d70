"""Command line: ``distrl train ppo ...`` and ``distrl eval CHECKPOINT ...``.

Flags are generated from the config dataclasses (tyro), so the CLI and the Python API
share every name: ``--clip-param`` is ``PPOConfig.clip_param``.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import sys
from dataclasses import dataclass
from typing import Annotated, Any

import tyro

import distrl
from distrl.cli_help import (
    env_mismatch,
    main_help,
    train_description,
    train_help,
    unknown_args_message,
)
from distrl.core.checkpoint import Checkpoint
from distrl.core.config import JSONObject, RunConfig
from distrl.core.display import configs_json, headline
from distrl.core.env_errors import debug_wanted
from distrl.core.interrupts import command
from distrl.core.metrics import strict_json
from distrl.core.resume import resumed_configs, saved_configs
from distrl.games.nash import MAX_STATES
from distrl.games.opponents import Opponent, parse_opponent
from distrl.registry import ALGORITHMS
from distrl.tuned import tuned

USAGE = f"""usage: distrl train {{{",".join(ALGORITHMS)}}} [--help] [--tuned NAME]
                    [--print-config] [FLAGS]
       distrl eval RUN [--episodes N] [--stochastic] [--video DIR] [--render] [--json]
                   [--search N] [--opponent SPEC]
       distrl play RUN [--search N] [--first]
"""


def _command(name: str, config_cls: type) -> type:
    """`distrl train NAME`'s flags: RunConfig and the algorithm's config in one flat
    namespace."""
    return dataclasses.make_dataclass(f"Train_{name}", [
        ("run", Annotated[RunConfig, tyro.conf.OmitArgPrefixes]),
        ("config", Annotated[config_cls, tyro.conf.OmitArgPrefixes]),
    ], frozen=True)


COMMANDS = {name: _command(name, a.config) for name, a in ALGORITHMS.items()}


class FlagError(Exception):
    """A flag value a command refuses, printed in one line (tyro would box a ValueError)."""


@dataclass(frozen=True)
class Eval:
    """Play episodes with a saved policy: mean return, videos, a window."""

    checkpoint: tyro.conf.Positional[str]
    """A run's logdir or its checkpoint/ directory."""
    episodes: int = 10
    """Episodes to run."""
    seed: int = 0
    """Seed of the evaluation envs."""
    stochastic: bool = False
    """Sample actions from the policy instead of acting greedily."""
    video: str | None = None
    """Write an MP4 of every episode into this directory (needs distrl[video])."""
    render: bool = False
    """Show the episodes in a window (render_mode="human")."""
    env: str | None = None
    """Play on this env instead of the saved one (id, module:EnvId or module:callable)."""
    env_config: JSONObject | None = None
    """Keyword arguments for the env instead of the saved ones, as a JSON object."""
    max_episode_steps: int | None = None
    """Truncate every episode after this many steps (default: the run's max_episode_steps)."""
    json: bool = False
    """Print one JSON object with the per-episode returns and lengths."""
    policy: str | None = None
    """League runs: the policy to judge (default main_0); plays --episodes games."""
    opponent: str = "random"
    """Game runs: "random" (uniform over legal moves), another policy id of the run,
    mcts:<simulations> (OpenSpiel's MCTSBot with random rollouts; perfect-information
    OpenSpiel games and PettingZoo connect four / tic-tac-toe), run:PATH (a saved league
    or AlphaZero run on the same game: its main agent, or run:PATH@policy=ID; with
    @search=N its network searches N simulations a move), or module:callable, a bot
    ``callable(obs, action_mask) -> action`` importable here."""
    search: int = 0
    """Game runs: the judged policy picks each move by N PUCT simulations with its
    network as prior and value (two-player games without chance or hidden information;
    0: the network alone)."""
    temperature: float = 0.0
    """With --search: draw each move from the visit counts^(1/T) (0: the most visited)."""
    random_opening_moves: int = 0
    """League runs: the first N moves of every game are uniformly random legal moves, so
    that greedy players meet different positions (reported: distinct_games)."""
    nash_conv_max_states: int = MAX_STATES
    """League and AlphaZero runs on OpenSpiel games: NashConv only if the game's tree has
    at most this many histories (tabulating walks all of them; 0: never)."""

    def __post_init__(self) -> None:
        if self.search < 0 or self.temperature < 0:
            raise FlagError(f"--search ({self.search}) and --temperature "
                            f"({self.temperature}) must be >= 0.")
        if self.temperature and not self.search:
            raise FlagError("--temperature draws moves from a search's visit counts: give "
                            "--search N too.")
        try:  # parsed now: a bad spec stops here, in one line, before anything loads
            object.__setattr__(self, "_rival", parse_opponent(self.opponent))
        except ValueError as err:
            raise FlagError(str(err)) from None

    @property
    def rival(self) -> Opponent:
        """The parsed --opponent."""
        return self._rival


@dataclass(frozen=True)
class Play:
    """Play a game in the terminal against a saved league or AlphaZero run."""

    checkpoint: tyro.conf.Positional[str]
    """A game run's logdir or its checkpoint/ directory."""
    search: int = 0
    """The agent picks each move by N PUCT simulations with its network (0: the network
    alone, greedy)."""
    first: bool = False
    """You move first (default: the agent does)."""
    policy: str | None = None
    """League runs: the policy to play against (default main_0)."""
    seed: int = 0
    """Seed of the game."""

    def __post_init__(self) -> None:
        if self.search < 0:
            raise FlagError(f"--search ({self.search}) must be >= 0.")


def main(argv: list[str] | None = None) -> None:
    """The command line (``argv`` None: this process's own, which may then be ended)."""
    own = argv is None
    argv = sys.argv[1:] if argv is None else argv
    command(lambda: _command_of(argv), end_process=own)


def _command_of(argv: list[str]) -> None:
    if argv[:1] == ["train"]:
        _train(argv[1:])
    elif argv[:1] == ["eval"]:
        _eval(argv[1:])
    elif argv[:1] == ["play"]:
        _play(argv[1:])
    elif argv[:1] == ["export"]:
        from distrl.export import main as export

        export(argv[1:])
    elif argv[:1] == ["--version"]:
        print(f"distrl {distrl.__version__}")
    elif argv[:1] in (["-h"], ["--help"]):
        print(main_help(USAGE), end="")
    else:
        sys.stderr.write(main_help(USAGE))
        raise SystemExit(2)


def _train(args: list[str]) -> None:
    try:
        name, args = _pop_tuned(args)
        show_config, args = _pop_print_config(args)
        algo, args = _algorithm(args)
        resumed = _resumed(algo, _flag(args, "--resume"))
        # One command, not a union of subcommands: tyro's errors then name it.
        cli, unknown = tyro.cli(COMMANDS[algo], args=args, prog=f"distrl train {algo}",
                                description=train_description(algo),
                                default=resumed or _default(name, algo),
                                return_unknown_args=True)
        if unknown:
            _usage_error(unknown_args_message(algo, COMMANDS[algo], unknown))
        config, run = cli.config, cli.run
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


def _pop_print_config(args: list[str]) -> tuple[bool, list[str]]:
    """Take ``--print-config`` out of the flags: print the configs in force and stop."""
    return "--print-config" in args, [a for a in args if a != "--print-config"]


def _print_config(algo: str, config: Any, run: RunConfig) -> None:
    """The configs a run would train with (--tuned, the flags and a resumed checkpoint's
    merged as the run merges them) as JSON on stdout; nothing trains, Ray never starts."""
    if run.resume:
        config, run = resumed_configs(Checkpoint(run.resume), config, run)
    print(json.dumps(configs_json(algo, config, run), indent=1))


def _pop_tuned(args: list[str]) -> tuple[str | None, list[str]]:
    """Take ``--tuned NAME`` out of the flags: it picks the defaults the others override."""
    for i, arg in enumerate(args):
        if arg == "--tuned" and i + 1 < len(args):
            return args[i + 1], args[:i] + args[i + 2 :]
        if arg.startswith("--tuned="):
            return arg.split("=", 1)[1], args[:i] + args[i + 1 :]
    return None, args


def _flag(args: list[str], flag: str) -> str | None:
    """The value of ``--flag VALUE`` or ``--flag=VALUE`` in args, else None."""
    for i, arg in enumerate(args):
        if arg == flag and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(flag + "="):
            return arg.split("=", 1)[1]
    return None


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


def _is_game_run(checkpoint: str) -> bool:
    try:
        return bool(Checkpoint(checkpoint).policy_ids)
    except (ValueError, FileNotFoundError):
        return False  # run_episodes reports it


def _eval_league(cli: Eval) -> None:
    from distrl.games.scoring import evaluate_league

    ignored = [flag for flag, given in (("--video", cli.video), ("--render", cli.render),
                                        ("--env", cli.env), ("--env-config", cli.env_config),
                                        ("--max-episode-steps", cli.max_episode_steps))
               if given]
    if ignored:
        raise SystemExit(f"distrl: error: {', '.join(ignored)} apply to single-agent runs; a "
                         "league is evaluated by games on its own game (--policy, "
                         "--opponent, --search, --episodes, --seed, --stochastic, "
                         "--random-opening-moves).")
    try:
        out = evaluate_league(cli.checkpoint, cli.policy or "main_0", cli.rival,
                              cli.episodes, cli.seed, cli.stochastic,
                              cli.random_opening_moves, cli.nash_conv_max_states,
                              search=cli.search, temperature=cli.temperature)
    except (ValueError, FileNotFoundError) as err:
        raise SystemExit(f"distrl: error: {err}") from None
    if cli.json:
        print(json.dumps(out))
        return
    searching = f" (search {out['policy_search']})" if out["policy_search"] else ""
    print(f"{out['policy']}{searching} vs {out['opponent']} over {out['games']} games "
          "(both seats): "
          f"win {out['win_rate']:.3f}, draw {out['draw_rate']:.3f}, loss {out['loss_rate']:.3f}"
          f" ({out['distinct_games']} distinct games); win by seat: "
          + ", ".join(f"{seat} {rate:.3f}" for seat, rate in out["win_rate_by_seat"].items())
          + (f"; NashConv {out['nash_conv']:.4f}" if "nash_conv" in out else ""))


def _eval(args: list[str]) -> None:
    from distrl.core.evaluation import run_episodes

    cli = _parsed(Eval, args, "distrl eval")
    if (cli.policy is not None or cli.opponent != "random" or cli.search
            or _is_game_run(cli.checkpoint)):
        return _eval_league(cli)
    if cli.random_opening_moves:
        raise SystemExit("distrl: error: --random-opening-moves applies to league runs (games "
                         "with legal-move masks); single-agent episodes start from --seed.")
    try:
        eps = run_episodes(cli.checkpoint, cli.episodes, cli.seed, cli.env, cli.env_config,
                           cli.stochastic, cli.video, cli.render, cli.max_episode_steps)
    except (ValueError, FileNotFoundError, RuntimeError) as err:
        if debug_wanted():
            raise
        raise SystemExit(f"distrl: error: {err}") from None
    mean = sum(eps.returns) / len(eps.returns)
    if cli.json:
        print(json.dumps({"episode_return_mean": mean, "episodes": len(eps.returns),
                          "returns": eps.returns, "lengths": eps.lengths}))
    else:
        how = "stochastic" if cli.stochastic else "greedy"
        print(f"mean {how} return over {len(eps.returns)} episodes: {mean:.2f}"
              + (f"; videos in {cli.video}" if cli.video else ""))


def _parsed(command: type, args: list[str], prog: str) -> Any:
    """The command's flags; a value its config refuses is one line."""
    try:
        return tyro.cli(command, args=args, prog=prog)
    except FlagError as err:
        raise SystemExit(f"distrl: error: {err}") from None


def _play(args: list[str]) -> None:
    from distrl.games.human import play_game

    cli = _parsed(Play, args, "distrl play")
    try:
        play_game(cli.checkpoint, cli.search, cli.first, cli.policy, cli.seed)
    except (ValueError, FileNotFoundError) as err:
        if debug_wanted(args):
            raise
        raise SystemExit(f"distrl: error: {err}") from None
    except EOFError:  # the input ended (Ctrl-D, or a file of moves ran out)
        print("\ndistrl: end of input; the game is left unfinished", file=sys.stderr)
