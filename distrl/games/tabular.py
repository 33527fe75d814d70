"""A policy given as a table: its action probabilities at every information state of an
OpenSpiel game, looked up by what its player observes there.

A league's average policy (games.nash.AveragePolicy: the reach-weighted mean of a main
agent's last evaluated policies, whose NashConv the league reports) is a mixture of
networks, not a network: a checkpoint keeps it as this table, under the policy id
``average``, in its ``average`` component:

    average/policy.json   {"builder": "table", "game": <OpenSpiel game>, "of": <main agent>,
                           "evaluations": <policies averaged>}
    average/table.pt      {"observations": float32 [S, ...], "probs": float64 [S, A]}:
                          row k is what the player to move observes at information state k
                          and its action probabilities there (tensors: weights_only=True)
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from distrl.core.checkpoint import Checkpoint
from distrl.games.nash import tabulate

AVERAGE = "average"
"""Policy id (and checkpoint component) of a league's saved average policy."""
BUILDER = "table"


@dataclass
class TablePolicy:
    """Plays the row of ``probs`` whose observation equals the seat's; acts alone (no
    network: games.batched never stacks it) and has no values."""

    observations: np.ndarray
    probs: np.ndarray
    game: str
    version: int = 0
    _rows: dict[bytes, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.observations = np.ascontiguousarray(self.observations, np.float32)
        self.probs = np.asarray(self.probs, np.float64)
        self._rows = {o.tobytes(): k for k, o in enumerate(self.observations)}
        if len(self._rows) != len(self.observations):
            raise ValueError(f"{self.game}: two information states look alike to their "
                             "player, so a table by observation cannot tell them apart.")

    def rows(self, obs: np.ndarray) -> list[int]:
        flat = np.ascontiguousarray(obs, np.float32)
        try:
            return [self._rows[o.tobytes()] for o in flat]
        except KeyError:
            raise ValueError(f"the table policy of {self.game} met an observation it has no "
                             "row for: it plays only the game it was made on.") from None

    def probs_at(self, obs: np.ndarray, masks: np.ndarray | None = None) -> np.ndarray:
        """Action probabilities [B, A] for observations [B, ...] (nash.Probs)."""
        return self.probs[self.rows(obs)]

    def __call__(self, obs: torch.Tensor, value: bool = True
                 ) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probabilities as logits (greedy: the most probable move), zero values."""
        p = torch.as_tensor(self.probs_at(obs.numpy()), dtype=torch.float32)
        return torch.log(p.clamp_min(torch.finfo(torch.float32).tiny)), torch.zeros(len(p))


def table_policy(game: Any, table: np.ndarray) -> TablePolicy | None:
    """``table`` (nash.tabulate's rows over the OpenSpiel ``game``) as a TablePolicy, or
    None, said in one line, when the observations do not tell information states apart."""
    seen: list[np.ndarray] = []

    def keep(obs: np.ndarray, masks: np.ndarray) -> np.ndarray:
        seen.append(obs)
        return masks.astype(np.float64)

    tabulate(game, keep)  # the observation at each row, in the table's order
    try:
        return TablePolicy(seen[0], table, str(game))
    except ValueError as err:
        print(f"distrl: the average policy is not saved: {err}", file=sys.stderr, flush=True)
        return None


def table_files(policy: TablePolicy, of: str, evaluations: int) -> dict[str, Any]:
    """The checkpoint component of a table policy (module doc)."""
    return {"policy.json": {"builder": BUILDER, "game": policy.game, "of": of,
                            "evaluations": evaluations},
            "table.pt": {"observations": torch.from_numpy(policy.observations),
                         "probs": torch.from_numpy(policy.probs)}}


def has_table(ckpt: Checkpoint, pid: str) -> bool:
    """Whether the checkpoint holds the table policy ``pid`` (its component)."""
    return pid == AVERAGE and AVERAGE in ckpt.manifest.get("components", {})


def load_table(ckpt: Checkpoint, pid: str = AVERAGE) -> TablePolicy:
    """The saved table policy ``pid``, read without unpickling."""
    if not has_table(ckpt, pid):
        raise ValueError(f"no table policy {pid!r} in {str(ckpt.path)!r}: a league saves "
                         "its main agent's average with league_eval_average_window > 0 on "
                         "OpenSpiel games small enough for NashConv.")
    spec = ckpt.json(pid, "policy.json")
    if spec.get("builder") != BUILDER:
        raise ValueError(f"{pid}/policy.json has builder {spec.get('builder')!r}, not "
                         f"{BUILDER!r}: written by another distrl.")
    saved = ckpt.tensors(pid, "table.pt")
    return TablePolicy(saved["observations"].numpy(), saved["probs"].numpy(), spec["game"])
