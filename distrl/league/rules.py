"""League maths after AlphaStar (Vinyals et al. 2019, Nature 575; the supplementary
"league" pseudocode): roles, prioritized fictitious self-play (PFSP) from a decayed
payoff table, frozen snapshots, exploiter resets, Elo. Pure numpy; the runtime calls
``get_match`` per episode, ``record`` per finished match, and once per iteration
``ready_to_snapshot`` / ``snapshot`` / ``should_reset`` per learner.

One departure from RLlib's AlphaStar: opponents come from the payoff table of all
matches played (decayed), not from a softmax over the last training batch's win rates.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distrl.games.policies import check_opponent

ROLES = ("main_agent", "main_exploiter", "league_exploiter")
BOTS = ("bot",)
"""The pool of LeagueRules.bots, as _pfsp names pools by role."""
WEIGHTINGS = ("hard", "variance", "linear")


@dataclass(frozen=True)
class LeagueRules:
    """Who plays whom, and when learners are frozen or reset."""

    num_main_agents: int = 1
    """Main agents: self-play plus PFSP against every snapshot; never reset."""
    num_main_exploiters: int = 1
    """Main exploiters: play the main agents to find their weaknesses; reset at each
    snapshot."""
    num_league_exploiters: int = 1
    """League exploiters: PFSP against every snapshot; reset with league_exploiter_reset_prob."""
    pfsp_weighting: str = "hard"
    """PFSP weight of an opponent the learner beats with probability p: "hard" (1-p)^2,
    "variance" p(1-p), "linear" 1-p."""
    self_play_prob: float = 0.35
    """Main agents: chance of a match against a main agent's current weights."""
    exploiter_check_prob: float = 0.15
    """Main agents: chance of a match against the exploiters' snapshots (PFSP), so that
    found exploits get fixed; the rest is PFSP over all snapshots."""
    bots: tuple[str, ...] = ()
    """Fixed players outside the league that main agents also train against, named as
    distrl eval --opponent names them: random, mcts:<simulations> (OpenSpiel's MCTS) or
    module:callable. Their games enter the payoff table; they never learn."""
    bot_prob: float = 0.0
    """Main agents: chance of a match against one of the bots (PFSP over them)."""
    payoff_decay: float = 0.99
    """Old results of a pair are multiplied by this at each new result of the pair."""
    prior_games: float = 1.0
    """Pseudo-games at win rate 0.5 that every pair starts with (unplayed pairs: 0.5)."""
    snapshot_win_rate: float = 0.7
    """A learner is frozen once it beats each of its opponents at this rate..."""
    min_games_for_decision: float = 20.0
    """...having played each at least this many (decayed) games."""
    snapshot_steps: int = 2_000_000
    """Freeze anyway after this many of the learner's env steps since its last snapshot."""
    exploiter_snapshot_steps: int = 0
    """The same budget for exploiters (0: snapshot_steps). A main exploiter restarts at
    each snapshot, so a budget sized for the main agent's frequent snapshots ends its
    life before it can beat anything."""
    league_exploiter_reset_prob: float = 0.25
    """Chance that a league exploiter restarts from scratch after a snapshot."""
    elo_k: float = 16.0
    """Elo step size."""

    def __post_init__(self) -> None:
        if self.num_main_agents < 1 or min(self.num_main_exploiters,
                                           self.num_league_exploiters) < 0:
            raise ValueError("a league needs num_main_agents >= 1 and exploiter counts >= 0; "
                             f"got {self.num_main_agents}, {self.num_main_exploiters}, "
                             f"{self.num_league_exploiters}.")
        if self.pfsp_weighting not in WEIGHTINGS:
            raise ValueError(f"pfsp_weighting must be one of {', '.join(WEIGHTINGS)}; "
                             f"got {self.pfsp_weighting!r}.")
        probs = (self.self_play_prob, self.exploiter_check_prob, self.bot_prob,
                 self.league_exploiter_reset_prob, self.snapshot_win_rate)
        if not all(0.0 <= p <= 1.0 for p in probs) or (
                self.self_play_prob + self.exploiter_check_prob + self.bot_prob > 1.0):
            raise ValueError("self_play_prob, exploiter_check_prob, bot_prob (summing to "
                             "<= 1), league_exploiter_reset_prob and snapshot_win_rate are "
                             "probabilities in [0, 1].")
        object.__setattr__(self, "bots", tuple(self.bots))  # a list from saved JSON
        for bot in self.bots:
            check_opponent(bot)
        if bool(self.bots) != (self.bot_prob > 0):
            raise ValueError(f"bots {list(self.bots)} and bot_prob {self.bot_prob} go "
                             "together: name bots (e.g. --bots mcts:25) and give bot_prob "
                             "> 0, or neither.")
        if not 0.0 < self.payoff_decay <= 1.0 or self.prior_games <= 0:
            raise ValueError(f"payoff_decay ({self.payoff_decay}) must be in (0, 1] and "
                             f"prior_games ({self.prior_games}) > 0.")
        if (self.snapshot_steps <= 0 or self.exploiter_snapshot_steps < 0
                or self.min_games_for_decision < 0):
            raise ValueError("snapshot_steps must be > 0, exploiter_snapshot_steps >= 0 and "
                             "min_games_for_decision >= 0.")


def pfsp_weights(win_rates: np.ndarray, weighting: str = "hard") -> np.ndarray:
    """Probabilities over opponents from the learner's win rate against each; uniform
    when every weight is 0 (e.g. all opponents always beaten under "hard")."""
    p = np.asarray(win_rates, np.float64)
    if weighting == "hard":
        w = (1.0 - p) ** 2
    elif weighting == "variance":
        w = p * (1.0 - p)
    elif weighting == "linear":
        w = 1.0 - p
    else:
        raise ValueError(f"pfsp weighting must be one of {', '.join(WEIGHTINGS)}; "
                         f"got {weighting!r}.")
    total = w.sum()
    return w / total if total > 0 else np.full(len(p), 1.0 / len(p))


@dataclass
class PayoffTable:
    """Decayed wins, draws and games per ordered pair of player ids."""

    decay: float = 0.99
    prior_games: float = 1.0
    results: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # a->b->[w,d,g]

    def update(self, a: str, b: str, outcome: float) -> None:
        """One match: outcome 1 (a won), 0.5 (draw) or 0 (a lost)."""
        if outcome not in (0.0, 0.5, 1.0):
            raise ValueError(f"outcome must be 1 (win), 0.5 (draw) or 0 (loss); got {outcome}.")
        for x, y, o in ((a, b, outcome), (b, a, 1.0 - outcome)):
            w, d, g = (v * self.decay for v in self._row(x, y))
            self.results.setdefault(x, {})[y] = [w + (o == 1.0), d + (o == 0.5), g + 1.0]

    def _row(self, a: str, b: str) -> list[float]:
        return self.results.get(a, {}).get(b, [0.0, 0.0, 0.0])

    def games(self, a: str, b: str) -> float:
        return self._row(a, b)[2]

    def win_rate(self, a: str, b: str) -> float:
        """(wins + draws / 2 + prior / 2) / (games + prior): 0.5 for an unplayed pair."""
        w, d, g = self._row(a, b)
        return (w + 0.5 * d + 0.5 * self.prior_games) / (g + self.prior_games)

    def win_rates(self, a: str, opponents: list[str]) -> np.ndarray:
        return np.array([self.win_rate(a, b) for b in opponents])

    def forget(self, player: str) -> None:
        """Drop every result of ``player`` (a learner that restarts from scratch)."""
        self.results.pop(player, None)
        for row in self.results.values():
            row.pop(player, None)


@dataclass
class Elo:
    """Elo ratings from evaluation matches (not from training batches: RLlib #33472)."""

    k: float = 16.0
    ratings: dict[str, float] = field(default_factory=dict)
    initial: float = 1000.0

    def rating(self, player: str) -> float:
        return self.ratings.get(player, self.initial)

    def expected(self, a: str, b: str) -> float:
        """Probability that a beats b under the ratings."""
        return 1.0 / (1.0 + 10.0 ** ((self.rating(b) - self.rating(a)) / 400.0))

    def update(self, a: str, b: str, outcome: float) -> None:
        """Zero-sum step: a gains what b loses."""
        delta = self.k * (outcome - self.expected(a, b))
        self.ratings[a] = self.rating(a) + delta
        self.ratings[b] = self.rating(b) - delta


def fit_elo(results: list[tuple[str, str, float, float]], anchor: str,
            prior_games: float = 1.0, iterations: int = 10_000) -> dict[str, float]:
    """Elo ratings that best explain a set of results at once (the Bradley-Terry maximum
    likelihood: P(a beats b) = 1 / (1 + 10^((R_b - R_a) / 400))), ``anchor`` at 0.

    ``results`` holds (a, b, a's score, games) with draws scored as half a win. Unlike
    the online Elo above, the fit does not depend on the order of the games, so ratings
    of players rated at different times are comparable. Every pair that played gets
    ``prior_games`` extra drawn games, so a player that never lost has a finite rating
    (BayesElo's prior); every player must be connected to the anchor by games."""
    ids = sorted({p for a, b, _, _ in results for p in (a, b)})
    index = {p: i for i, p in enumerate(ids)}
    wins = np.zeros((len(ids), len(ids)))
    for a, b, score, games in results:
        wins[index[a], index[b]] += score + prior_games / 2
        wins[index[b], index[a]] += games - score + prior_games / 2
    games_played = wins + wins.T
    strength = np.ones(len(ids))
    # Hunter's (2004) MM update: strength_i <- wins_i / sum_j n_ij / (s_i + s_j).
    for _ in range(iterations):
        new = wins.sum(1) / (games_played / (strength[:, None] + strength[None, :])).sum(1)
        new /= new[index[anchor]]
        done = np.max(np.abs(np.log(new / strength))) < 1e-10
        strength = new
        if done:
            break
    return {p: float(400.0 * np.log10(strength[i])) for p, i in index.items()}


@dataclass
class Member:
    """A learner (trainable, role in ROLES) or a frozen snapshot of one."""

    id: str
    role: str
    parent: str | None = None  # snapshots: the learner they were taken from
    steps_at_snapshot: int = 0  # learners: their env steps at their last snapshot
    snapshots: int = 0  # learners: how many were taken

    @property
    def frozen(self) -> bool:
        return self.parent is not None


class League:
    """The players, their payoff table and Elo ratings, and AlphaStar's matchmaking."""

    def __init__(self, rules: LeagueRules | None = None):
        self.rules = rules or LeagueRules()
        self.players: dict[str, Member] = {}
        self.payoff = PayoffTable(self.rules.payoff_decay, self.rules.prior_games)
        self.elo = Elo(self.rules.elo_k)
        # Opponent pools and PFSP distributions, kept until the league changes: the
        # draws of one iteration share them (O(1) per draw instead of O(players)).
        self._cache: dict[tuple, Any] = {}

    def add_learner(self, player_id: str, role: str) -> Member:
        if role not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}; got {role!r}.")
        if player_id in self.players:
            raise ValueError(f"player {player_id!r} is already in the league.")
        self._cache.clear()
        self.players[player_id] = Member(player_id, role)
        return self.players[player_id]

    def learners(self, role: str | None = None) -> list[str]:
        """The learners (of ``role``), cached: matchmaking asks at every game's reset."""
        key = ("learners", role)
        if key not in self._cache:
            self._cache[key] = tuple(p.id for p in self.players.values()
                                     if not p.frozen and (role is None or p.role == role))
        return list(self._cache[key])  # a copy: a caller's edit cannot reach the cache

    def snapshots(self, roles: tuple[str, ...] = ROLES, parent: str | None = None
                  ) -> list[str]:
        return [p.id for p in self.players.values() if p.frozen and p.role in roles
                and (parent is None or p.parent == parent)]

    def get_match(self, learner: str, rng: np.random.Generator) -> str:
        """The opponent of ``learner``'s next episode."""
        role = self.players[learner].role
        if role == "main_agent":
            return self._main_agent_match(learner, rng)
        if role == "main_exploiter":
            return self._main_exploiter_match(learner, rng)
        return self._pfsp(learner, rng) if self._pool() else self._any_main(rng)

    def _main_agent_match(self, learner: str, rng: np.random.Generator) -> str:
        r = self.rules
        u = rng.random()
        exploiters = ("main_exploiter", "league_exploiter")
        if u < r.exploiter_check_prob and self._pool(exploiters):
            return self._pfsp(learner, rng, exploiters)
        u -= r.exploiter_check_prob
        if 0 <= u < r.bot_prob:
            return self._pfsp(learner, rng, BOTS)
        if u < r.bot_prob + r.self_play_prob or not self._pool():
            return self._any_main(rng)  # self-play (itself or another main agent)
        return self._pfsp(learner, rng)

    def _main_exploiter_match(self, learner: str, rng: np.random.Generator) -> str:
        """A main agent's current weights while the exploiter can win some games
        (> 10%); else its snapshots by "variance" PFSP, for a gentler curriculum."""
        main = self._any_main(rng)
        if self.payoff.win_rate(learner, main) > 0.1 or not self._pool(parent=main):
            return main
        return self._pfsp(learner, rng, parent=main, weighting="variance")

    def _any_main(self, rng: np.random.Generator) -> str:
        mains = self.learners("main_agent")
        return mains[int(rng.integers(len(mains)))]

    def _pool(self, roles: tuple[str, ...] = ROLES, parent: str | None = None) -> list[str]:
        """snapshots(roles, parent), or the rules' bots for BOTS; cached."""
        key = ("pool", roles, parent)
        if key not in self._cache:
            self._cache[key] = (list(self.rules.bots) if roles == BOTS
                                else self.snapshots(roles, parent))
        return self._cache[key]

    def _pfsp(self, learner: str, rng: np.random.Generator, roles: tuple[str, ...] = ROLES,
              parent: str | None = None, weighting: str | None = None) -> str:
        """An opponent from the pool by PFSP on the learner's win rates against each."""
        weighting = weighting or self.rules.pfsp_weighting
        key = ("pfsp", learner, roles, parent, weighting)
        if key not in self._cache:
            opponents = self._pool(roles, parent)
            weights = pfsp_weights(self.payoff.win_rates(learner, opponents), weighting)
            self._cache[key] = (opponents, np.cumsum(weights))
        opponents, cdf = self._cache[key]
        k = int(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"))
        return opponents[min(k, len(opponents) - 1)]

    def record(self, a: str, b: str, outcome: float, rated: bool = False) -> None:
        """A finished match (outcome for a: 1, 0.5, 0). ``rated``: an evaluation match,
        which also moves the Elo ratings."""
        if a != b:
            self._cache.clear()
            self.payoff.update(a, b, outcome)
            if rated:
                self.elo.update(a, b, outcome)

    def ready_to_snapshot(self, learner: str, env_steps: int) -> bool:
        """Step budget spent since the last snapshot, or every opponent that counts
        (main exploiters: the main agents; others: all snapshots) beaten at
        snapshot_win_rate over enough games."""
        r, p = self.rules, self.players[learner]
        budget = r.snapshot_steps
        if p.role != "main_agent" and r.exploiter_snapshot_steps:
            budget = r.exploiter_snapshot_steps
        if env_steps - p.steps_at_snapshot >= budget:
            return True
        opponents = (self.learners("main_agent") if p.role == "main_exploiter"
                     else self.snapshots())
        played = [o for o in opponents if self.payoff.games(learner, o) >= max(
            r.min_games_for_decision, 1e-9)]
        return bool(played) and len(played) == len(opponents) and bool(
            (self.payoff.win_rates(learner, played) >= r.snapshot_win_rate).all())

    def snapshot(self, learner: str, env_steps: int) -> str:
        """Freeze the learner's current weights as a new player; returns its id."""
        self._cache.clear()
        p = self.players[learner]
        p.snapshots += 1
        p.steps_at_snapshot = env_steps
        snap = f"{learner}@{p.snapshots}"
        self.players[snap] = Member(snap, p.role, parent=learner)
        self.elo.ratings[snap] = self.elo.rating(learner)
        for opponent, row in list(self.payoff.results.get(learner, {}).items()):
            self.payoff.results.setdefault(snap, {})[opponent] = list(row)
            self.payoff.results.setdefault(opponent, {})[snap] = [
                row[2] - row[0] - row[1], row[1], row[2]]
        return snap

    def should_reset(self, learner: str, rng: np.random.Generator) -> bool:
        """After a snapshot: main exploiters always restart, league exploiters with
        league_exploiter_reset_prob, main agents never. A restarting learner's results
        are forgotten (the runtime re-initialises its weights)."""
        role = self.players[learner].role
        reset = role == "main_exploiter" or (
            role == "league_exploiter" and rng.random() < self.rules.league_exploiter_reset_prob)
        if reset:
            self._cache.clear()
            self.payoff.forget(learner)
        return reset

    def to_json(self) -> dict[str, Any]:
        # bots as a list: the form the saved JSON reads back as.
        return {"rules": {**dataclasses.asdict(self.rules), "bots": list(self.rules.bots)},
                "players": [dataclasses.asdict(p) for p in self.players.values()],
                "payoff": self.payoff.results, "elo": self.elo.ratings}

    @staticmethod
    def from_json(data: dict[str, Any], rules: LeagueRules | None = None) -> League:
        """A saved league; with ``rules``, playing by those (a resumed run's config)
        instead of the saved ones."""
        league = League(rules or LeagueRules(**data["rules"]))
        league.players = {p["id"]: Member(**p) for p in data["players"]}
        league.payoff.results = {a: {b: list(v) for b, v in row.items()}
                                 for a, row in data["payoff"].items()}
        league.elo.ratings = dict(data["elo"])
        return league

