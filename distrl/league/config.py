"""LeagueConfig: a league of PPO learners (its rules, magnet, evaluation and Ray
deployment), and Magnet, magnetic mirror descent's knobs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Literal

import tyro

from distrl.core.config import check_positive
from distrl.games.nash import MAX_STATES
from distrl.league.rules import LeagueRules
from distrl.models.config import check_choices
from distrl.ppo.config import PPOHyperparams


@dataclass(frozen=True)
class Magnet:
    """Magnetic mirror descent (Sokota et al. 2023, arXiv 2206.05825) for league learners:
    a KL(policy || magnet) term in the loss. Self-play PPO with an entropy bonus approaches
    an entropy-regularised equilibrium, and with a small bonus it cycles; a magnet that
    becomes the policy every ``update_steps`` makes each phase a proximal step whose
    fixed point is a Nash equilibrium."""

    coeff: Annotated[float, tyro.conf.arg(name="magnet-coeff")] = 0.0
    """Weight of KL(policy || magnet) in the loss (0: off)."""
    update_steps: Annotated[int, tyro.conf.arg(name="magnet-update-steps")] = 0
    """A learner's env steps before its first magnet update (each makes the magnet the
    current policy); 0: the magnet stays the initial policy."""
    update_growth: Annotated[float, tyro.conf.arg(name="magnet-update-growth")] = 1.0
    """Each magnet phase is this many times longer than the one before (R-NaD lengthens
    its phases so that the policy settles near each magnet's fixed point); 1: constant."""
    counterfactual: Annotated[bool, tyro.conf.arg(name="magnet-counterfactual")] = False
    """Weight each move's policy term by 1 / (the mover's own probability of its earlier
    moves) and its magnet and entropy terms by 1 / (the probability of the game so far),
    each over its batch mean: sequence-form MMD's counterfactual values and dilated
    regulariser, where on-policy samples weight both by how often the state comes up
    (docs/league.md). Needs an env that reports its ``chance_logp`` (OpenSpiel's do)."""
    regulariser: Annotated[Literal["reach", "visits"],
                           tyro.conf.arg(name="magnet-regulariser")] = "reach"
    """With counterfactual, how the magnet and entropy terms weigh a row: "reach", by
    1 / (the probability of the game so far), unbiased but heavy-tailed (a rare game can
    outweigh the batch); "visits", by 1 / (the rows of its observation in the batch), so
    every information state the batch visits weighs alike (observations that tell
    information states apart: OpenSpiel's information-state tensors)."""

    def __post_init__(self) -> None:
        check_choices(self)
        if self.coeff < 0 or self.update_steps < 0:
            raise ValueError(f"magnet coeff ({self.coeff}) and update_steps "
                             f"({self.update_steps}) must be >= 0.")
        if self.regulariser != "reach" and not self.counterfactual:
            raise ValueError(f"magnet regulariser {self.regulariser!r} reweights the "
                             "counterfactual weighting; set counterfactual=True "
                             "(--magnet-counterfactual) or leave regulariser 'reach'.")
        if self.update_growth < 1:
            raise ValueError(f"magnet update_growth ({self.update_growth}) must be >= 1: "
                             "phases may lengthen, not shorten.")

    def phase_steps(self, updates: int) -> int:
        """Env steps from the magnet's ``updates``-th update to its next one."""
        return round(self.update_steps * self.update_growth ** updates)


@dataclass(frozen=True)
class LeagueConfig(PPOHyperparams):
    """A league of PPO learners playing a multi-agent game (docs/league.md)."""

    rules: LeagueRules = field(default_factory=LeagueRules)
    """Roles, matchmaking, snapshots and resets."""
    magnet: Magnet = field(default_factory=Magnet)
    """Magnetic mirror descent for every learner (off by default; docs/league.md)."""
    train_batch_size: int = 2048
    """Each learner's own moves per iteration, at least: games are played until every
    learner has this many, and each trains on all of its own (a main agent in self-play
    plays both seats, so it gets more)."""
    num_envs: int = 16
    """Games played at once (in the driver, or by each env runner on Ray)."""
    state_critic: bool = False
    """In turn-based games with an env critic_state (OpenSpiel's): an MLP of its own
    (model.vf_hiddens) over the game's whole state (in OpenSpiel every player's
    information, so a poker critic sees both hands) values every move and chance outcome,
    and serves as a control variate at every node after each of the seat's moves
    (league.trainer.control_variate_returns): the advantages stay unbiased and lose the
    noise of the others' and chance's moves. Needs gamma = 1 and a feed-forward model;
    the policy still sees its observation only."""
    league_eval_interval: int = 5
    """Every N iterations the main agents play evaluation matches (0: never); win rates
    and Elo come only from these, never from training batches (RLlib #33472)."""
    league_eval_games: int = 200
    """Games per evaluation, half in each seat; the main agents act greedily."""
    league_eval_member_games: int = 0
    """Games of each main agent, in the same evaluations, against every other learner
    and its own newest snapshot (metrics league/win_rate/<a>_vs_<b>; 0: none)."""
    league_eval_random_opening_moves: int = 0
    """The first N moves of every evaluation game are uniformly random legal moves, so
    that greedy players meet different positions (metric league/distinct_games/<a>_vs_<b>)."""
    league_eval_average_window: int = 0
    """On OpenSpiel games, also the exact NashConv of each main agent's average policy
    over its last N evaluations (league/nash_conv_avg/<id>; games/nash.py; 0: off).
    main_0's is saved with the run as the policy "average" (distrl eval --policy average).
    The window starts empty again after a resume."""
    nash_conv_max_states: int = MAX_STATES
    """On OpenSpiel games, NashConv only if the game's tree has at most this many
    histories (tabulating walks all of them; Leduc has 9,457, tic-tac-toe 549,946; 0: never)."""
    stop_win_rate: float | None = None
    """Stop once every main agent's evaluation win rate reaches this."""
    num_env_runners: int = 0
    """Ray env runners, each playing num_envs games through PolicyReader views of the
    policy store; their samples go to DistributedLearners. 0: everything in the driver."""
    max_cached_policies: int = 1024
    """Policies each env runner keeps mapped (least recently used dropped first). A
    mapped policy costs a runner its views only, ~15 KB (the weights are the node's
    shared memory); one dropped and drawn again is mapped again (a store round trip)."""
    num_learner_shards: int | None = None
    """DistributedLearners shards (None: one per learner, as RLlib's default)."""
    num_gpus_for_learners: float = 0.0
    """GPUs for all learners on Ray, split evenly per shard and per learner (fractions
    allowed; shards default to min(num_gpus or learners, learners), as in RLlib)."""
    num_cpus_per_learner: float = 1.0
    """CPUs Ray reserves for each PolicyLearner actor."""
    num_cpus_per_env_runner: float = 1.0
    """CPUs Ray reserves for each env runner."""
    overlap_learning: bool = False
    """On Ray: learners update on the last play's samples while the runners play the
    next with the weights before that update (one update stale; PPO's ratio is to the
    policy that played). Off: play, then learn, one after the other."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.model.observation_filter != "NoFilter":
            raise ValueError("observation_filter='MeanStdFilter' is not supported in a league "
                             "(its learners do not share observation statistics); leave it at "
                             "'NoFilter'.")
        check_positive(self, "train_batch_size", "num_envs", "league_eval_games",
                       "max_cached_policies")
        if min(self.num_env_runners, self.league_eval_member_games,
               self.league_eval_random_opening_moves, self.league_eval_average_window,
               self.nash_conv_max_states) < 0 or min(
                self.num_cpus_per_learner, self.num_cpus_per_env_runner,
                self.num_gpus_for_learners) < 0:
            raise ValueError("num_env_runners, league_eval_member_games, "
                             "league_eval_random_opening_moves, league_eval_average_window, "
                             "nash_conv_max_states and the CPU and GPU counts must be >= 0.")
        if self.state_critic and self.gamma != 1.0:
            raise ValueError(f"state_critic estimates undiscounted returns (its control "
                             f"variates run over every node of a game); set gamma=1.0 (got "
                             f"{self.gamma}) or turn state_critic off.")
        if self.state_critic and self.model.use_lstm:
            raise ValueError("state_critic is a feed-forward value function: turn use_lstm "
                             "or state_critic off.")
        if self.overlap_learning and not self.num_env_runners:
            raise ValueError("overlap_learning overlaps Ray env runners with Ray learners; "
                             "set num_env_runners >= 1 or turn overlap_learning off.")
        if self.league_eval_interval < 0:
            raise ValueError(f"`league_eval_interval` ({self.league_eval_interval}) must be >= 0.")
        if self.stop_win_rate is not None and not (
                self.league_eval_interval and 0 < self.stop_win_rate <= 1):
            raise ValueError("`stop_win_rate` needs evaluations (league_eval_interval > 0) "
                             "and a value in (0, 1].")

    def learner_ids(self) -> list[tuple[str, str]]:
        """(id, role) of every learner: main_0.., main_exploiter_0.., league_exploiter_0.."""
        r = self.rules
        return ([(f"main_{i}", "main_agent") for i in range(r.num_main_agents)]
                + [(f"main_exploiter_{i}", "main_exploiter")
                   for i in range(r.num_main_exploiters)]
                + [(f"league_exploiter_{i}", "league_exploiter")
                   for i in range(r.num_league_exploiters)])

