"""Evaluation games of a league: outcomes, win/draw/loss rates, NashConv, and
`distrl eval` of a saved league or AlphaZero run (evaluate_league).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from distrl.core.checkpoint import Checkpoint
from distrl.core.config import from_json
from distrl.core.evaluation import MAX_PARALLEL, rounds, run_episodes, saved_env
from distrl.games.games import make_multiagent_env, split_obs
from distrl.games.matches import MatchLoop, MatchResult
from distrl.games.nash import MAX_STATES, table_nash_conv, tabulate, tree_size
from distrl.games.opponents import Opponent, parse_opponent
from distrl.games.players import exploration, run_player, searched
from distrl.games.policies import RANDOM, LocalPolicy, RandomPolicy, make_bot
from distrl.games.tabular import AVERAGE, TablePolicy, has_table, load_table
from distrl.models.config import ModelConfig
from distrl.models.distributions import mask_logits
from distrl.models.recurrent import actor_critic


def outcome(result: MatchResult, a: str, b: str) -> float:
    """1, 0.5 or 0 for policy a against policy b by their seats' returns."""
    ra = max(r for ag, r in result.returns.items() if result.policies[ag] == a)
    rb = max(r for ag, r in result.returns.items() if result.policies[ag] == b)
    return 1.0 if ra > rb else 0.5 if ra == rb else 0.0


def play_matches(game: Any, env_config: dict[str, Any], policies: Any, greedy: set[str],
                 pid: str, opponent: str, games: int, seed: int = 0,
                 opening_moves: int = 0) -> list[MatchResult]:
    """``games`` games of ``pid`` against ``opponent``, split evenly over the seats, on
    envs of their own, in the rounds single-agent evaluation plays (core.evaluation.
    rounds: every env's first game of a round counts, so long games weigh as much as
    short ones). Policies in ``greedy`` act greedily; seeds are fixed, so evaluations
    are comparable. The first ``opening_moves`` moves of every game are uniformly random
    legal ones (RandomOpening), so that greedy play against a deterministic bot is not
    the same game again and again; each result's ``history`` tells the games apart.
    Openings are paired: the k-th game of each seat opens with the same random moves, so
    every opening is played once from each side and its luck cancels."""
    if games <= 0:
        raise ValueError(f"`games` ({games}) must be > 0.")
    if opening_moves < 0:
        raise ValueError(f"`opening_moves` ({opening_moves}) must be >= 0.")
    probe = make_multiagent_env(game, env_config)
    agents = list(probe.possible_agents)
    probe.close()
    results = []
    for seat in range(len(agents)):
        n = games // len(agents) + (seat < games % len(agents))
        if n == 0:
            continue
        mapping = {a: pid if k == seat else opponent for k, a in enumerate(agents)}
        generator = torch.Generator().manual_seed(seed * 100 + seat)
        for r, size in enumerate(rounds(n)):
            first_seed = 10_000 * (seed + 1) + MAX_PARALLEL * r  # the same for each seat
            envs = [RandomOpening(make_multiagent_env(game, env_config), opening_moves,
                                  first_seed + k) for k in range(size)]
            results += _one_game_per_env(envs, mapping, first_seed, policies, greedy,
                                         generator)
    return results


class RandomOpening:
    """An evaluation game whose first ``moves`` moves are uniformly random legal moves
    (not recorded in any seat: no policy chose them), and which keeps each finished
    game's history: every move and every observation, so games that differ only in a
    hidden deal count as different games. Everything else is the wrapped env's."""

    def __init__(self, env: Any, moves: int, seed: int):
        self.env, self.moves = env, moves
        self.rng = np.random.default_rng(seed)
        self.history: list[bytes] = []
        self.finished: list[tuple[bytes, ...]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple:
        if self.history:
            self.finished.append(tuple(self.history))
        for _ in range(100):
            self.history = []
            obs, infos = self.env.reset(seed=seed, options=options)
            self.history.append(_digest(obs))
            for _ in range(self.moves):
                if not (obs and self.env.agents):
                    break
                obs = self.step({a: self._random_move(o) for a, o in obs.items()})[0]
            if obs and self.env.agents:
                return obs, {a: infos.get(a, {}) for a in obs}
            seed = None  # the opening ended the game: play another from this env's RNG
        raise ValueError(f"{self.moves} random opening moves end every game; use fewer.")

    def step(self, actions: dict[str, Any]) -> tuple:
        out = self.env.step(actions)
        self.history.append(_digest({a: np.asarray(x) for a, x in actions.items()}))
        self.history.append(_digest(out[0]))
        return out

    def _random_move(self, obs: Any) -> int:
        _, mask = split_obs(obs)
        if mask is None:
            raise ValueError("random opening moves need action masks (Discrete games with "
                             "an action_mask); this game has none.")
        return int(self.rng.choice(np.flatnonzero(mask)))


def _digest(parts: dict[str, Any]) -> bytes:
    """A short fingerprint of a dict of observations or actions."""
    h = hashlib.blake2b(digest_size=8)
    for key in sorted(parts):
        h.update(key.encode())
        for array in split_obs(parts[key]):
            if array is not None:
                h.update(np.ascontiguousarray(array).tobytes())
    return h.digest()


def _one_game_per_env(envs: list[RandomOpening], mapping: dict[str, str], seed: int,
                      policies: Any, greedy: set[str], generator: torch.Generator
                      ) -> list[MatchResult]:
    """The first finished game of each env, with its history (envs that finish early
    play on until the last one has its game; those extra games are not counted)."""
    size = len(envs)
    try:
        loop = MatchLoop(envs, lambda i: mapping, seed=seed)
        first: dict[int, MatchResult] = {}
        while len(first) < size:
            batch = loop.collect(policies.__getitem__, set(), 0, 1.0, 1.0, generator,
                                 greedy=greedy, min_episodes=1)
            for result in batch.results:
                first.setdefault(result.env, result)
        # MatchLoop resets an env as its game ends, so the env's first finished history
        # is its first game's.
        return [dataclasses.replace(first[i], history=envs[i].finished[0])
                for i in range(size)]
    finally:
        for env in envs:
            env.close()


def win_draw_loss(results: list[MatchResult], pid: str, opponent: str) -> np.ndarray:
    """Fractions of the games pid won, drew and lost against opponent."""
    counts = np.zeros(3)
    for r in results:
        counts[[1.0, 0.5, 0.0].index(outcome(r, pid, opponent))] += 1
    return counts / max(len(results), 1)


def wilson_interval(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson's score interval for a proportion (95% at z 1.96): unlike the normal
    approximation it stays inside [0, 1] and is not empty at 0 or n successes."""
    if n <= 0:
        raise ValueError(f"an interval needs games (n = {n}).")
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def win_rate_by_seat(results: list[MatchResult], pid: str, opponent: str) -> dict[str, float]:
    """pid's win rate in each seat it played (a first mover's edge shows here)."""
    seats: dict[str, list[MatchResult]] = {}
    for r in results:
        seat = next(agent for agent, p in r.policies.items() if p == pid)
        seats.setdefault(seat, []).append(r)
    return {seat: float(win_draw_loss(games, pid, opponent)[0])
            for seat, games in sorted(seats.items())}


def evaluate(checkpoint: str | Path, episodes: int = 10, seed: int = 0,
             env: Any | None = None, env_config: dict[str, Any] | None = None,
             explore: bool = False) -> list[float] | dict[str, Any]:
    """Returns of ``episodes`` episodes of a checkpoint's policy, greedy (argmax /
    Gaussian mean) unless ``explore``. ``env`` and ``env_config`` override the saved ones
    (a factory env must be given: only the trusted resume state holds it).

    A game run (league, AlphaZero) plays ``episodes`` games of main_0 against random
    instead, half in each seat, and returns games.scoring.evaluate_league's win, draw and
    loss rates (call that for other policies and opponents)."""
    if episodes <= 0:
        raise ValueError(f"`episodes` ({episodes}) must be > 0.")
    if Checkpoint(checkpoint).policy_ids:
        return evaluate_league(checkpoint, games=episodes, seed=seed, stochastic=explore,
                               env=env, env_config=env_config)
    return run_episodes(checkpoint, episodes, seed, env, env_config, explore).returns


def evaluate_league(checkpoint: str | Path, policy: str = "main_0",
                    opponent: str | Opponent = RANDOM, games: int = 200, seed: int = 0,
                    stochastic: bool = False, opening_moves: int = 0,
                    nash_conv_max_states: int = MAX_STATES, env: Any | None = None,
                    env_config: dict[str, Any] | None = None, search: int = 0,
                    temperature: float = 0.0, search_reuse: bool = True) -> dict[str, Any]:
    """Win, draw and loss rates of a saved league's ``policy`` against ``opponent``
    (random, another of its policies, ``mcts:<simulations>``: OpenSpiel's MCTSBot,
    ``module:callable``, a ScriptedPolicy's choose function, or ``run:PATH[@policy=ID]
    [@search=N]``, a saved game run: games.opponents), half of the games in each seat
    (``win_rate_by_seat`` splits the win rate by them),
    the first ``opening_moves`` moves of each random; how many of the games were
    distinct; for OpenSpiel games whose tree has at most ``nash_conv_max_states``
    histories also the policy's exact NashConv (both seats played by it; not when it
    searches). ``search``: the policy picks each move by that many PUCT simulations with
    its network (games.players; ``temperature`` > 0 draws from the visit counts;
    ``search_reuse`` False starts each move's search afresh, as OpenSpiel's MCTSBot).
    ``win_rate_ci95``: Wilson's 95% interval of the win rate.
    ``env`` and ``env_config`` override the saved ones (a factory env must be given: only
    the trusted resume state holds it)."""
    ckpt = Checkpoint(checkpoint)
    if not ckpt.policy_ids:
        raise ValueError(f"{str(ckpt.path)!r} holds a {ckpt.algo!r} run; --policy, "
                         "--opponent and --search apply to runs of games (league and "
                         "alphazero).")
    if nash_conv_max_states < 0:
        raise ValueError(f"nash_conv_max_states ({nash_conv_max_states}) must be >= 0 "
                         "(0: no NashConv).")
    rival = opponent if isinstance(opponent, Opponent) else parse_opponent(opponent)
    opponent = rival.spec
    if policy == opponent:
        raise ValueError(f"--policy and --opponent are both {policy!r}: a policy against "
                         "itself has no winner to count; pick another opponent.")
    run = ckpt.run_config()
    game = saved_env(run, env)
    env_config = run["env_config"] if env_config is None else env_config
    policies = _saved_policies(ckpt, game, env_config, {policy, opponent}, seed)
    if search:
        policies[policy] = _probed(game, env_config, seed, lambda probe: searched(
            policies[policy], probe, search, temperature, seed, policy, exploration(ckpt),
            reuse=search_reuse))
    greedy = set() if stochastic else {policy, opponent} - {RANDOM}
    results = play_matches(game, env_config, policies, greedy, policy, opponent,
                           games, seed, opening_moves)
    rates = win_draw_loss(results, policy, opponent)
    out = {"policy": policy, "opponent": opponent, "games": games,
           "win_rate": float(rates[0]), "draw_rate": float(rates[1]),
           "loss_rate": float(rates[2]),
           "win_rate_ci95": list(wilson_interval(rates[0] * len(results), len(results))),
           "win_rate_by_seat": win_rate_by_seat(results, policy, opponent),
           "random_opening_moves": opening_moves,
           "distinct_games": len({r.history for r in results}),
           "policy_search": search, "opponent_search": rival.search}
    spiel = None if search else nash_conv_game(game, env_config, nash_conv_max_states)
    if spiel is not None:
        nash_conv = policy_nash_conv(spiel, policies[policy])
        if nash_conv is not None:
            out["nash_conv"] = nash_conv
    return out


def _saved_policies(ckpt: Checkpoint, game: Any, env_config: dict[str, Any], ids: set[str],
                    seed: int) -> dict[str, Any]:
    """The players ``ids`` name: the run's saved policies (networks, and a league's
    average as its table), random, and bots."""
    spec = ckpt.policy()
    obs_space, act_space = spec.obs_space, spec.act_space
    model = from_json(ModelConfig, spec.model)  # every saved policy's architecture
    weights = ckpt.learner_state()["weights"]
    policies: dict[str, Any] = {}
    for pid in ids:
        if pid == RANDOM or ":" in pid:
            policies[pid] = outside_policy(pid, game, env_config, seed, int(act_space.n))
            continue
        if pid == AVERAGE and pid not in weights:
            policies[pid] = load_table(ckpt, pid)  # absent: says how a league saves one
            continue
        if pid not in weights:
            tables = [AVERAGE] if has_table(ckpt, AVERAGE) else []
            raise ValueError(f"no policy {pid!r} in this run; it has "
                             f"{sorted(weights) + tables}.")
        module = actor_critic(obs_space, act_space, model)
        module.load_state_dict(weights[pid])
        policies[pid] = LocalPolicy(module.requires_grad_(False))
    return policies


def outside_policy(spec: str, game: Any, env_config: dict[str, Any], seed: int,
                   num_actions: int) -> Any:
    """A player from outside the run: ``random``, a bot (``mcts:<n>``, ``module:callable``)
    or a saved run (``run:PATH...``)."""
    if spec == RANDOM:
        return RandomPolicy(num_actions)
    rival = parse_opponent(spec)
    if rival.kind == "run":
        return _probed(game, env_config, seed, lambda probe: run_player(rival, probe, seed))
    return _probed(game, env_config, seed, lambda probe: make_bot(spec, probe, seed))


def _probed(game: Any, env_config: dict[str, Any], seed: int, make: Any) -> Any:
    """``make(env)`` with a fresh env of the game, reset with ``seed``, closed after."""
    probe = make_multiagent_env(game, env_config)
    try:
        probe.reset(seed=seed)
        return make(probe)
    finally:
        probe.close()


def nash_conv_game(game: str, env_config: dict[str, Any], max_states: int) -> Any | None:
    """The OpenSpiel game under env ``game`` when its exact NashConv is cheap: None for
    other envs, and for games whose tree has more than ``max_states`` histories, said in
    one line (tabulating walks the whole tree, nash.MAX_STATES). Ask once per run."""
    if not str(game).startswith("openspiel:"):
        return None
    env = make_multiagent_env(game, env_config)
    try:
        spiel = env.game
    finally:
        env.close()
    if tree_size(spiel, max_states) > max_states:
        print(f"distrl: NashConv skipped: {game} has more than {max_states:,} states "
              "(nash_conv_max_states)", file=sys.stderr, flush=True)
        return None
    return spiel


def policy_nash_conv(game: Any, policy: Any) -> float | None:
    """OpenSpiel's exact NashConv of the policy (its action probabilities) on the
    OpenSpiel ``game`` (nash_conv_game); None for a recurrent policy, whose probabilities
    depend on the seat's history, which OpenSpiel's tabular policies (one observation per
    info state) do not replay."""
    table = policy_table(game, policy)
    return None if table is None else table_nash_conv(game, table)


def policy_table(game: Any, policy: Any) -> np.ndarray | None:
    """The policy's probabilities at each information state of the OpenSpiel ``game``
    (nash.tabulate), or None for a recurrent policy (see policy_nash_conv)."""
    if getattr(policy, "recurrent", False):
        return None
    if isinstance(policy, TablePolicy):
        return tabulate(game, policy.probs_at)

    def probs(obs: np.ndarray, mask: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            logits, _ = policy(torch.as_tensor(obs))
        return torch.softmax(mask_logits(logits, torch.as_tensor(mask).bool()), -1).numpy()

    return tabulate(game, probs)
