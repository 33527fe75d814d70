"""Trained networks as players: a game run's network choosing each move by PUCT search
(SearchPlayer: ``distrl eval --search``, ``run:PATH@search=N``, ``distrl play --search``)
and saved runs as opponents (run_player: ``--opponent run:PATH``).

Any network with a policy head and a value head searches: an AlphaZero network, and a
league policy too (its move probabilities are the priors, its value estimate of the
seat's return the leaf value). Search runs on the game's OpenSpiel state (an OpenSpiel
game's own, or a PettingZoo game's twin) with the network seeing what the env would show
(``observe_states``); no root noise: the most visited move, or one drawn from the visit
counts with a temperature. As AlphaZero's own players, a searching player carries the
subtree of the position it meets on to the next move, with its visits and proofs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from distrl.core import evaluation
from distrl.core.checkpoint import Checkpoint
from distrl.games.games import policy_obs_space
from distrl.games.opponents import Opponent
from distrl.games.policies import ActingPolicy, LocalPolicy, only
from distrl.games.search import Trees, search_game
from distrl.games.tabular import TablePolicy, has_table, load_table

PUCT_C = 1.5
"""PUCT's exploration constant at play time for runs that saved none (a league's);
AlphaZeroConfig.puct_c's default."""
MAIN = "main_0"
"""A game run's main agent: what plays unless a policy id is named."""


class SearchPlayer:
    """A network choosing each move by ``simulations`` PUCT simulations from the seat's
    position, all seats' searches side by side (their leaves in one batch). A bot:
    MatchLoop hands it the seats' envs. ``temperature`` 0 plays the most visited move;
    above 0, a move drawn with probability proportional to visits^(1 / temperature).
    ``c``: PUCT's exploration constant (an AlphaZero run's own: ``puct_c``). ``solve``:
    the search proves the wins and losses it walks to their end and plays by them
    (games.search). ``reuse``: a position reached from one searched before (the player's
    move and the replies since) starts from that subtree, the simulations added to it
    (AlphaGo Zero's practice), instead of from nothing."""

    bot = True
    version = 0
    recurrent = False

    def __init__(self, policy: ActingPolicy, simulations: int, temperature: float = 0.0,
                 seed: int = 0, name: str = "search", c: float = PUCT_C, solve: bool = True,
                 reuse: bool = True):
        self.policy, self.simulations, self.temperature = policy, simulations, temperature
        self.c, self.solve, self.reuse = c, solve, reuse
        self.name, self.rng = name, np.random.default_rng(seed)
        self.trees: Trees | None = None
        """The last move's trees (for readers)."""
        self._kept: list[dict[tuple[int, ...], tuple[Trees, int]]] = []
        """The roots of the last two calls' trees by history: a seat moves every other
        call of MatchLoop, as the envs alternate who is to move."""

    def choose(self, states: list[Any], observe: Callable[[list[Any]], np.ndarray]
               ) -> list[tuple[int, float]]:
        """(move, searched value for the player to move) for each state."""

        def evaluate(batch: list[Any]) -> tuple[np.ndarray, np.ndarray]:
            obs = torch.as_tensor(np.asarray(observe(batch)), dtype=torch.float32)
            with torch.no_grad():
                logits, values = self.policy(obs, value=True)
            return logits.numpy(), values.numpy()

        trees = Trees([state.clone() for state in states], solve=self.solve)
        for g, state in enumerate(states):
            found = self._searched(state.history()) if self.reuse else None
            if found is not None:
                trees.graft(g, *found)
        trees.expand_roots(evaluate)
        trees.search(evaluate, self.simulations, self.c)
        self.trees = trees
        self._kept = [{tuple(trees.state(g).history()): (trees, g) for g in range(trees.rows)},
                      *self._kept[:1]]
        return [(self._pick(trees.choice(g)), trees.value(g)) for g in range(trees.rows)]

    def _searched(self, history: list[int]) -> tuple[Trees, int, int] | None:
        """(trees, row, node) of ``history``'s position in a kept tree: the deepest kept
        root on its way, followed down by the moves since; None where the search never
        made that node."""
        for cut in range(len(history) - 1, -1, -1):  # within a game positions never repeat
            for kept in self._kept:
                if (found := kept.get(tuple(history[:cut]))) is None:
                    continue
                trees, g = found
                node = int(trees.root[g])
                for action in history[cut:]:
                    node = int(trees.child[g, node, action])
                    if node < 0:
                        return None
                return trees, g, node
        return None

    def _pick(self, visits: np.ndarray) -> int:
        if self.temperature == 0:
            return int(visits.argmax())
        p = visits ** (1 / self.temperature)
        return int(self.rng.choice(len(p), p=p / p.sum()))

    def act(self, obs: torch.Tensor, mask: torch.Tensor | None, envs: list[Any]
            ) -> tuple[torch.Tensor, torch.Tensor]:
        chosen = self.choose([env.openspiel_state() for env in envs], envs[0].observe_states)
        return only([move for move, _ in chosen], mask, self.name)


def searched(policy: Any, env: Any, simulations: int, temperature: float = 0.0,
             seed: int = 0, name: str = "search", c: float = PUCT_C,
             reuse: bool = True) -> SearchPlayer:
    """``policy`` searching ``simulations`` times a move in games like ``env`` (``reuse``:
    from the subtree the last move left, SearchPlayer); a one-line ValueError where it
    cannot: a game search does not cover (chance, hidden information, more than two
    players, no OpenSpiel state), or a policy without a value head."""
    if isinstance(policy, TablePolicy) or getattr(policy, "bot", False):
        raise ValueError(f"{name} cannot search: it is a table or a bot, not a network "
                         "with a value head.")
    if getattr(policy, "recurrent", False):
        raise ValueError(f"{name} is recurrent (LSTM): search evaluates positions, not "
                         "histories; play it without search.")
    game = search_game(env)  # resets env
    env.observe_states([game.new_initial_state()])  # a twin without its observation: refused
    return SearchPlayer(policy, simulations, temperature, seed, name, c, reuse=reuse)


def exploration(ckpt: Checkpoint) -> float:
    """The PUCT constant a saved run searches with: an AlphaZero run's own ``puct_c``
    (its self-play searched with it, so its priors and values are calibrated to it);
    PUCT_C for a league, which never searched."""
    return float(ckpt.algo_config().get("puct_c", PUCT_C)) if ckpt.algo == "alphazero" else PUCT_C


def run_player(rival: Opponent, env: Any, seed: int = 0) -> Any:
    """The player a ``run:PATH[@policy=ID][@search=N]`` spec names, for games like
    ``env``: the saved network (or a league's average table), searching if asked. Reads
    tensors and JSON only (a downloaded run is safe to play)."""
    ckpt = Checkpoint(rival.path)
    if not ckpt.policy_ids:
        raise ValueError(f"opponent {rival.spec!r}: {rival.path!r} holds a {ckpt.algo!r} "
                         "run; run: opponents are saved game runs (league, alphazero).")
    agent = env.possible_agents[0]
    saved, here = ckpt.policy(), policy_obs_space(env.observation_space(agent))
    if saved.obs_space != here or saved.act_space != env.action_space(agent):
        raise ValueError(f"opponent {rival.spec!r} was trained on {ckpt.run_config()['env']}"
                         f" (observations {saved.obs_space}, actions {saved.act_space}); "
                         f"this game has {here} and {env.action_space(agent)}.")
    pid = rival.policy or MAIN
    try:
        player = load_player(ckpt, pid)
    except ValueError as err:
        raise ValueError(f"opponent {rival.spec!r}: {err}") from None
    if rival.search:
        return searched(player, env, rival.search, 0.0, seed, rival.spec, exploration(ckpt))
    return player


def load_player(ckpt: Checkpoint, pid: str) -> Any:
    """A game run's policy ``pid`` as a player: its network, or a league's average table."""
    if has_table(ckpt, pid) and pid not in ckpt.policy_ids:
        return load_table(ckpt, pid)
    # The main agent is also the checkpoint's policy/ component: no learner state read.
    return LocalPolicy(evaluation.load_policy(ckpt, None if pid == MAIN else pid))
