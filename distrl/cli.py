"""Command line: ``distrl train ppo ...`` (cli_train.py), ``distrl eval RUN ...``, ``distrl play``.

Flags are generated from the config dataclasses (tyro), so the CLI and the Python API
share every name: ``--clip-param`` is ``PPOConfig.clip_param``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

import tyro

import distrl
from distrl.cli_help import main_help
from distrl.cli_train import train
from distrl.core.checkpoint import Checkpoint
from distrl.core.config import JSONObject
from distrl.core.interrupts import command
from distrl.envs.errors import debug_wanted
from distrl.games.nash import MAX_STATES
from distrl.games.opponents import Opponent, parse_opponent
from distrl.registry import ALGORITHMS

USAGE = f"""usage: distrl train {{{",".join(ALGORITHMS)}}} [--help] [--tuned NAME]
                    [--print-config] [FLAGS]
       distrl eval RUN [--episodes N] [--stochastic] [--video DIR] [--render] [--json]
                   [--search N] [--opponent SPEC]
       distrl play RUN [--search N] [--first]
       distrl plot RUN [RUN ...] [--out FILE.png]
"""


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
        train(argv[1:])
    elif argv[:1] == ["eval"]:
        _eval(argv[1:])
    elif argv[:1] == ["play"]:
        _play(argv[1:])
    elif argv[:1] == ["export"]:
        from distrl.export import main as export

        export(argv[1:])
    elif argv[:1] == ["plot"]:
        from distrl.plot import main as plot

        plot(argv[1:])
    elif argv[:1] == ["--version"]:
        print(f"distrl {distrl.__version__}")
    elif argv[:1] in (["-h"], ["--help"]):
        print(main_help(USAGE), end="")
    else:
        sys.stderr.write(main_help(USAGE))
        raise SystemExit(2)


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
        std = (sum((r - mean) ** 2 for r in eps.returns) / len(eps.returns)) ** 0.5
        print(f"mean {how} return over {len(eps.returns)} episodes: {mean:.2f} (std "
              f"{std:.2f}, min {min(eps.returns):.2f}, max {max(eps.returns):.2f}; mean length "
              f"{sum(eps.lengths) / len(eps.lengths):.1f})"
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
