"""A human seat: ``distrl play RUN`` plays one game in the terminal against a saved game
run (league or AlphaZero), its network greedy or searching (games.players).

The board is drawn from the game's OpenSpiel state (an OpenSpiel game's own, or a
PettingZoo game's twin: the same moves by the same numbers), the legal moves listed by
number; the agent's move comes with its value estimate (the searched value, or the
network's value head). An input that is not a legal move is answered with one line and
asked again; the end of input leaves the game unfinished.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from rich.console import Console
from rich.markup import escape

from distrl.core.checkpoint import Checkpoint
from distrl.core.evaluation import saved_env
from distrl.games.games import make_multiagent_env, split_obs
from distrl.games.players import MAIN, PUCT_C, exploration, load_player, searched
from distrl.models.distributions import mask_logits

MARKS = {"x": "[bold red]x[/]", "o": "[bold blue]o[/]"}
"""OpenSpiel's marks of player 0 (x) and player 1 (o) in connect four and tic-tac-toe."""


class Agent:
    """The run's policy choosing moves: greedy on its network, or by search."""

    def __init__(self, policy: Any, env: Any, search: int, seed: int, name: str,
                 c: float = PUCT_C):
        self.policy, self.name = policy, name
        self.search = searched(policy, env, search, 0.0, seed, name, c) if search else None

    def move(self, env: Any, obs: Any) -> tuple[int, float]:
        """(move, value estimate for the agent) in the env's position."""
        if self.search is not None:
            return self.search.choose([env.openspiel_state()], env.observe_states)[0]
        x, mask = split_obs(obs)
        with torch.no_grad():
            logits, values = self.policy(torch.as_tensor(x[None], dtype=torch.float32))
        if mask is not None:
            logits = mask_logits(logits, torch.as_tensor(mask[None]).bool())
        return int(logits.argmax(-1)), float(values[0])


def play_game(run: str, search: int = 0, first: bool = False, policy: str | None = None,
              seed: int = 0, ask: Callable[[str], str] = input,
              console: Console | None = None) -> float:
    """One game of a human (``ask`` reads a move) against the run's ``policy`` (default
    its main agent); returns the human's return. ``first``: the human moves first."""
    console = console or Console(highlight=False)
    ckpt = Checkpoint(run)
    if not ckpt.policy_ids:
        raise ValueError(f"{str(ckpt.path)!r} holds a {ckpt.algo!r} run; `distrl play` "
                         "seats you against a game run (league, alphazero).")
    saved = ckpt.run_config()
    env = make_multiagent_env(saved_env(saved, None), saved["env_config"])
    try:
        if not hasattr(env, "openspiel_state"):
            raise ValueError(f"`distrl play` draws games from their OpenSpiel state; "
                             f"{saved['env']} has none (openspiel:<game>, or PettingZoo's "
                             "connect four and tic-tac-toe).")
        pid = policy or MAIN
        agent = Agent(load_player(ckpt, pid), env, search, seed, pid, exploration(ckpt))
        return _game(env, agent, env.possible_agents[0 if first else 1], seed, ask, console)
    finally:
        env.close()


def _game(env: Any, agent: Agent, human: str, seed: int, ask: Callable[[str], str],
          console: Console) -> float:
    obs, _ = env.reset(seed=seed)
    how = f"searching {agent.search.simulations} simulations a move" if agent.search else (
        "greedy")
    you = "x" if human == env.possible_agents[0] else "o"
    console.print(f"you play {MARKS[you]} against {escape(agent.name)} ({how})")
    totals = dict.fromkeys(env.possible_agents, 0.0)
    while obs and env.agents:
        (mover,) = obs  # a turn-based game: one mover a step
        state = env.openspiel_state()
        if mover == human:
            console.print(board(state))
            action = _ask(state, ask, console)
        else:
            action, value = agent.move(env, obs[mover])
            console.print(f"{escape(agent.name)} plays {action} "
                          f"(its value estimate {value:+.2f})")
        obs, rewards, *_ = env.step({mover: action})
        for a, r in rewards.items():
            totals[a] += r
    console.print(board(env.openspiel_state()))
    mine = totals[human]
    console.print("game over: " + ("you win" if mine > 0 else "you lose" if mine < 0
                                   else "draw") + f" ({mine:+g})")
    return mine


def _ask(state: Any, ask: Callable[[str], str], console: Console) -> int:
    """The human's move: asked until it is a legal one."""
    legal = state.legal_actions()
    console.print("legal moves: " + " ".join(map(str, legal)))
    while True:
        text = ask("your move: ").strip()
        if text.lstrip("-").isdigit() and int(text) in legal:
            return int(text)
        console.print(f"{escape(repr(text))} is not a legal move here; give one of "
                      + " ".join(map(str, legal)))


def board(state: Any) -> str:
    """The position as rich markup: connect four with its column numbers below,
    tic-tac-toe with each empty square's number; other games as OpenSpiel prints them."""
    rows = str(state).strip().splitlines()
    name = state.get_game().get_type().short_name
    if name == "tic_tac_toe":
        cells = np.array([list(r) for r in rows])
        return "\n".join(" ".join(MARKS.get(c, f"[dim]{3 * i + j}[/]") for j, c in
                                  enumerate(row)) for i, row in enumerate(cells))
    if name == "connect_four":
        lines = [" ".join(MARKS.get(c, "[dim].[/]") for c in row) for row in rows]
        return "\n".join([*lines, " ".join(str(c) for c in range(len(rows[0])))])
    return escape(str(state))
