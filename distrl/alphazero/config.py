"""AlphaZeroConfig: self-play with PUCT search on a two-player board game (docs/alphazero.md).

Silver et al. 2018 (Science 362:1140); defaults sized for connect four on a laptop CPU:
50 simulations a move (AlphaZero used 800), 128 games searched side by side.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from distrl.core.config import check_positive
from distrl.core.schedules import ScheduleT, schedule_value, validate_lr_schedule
from distrl.games.policies import check_opponent
from distrl.models.config import ModelConfig, check_choices


def _model() -> ModelConfig:
    return ModelConfig(hiddens=(256, 256, 256), activation="relu", vf_share_layers=True)


@dataclass(frozen=True)
class AlphaZeroConfig:
    """Self-play games searched with PUCT; the network learns the searches' visit
    distributions (cross-entropy) and the games' outcomes (squared error)."""

    model: ModelConfig = field(default_factory=_model)
    """The policy-and-value network (its value head predicts the outcome for the player
    to move, in [-1, 1])."""
    num_games: int = 128
    """Self-play games played at once; each simulation evaluates their leaves in one batch."""
    num_simulations: int = 50
    """Search simulations per move (each expands one position)."""
    puct_c: float = 1.5
    """Exploration constant of PUCT: how much the prior and few visits outweigh values."""
    dirichlet_alpha: float = 1.0
    """Dirichlet noise mixed into each self-play root's priors (about 10 / legal moves)."""
    dirichlet_fraction: float = 0.25
    """Weight of that noise (AlphaZero's 0.25)."""
    temperature_moves: int = 10
    """Self-play samples the first N moves of a game from the visit counts (varied
    openings), then plays the most visited move."""
    random_openings: int = 0
    """Each self-play game begins with k uniformly random legal moves, k drawn uniformly
    from 0 to this (0: every move searched, as AlphaZero). Nothing is learnt from those
    moves; the network learns the positions after them, which its own openings seldom
    reach and evaluations with random openings start from (docs/alphazero.md)."""
    lr: float = 1e-3
    """Adam learning rate (ignored when lr_schedule is set)."""
    lr_schedule: ScheduleT | None = None
    """Learning rate as [[moves, value], ...], linearly interpolated over the self-play
    moves made (all games together), the end values held beyond."""
    grad_clip: float | None = None
    """Clip the global gradient norm to this (None: no clipping, as AlphaZero; what
    clipping did on connect four: docs/alphazero.md)."""
    value_target_mix: float = 0.0
    """The value head's target: (1 - this) x the game's outcome + this x the root's
    searched value (0: the outcome alone, as AlphaZero; mixing in the search's estimate
    lowers the target's variance early in training)."""
    train_batch_size: int = 512
    """Positions per gradient step, drawn uniformly from the replay."""
    updates_per_move: int = 2
    """Gradient steps per move of num_games games (replay ratio: about
    updates_per_move * train_batch_size / num_games uses of each position)."""
    replay_capacity: int = 200_000
    """Positions kept (oldest dropped first)."""
    average_positions: bool = False
    """Learn each sampled position towards the mean policy and value target of every
    replay row holding the same observation (AlphaZero.jl's position averaging: an
    opening played in many games gets the mean of their outcomes, not each one's)."""
    learning_starts: int = 2_048
    """Positions in the replay before the first gradient step."""
    mirror: bool = False
    """Also learn every position mirrored left to right: a board of [rows, columns, ...]
    and one action per column (connect four's symmetry; other games refuse it)."""
    moves_per_iteration: int = 1_024
    """Self-play moves (all games together) per iteration: the logging and checkpoint unit."""
    num_workers: int = 0
    """Ray self-play workers, each playing num_games games with a copy of the network
    (0: self-play in this process). The learner stays in the driver."""
    num_cpus_per_worker: float = 1.0
    """CPUs Ray reserves for each self-play worker."""
    eval_interval: int = 10
    """Every N iterations the network plays eval_games greedy games against eval_opponent
    (0: never)."""
    eval_games: int = 100
    """Games per evaluation, half in each seat."""
    eval_opponent: str = "random"
    """random, or mcts:<simulations> (OpenSpiel's MCTSBot with random rollouts); against a
    bot, each evaluation also plays eval_games against random (eval/win_rate_vs_random)."""

    def __post_init__(self) -> None:
        check_choices(self)
        check_positive(self, "num_games", "num_simulations", "puct_c", "dirichlet_alpha",
                       "lr", "train_batch_size", "replay_capacity", "moves_per_iteration",
                       "eval_games")
        for name in ("dirichlet_fraction", "value_target_mix"):
            if not 0 <= getattr(self, name) <= 1:
                raise ValueError(f"`{name}` ({getattr(self, name)}) must lie in [0, 1].")
        if min(self.temperature_moves, self.random_openings, self.updates_per_move,
               self.learning_starts, self.eval_interval, self.num_workers,
               self.num_cpus_per_worker) < 0:
            raise ValueError("temperature_moves, random_openings, updates_per_move, "
                             "learning_starts, eval_interval, num_workers and "
                             "num_cpus_per_worker must be >= 0.")
        if self.grad_clip is not None and self.grad_clip <= 0:
            raise ValueError(f"`grad_clip` ({self.grad_clip}) must be > 0 or None.")
        for name in ("learning_starts", "train_batch_size"):
            if getattr(self, name) > self.replay_capacity:
                raise ValueError(f"`{name}` ({getattr(self, name)}) exceeds `replay_capacity` "
                                 f"({self.replay_capacity}): no step would ever be taken.")
        check_opponent(self.eval_opponent)
        if self.lr_schedule is not None:
            object.__setattr__(self, "lr_schedule", validate_lr_schedule(self.lr_schedule))
        if self.model.use_lstm:
            raise ValueError("AlphaZero searches from positions, not histories: leave "
                             "model.use_lstm off.")

    def lr_at(self, moves: int) -> float:
        return self.lr if self.lr_schedule is None else schedule_value(self.lr_schedule, moves)
