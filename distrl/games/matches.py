"""Matches: multi-agent episodes whose seats are played by league policies.

A MatchLoop steps several multi-agent envs (distrl.games.games' protocol) at once. At every
reset of an env it asks ``choose(env_index)`` which policy plays which agent; that mapping
holds until the episode ends, so a league's new matchups take effect at the next reset of
each env, in the same iteration, and never mid-episode (RLlib #21459, item 1).

Each (env, agent) keeps a Seat: the agent's own steps only (in turn-based games the other
player's moves are not the agent's steps), with every reward credited to the agent's most
recent action, so the loser's -1 that arrives on the winner's move lands on the loser's
last move. When an episode ends, the seats of learning policies become PPO samples (GAE
over the seat's own steps) and the episode a MatchResult for the league's payoff table.

Acting: all seats a policy plays at one step share one forward pass, and opponents of
one architecture share one (games.batched: their weights stacked); illegal actions are
masked (models.distributions.mask_logits); one sampling call then covers the seats of
every policy with the same kind of distribution. A recurrent policy's memory is per seat.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from distrl.core.checkpoint import games_in_progress, trusted_loads
from distrl.core.types import Rollout
from distrl.games.batched import act_together, stacked_forward
from distrl.games.games import split_obs
from distrl.games.policies import ActingPolicy
from distrl.games.seats import Node, Seat, game_rows, seat_arrays
from distrl.models.distributions import mask_logits


@dataclass
class MatchResult:
    """A finished episode: who played which agent, and each agent's return."""

    policies: dict[str, str]  # agent -> policy id
    returns: dict[str, float]  # agent -> episode return
    length: int  # env steps
    env: int  # which of the loop's envs played it
    history: tuple = ()  # the game's moves and observations (evaluation games only)


@dataclass
class MatchBatch:
    """What one collect call produced."""

    rollouts: dict[str, Rollout]  # learning policy id -> its samples of finished episodes
    results: list[MatchResult]
    env_steps: int


class MatchLoop:
    """Steps ``envs`` (multi-agent) with the policies ``choose`` seats at each reset.
    ``max_seq_len``: the training sequences of recurrent learners (ModelConfig's);
    ``critic_states``: every game's nodes (moves and chance outcomes) are recorded with
    the whole state (LeagueConfig.state_critic); ``others_reach``: each step also records
    the log-probability of its game so far under the other players and chance
    (Magnet.counterfactual)."""

    def __init__(self, envs: list[Any], choose: Callable[[int], dict[str, str]], seed: int,
                 max_seq_len: int = 20, critic_states: bool = False,
                 others_reach: bool = False):
        if critic_states and not hasattr(envs[0], "critic_outcomes"):
            raise ValueError(f"{type(envs[0]).__name__} has no critic_state() and "
                             "critic_outcomes, which LeagueConfig.state_critic needs "
                             "(OpenSpiel games have them); turn state_critic off.")
        self.envs, self.choose, self.max_seq_len = envs, choose, max_seq_len
        if others_reach and not hasattr(envs[0], "chance_logp"):
            raise ValueError(f"{type(envs[0]).__name__} has no chance_logp, which "
                             "Magnet.counterfactual needs (OpenSpiel games have one); turn it off.")
        self.critic_states, self.others_reach = critic_states, others_reach
        for env in envs if critic_states else ():
            env.chance_nodes = []  # the env records its chance nodes for the critic
        self.obs: list[dict[str, Any]] = [{} for _ in envs]
        self.seats: list[dict[str, Seat]] = [{} for _ in envs]
        self.lengths = [0] * len(envs)
        for i in range(len(envs)):
            self._reset(i, seed + i)  # later resets continue each env's own RNG

    def _reset(self, i: int, seed: int | None = None) -> None:
        """Seat env i's next episode, then reset it with ``options={"policies":
        mapping}``: an env whose agents' spaces depend on who plays them (#21459's
        CartPole / MountainCarContinuous challengers) sets them up there."""
        env, mapping = self.envs[i], self.choose(i)
        missing = set(env.possible_agents) - set(mapping)
        if missing:
            raise ValueError(f"choose({i}) left agents {sorted(missing)} without a policy; "
                             "map every agent of the env to a policy id.")
        self.obs[i], _ = env.reset(seed=seed, options={"policies": dict(mapping)})
        game: list[Node] = []  # one list for the game's seats (state critics)
        self.seats[i] = {agent: Seat(mapping[agent], env.action_space(agent), game=game,
                                     player=k) for k, agent in enumerate(env.possible_agents)}
        if self.critic_states:
            env.chance_nodes.clear()  # the deal comes before any seat's step

    def get_state(self, env_name: str) -> bytes | None:
        """The games in progress (envs, seats, lengths), or None when the envs cannot be
        pickled (a resume then seats fresh games)."""
        return games_in_progress((self.envs, self.obs, self.seats, self.lengths), env_name)

    def set_state(self, state: bytes | None) -> None:
        """Trusted input only: the state is a pickle from our own checkpoint."""
        if state is None:
            return
        for env in self.envs:
            env.close()
        self.envs, self.obs, self.seats, self.lengths = trusted_loads(state)

    def collect(self, policy: Callable[[str], ActingPolicy], learning: set[str],
                min_samples: int, gamma: float, lambda_: float,
                generator: torch.Generator | None = None, greedy: Collection[str] = (),
                min_episodes: int = 0) -> MatchBatch:
        """Play until the finished episodes hold ``min_samples`` steps of each learning
        policy (each learner's own batch, however often it is seated) and at least
        ``min_episodes`` episodes; unfinished episodes carry over to the next call with
        their mapping. Policies in ``greedy`` take their most probable legal action
        (evaluation); the others sample. ``choose`` must seat every learning policy."""
        seated: dict[str, list[Seat]] = {}  # each learning policy's finished seats
        results: list[MatchResult] = []
        samples = dict.fromkeys(learning, 0)
        env_steps = 0
        while min(samples.values(), default=min_samples) < min_samples or (
                len(results) < min_episodes):
            for i, seats in self._step(policy, learning, generator, greedy):
                results.append(MatchResult({a: s.policy_id for a, s in seats.items()},
                                           {a: s.total for a, s in seats.items()},
                                           self.lengths[i], i))
                self.lengths[i] = 0
                for seat in seats.values():
                    if seat.policy_id in learning and seat.rewards:
                        seated.setdefault(seat.policy_id, []).append(seat)
                        samples[seat.policy_id] += len(seat.rewards)
            env_steps += len(self.envs)
        rollouts = {pid: self._rollout(seats, gamma, lambda_) for pid, seats in seated.items()}
        return MatchBatch(rollouts, results, env_steps)

    def _rollout(self, seats: list[Seat], gamma: float, lambda_: float) -> Rollout:
        """One policy's finished seats as a Rollout (episode stats are the seats' returns),
        with its state critic's inputs."""
        return Rollout(**seat_arrays(seats, gamma, lambda_, self.max_seq_len),
                       game=game_rows(seats, self.critic_states),
                       episode_returns=np.zeros(0, np.float32),
                       episode_lengths=np.zeros(0, np.int64), env_steps=0, weights_version=-1)

    def _step(self, policy: Callable[[str], ActingPolicy], learning: set[str],
              generator: torch.Generator | None, greedy: Collection[str]
              ) -> list[tuple[int, dict[str, Seat]]]:
        """One step of every env; returns the (env, seats) of episodes that ended."""
        where: dict[str, list[tuple[int, str]]] = {}
        for i, obs in enumerate(self.obs):
            for agent in obs:
                where.setdefault(self.seats[i][agent].policy_id, []).append((i, agent))
        # One forward pass per policy (one for all opponents of an architecture), then
        # one sampling call per kind of distribution for all seats.
        kinds: dict[tuple, list[_Forward]] = {}
        for pids in act_together(policy, where, learning, greedy):
            if len(pids) == 1:
                pid = pids[0]
                # A state critic's values come from the learner, not the acting policy.
                out = self._forward(policy(pid), where[pid], pid in greedy,
                                    pid in learning and not self.critic_states)
            else:
                out = self._forward_stacked([policy(p) for p in pids],
                                            [where[p] for p in pids], pids[0] in greedy)
            kinds.setdefault((out.dist, out.dist_inputs.shape[1:]), []).append(out)
        actions: list[dict[str, Any]] = [{} for _ in self.envs]
        probs: list[np.ndarray] = [np.zeros(0)] * len(self.envs)  # the movers' (critics)
        for forwards in kinds.values():
            self._sample(forwards, generator, actions, probs)
        ended = []
        for i, env in enumerate(self.envs):
            seats = self.seats[i]
            node = self._record_node(env, seats, actions[i], probs[i]) if (
                self.critic_states) else None
            if self.others_reach:
                self._record_others(env, seats, actions[i])
            obs, rewards, terms, _, _ = env.step(actions[i])
            self.lengths[i] += 1
            for agent, r in rewards.items():
                seats[agent].credit(float(r))
            for agent, t in terms.items():
                seats[agent].terminated |= bool(t)
            if node is not None:
                node.rewards = np.array([rewards.get(a, 0.0) for a in env.possible_agents])
                self._record_chance(env, seats)
            going = bool(obs and env.agents)
            if going:
                self.obs[i] = obs
                continue
            ended.append((i, seats))
            self._reset(i)
        return ended

    @staticmethod
    def _record_node(env: Any, seats: dict[str, Seat], actions: dict[str, Any],
                     dist: np.ndarray) -> Node:
        """The mover's node in its game (state critics): the whole state (every player's
        information), the mover's distribution ``dist`` and move; its rewards come after
        the env's step."""
        if len(actions) != 1:
            raise ValueError(f"a state critic (LeagueConfig.state_critic) needs turn-based "
                             f"games; here {sorted(actions)} moved at once.")
        (agent,) = actions
        seat = seats[agent]
        probs = np.zeros(env.critic_outcomes, np.float32)
        probs[:len(dist)] = dist
        node = Node(env.critic_state(), probs, int(seat.actions[-1]))
        seat.node_ids.append(len(seat.game))
        seat.game.append(node)
        return node

    @staticmethod
    def _record_chance(env: Any, seats: dict[str, Seat]) -> None:
        """The chance nodes the env resolved in its last step, into the game's nodes."""
        game = next(iter(seats.values())).game
        game.extend(Node(state, probs, outcome) for state, probs, outcome in env.chance_nodes)
        env.chance_nodes.clear()

    @staticmethod
    def _record_others(env: Any, seats: dict[str, Seat], movers: Collection[str]) -> None:
        """Each mover's log-probability of the game so far under chance and the others."""
        totals = {a: sum(s.logp) for a, s in seats.items()}
        everyone = sum(totals.values())
        for agent in movers:  # the mover's own logp holds this move already: all of it goes
            seats[agent].others_logp.append(env.chance_logp + everyone - totals[agent])

    def _forward(self, pi: ActingPolicy, where: list[tuple[int, str]], greedy: bool,
                 value: bool) -> _Forward:
        """The policy's distribution inputs (illegal actions masked) and values for every
        seat it plays now (a policy has one action space, so one distribution). Only
        learning policies need values (for GAE): the others skip their value head."""
        obs, masks, mask = self._inputs(where)
        with torch.no_grad():
            x = torch.as_tensor(_batch(obs))
            # A bot (league.opponents) picks legal moves itself, so it sees the mask, and
            # a search bot reads the game's state from the env.
            if getattr(pi, "recurrent", False):
                dist_inputs, values = self._step_recurrent(pi, where, x)
            elif getattr(pi, "bot", False):
                dist_inputs, values = pi.act(x, mask, [self.envs[i] for i, _ in where])
            else:
                dist_inputs, values = pi(x, value=value)
        dist = self.seats[where[0][0]][where[0][1]].dist
        return _Forward(where, obs, masks, mask_logits(dist_inputs, mask), values, dist,
                        greedy)

    def _forward_stacked(self, pis: list[ActingPolicy], where: list[list[tuple[int, str]]],
                         greedy: bool) -> _Forward:
        """As _forward, for non-learning policies of one architecture that play the same
        number of seats (games.batched): one forward pass for all their seats."""
        flat = [seat for seats in where for seat in seats]
        obs, masks, mask = self._inputs(flat)
        with torch.no_grad():
            x = torch.as_tensor(np.stack(obs)).view(len(pis), len(where[0]), *obs[0].shape)
            dist_inputs = stacked_forward(pis, x)
        dist = self.seats[flat[0][0]][flat[0][1]].dist
        return _Forward(flat, obs, masks, mask_logits(dist_inputs, mask),
                        torch.zeros(len(flat)), dist, greedy)

    def _inputs(self, where: list[tuple[int, str]]
                ) -> tuple[list[np.ndarray], list[np.ndarray | None], torch.Tensor | None]:
        """The seats' observations, masks, and the masks as one bool tensor (or None)."""
        split = [split_obs(self.obs[i][agent]) for i, agent in where]
        masks = [m for _, m in split]
        mask = None if masks[0] is None else torch.as_tensor(_batch(masks)).bool()
        return [o for o, _ in split], masks, mask

    def _step_recurrent(self, pi: ActingPolicy, where: list[tuple[int, str]], x: torch.Tensor
                        ) -> tuple[torch.Tensor, torch.Tensor]:
        """A recurrent policy's step for its seats: each (game, seat) has its own state,
        zero at its first step; records what a training sequence replays from."""
        seats = [self.seats[i][agent] for i, agent in where]
        zero = pi.initial_state(1)
        h = torch.cat([(s.state or zero)[0].view(1, -1) for s in seats])
        c = torch.cat([(s.state or zero)[1].view(1, -1) for s in seats])
        prev = [s.previous() for s in seats]
        prev_a = torch.as_tensor(_batch([a for a, _ in prev]))
        prev_r = torch.as_tensor([r for _, r in prev], dtype=torch.float32)
        dist_inputs, values, (h2, c2) = pi.step(x, (h, c), prev_a, prev_r)
        state_in = torch.stack([h, c], dim=1).numpy()
        for j, seat in enumerate(seats):
            seat.state = (h2[j], c2[j])
            seat.states_in.append(state_in[j])
            seat.prev_actions.append(prev[j][0])
            seat.prev_rewards.append(prev[j][1])
        return dist_inputs, values

    def _sample(self, forwards: list[_Forward], generator: torch.Generator | None,
                actions: list[dict[str, Any]], probs: list[np.ndarray]) -> None:
        """Actions for the seats of several policies with one distribution; records the
        steps in their seats, the env actions in ``actions`` and, for state critics, the
        movers' move probabilities in ``probs`` (by env)."""
        dist = forwards[0].dist
        with torch.no_grad():
            inputs = torch.cat([f.dist_inputs for f in forwards])
            chosen = dist.sample(inputs, generator)
            if any(f.greedy for f in forwards):
                rows = torch.cat([torch.full((len(f.where),), f.greedy) for f in forwards])
                rows = rows.view(-1, *[1] * (chosen.dim() - 1))
                chosen = torch.where(rows, dist.greedy(inputs), chosen)
            logp = dist.log_prob(inputs, chosen).tolist()
            # one softmax for all seats (illegal moves masked: probability 0)
            dists = torch.softmax(inputs, -1).numpy() if self.critic_states else None
        values = torch.cat([f.values for f in forwards]).tolist()
        out, inputs_np = chosen.numpy(), inputs.numpy()
        k = 0
        for f in forwards:
            for j, (i, agent) in enumerate(f.where):
                seat = self.seats[i][agent]
                seat.obs.append(f.obs[j])
                if f.masks[j] is not None:
                    seat.masks.append(f.masks[j].astype(bool))
                seat.actions.append(out[k])
                seat.logp.append(logp[k])
                seat.dist_inputs.append(inputs_np[k])
                seat.values.append(values[k])
                seat.rewards.append(0.0)
                actions[i][agent] = seat.to_env(out[k])
                if dists is not None:
                    probs[i] = dists[k]
                k += 1


def _batch(arrays: list[np.ndarray]) -> np.ndarray:
    """np.stack, without its cost for the single seat most league opponents play."""
    return arrays[0][None] if len(arrays) == 1 else np.stack(arrays)


@dataclass
class _Forward:
    """One policy's forward pass over the seats it plays at a step."""

    where: list[tuple[int, str]]  # (env, agent) per row
    obs: list[np.ndarray]
    masks: list[np.ndarray | None]
    dist_inputs: torch.Tensor  # illegal actions masked
    values: torch.Tensor
    dist: type
    greedy: bool
