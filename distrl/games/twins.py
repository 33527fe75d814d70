"""The PettingZoo observations of OpenSpiel twin states: what a network trained on a
PettingZoo game sees in positions that search reaches but no env played (games.games'
TurnBased.observe_states). One array conversion per batch of states."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def _connect_four_observations(states: list[Any]) -> np.ndarray:
    """PettingZoo's connect-four observations of the players to move: [row, column,
    plane], the top row first, plane 0 the mover's pieces and plane 1 the opponent's.

    Read from OpenSpiel's observation string (six rows of seven cells and a newline,
    the top row first; x player 0's pieces, o player 1's), for speed: one string per
    state read as bytes costs a tenth of converting its 126-float observation tensor,
    and search renders every leaf it evaluates."""
    text = "".join([s.observation_string(0) for s in states]).encode()
    cells = np.frombuffer(text, np.uint8).reshape(len(states), 6, 8)[:, :, :7]
    me = np.array([s.current_player() for s in states]).reshape(-1, 1, 1)
    pieces = np.array([ord("x"), ord("o")], np.uint8)
    return np.stack([cells == pieces[me], cells == pieces[1 - me]], axis=-1).view(np.int8)


def _tic_tac_toe_observations(states: list[Any]) -> np.ndarray:
    """PettingZoo's tic-tac-toe observations of the players to move: [row, column,
    plane] over the squares in action order (row-major), plane 0 the mover's marks and
    plane 1 the opponent's (OpenSpiel's planes are empty, noughts (player 1), crosses
    (player 0), each over the squares in action order)."""
    planes = np.array([s.observation_tensor(0) for s in states], np.int8).reshape(-1, 3, 3, 3)
    me = np.array([s.current_player() for s in states])
    rows = np.arange(len(states))
    return np.stack([planes[rows, 2 - me], planes[rows, 1 + me]], axis=-1)


TWIN_OBSERVATIONS: dict[str, Callable[[list[Any]], np.ndarray]] = {
    "connect_four": _connect_four_observations, "tic_tac_toe": _tic_tac_toe_observations}
"""OpenSpiel twin -> the PettingZoo observations of its states' players to move, for
search over twin states with a network trained on the PettingZoo game."""
