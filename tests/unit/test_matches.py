"""MatchLoop on connect four: mappings per episode, rewards to the right seat, masks."""

import numpy as np
import pytest
import torch

pytest.importorskip("pettingzoo")

from distrl.games.games import make_multiagent_env, policy_obs_space
from distrl.games.matches import MatchLoop
from distrl.games.policies import RANDOM, LocalPolicy, RandomPolicy
from distrl.models.actor_critic import ActorCritic
from distrl.models.config import ModelConfig


def envs(n):
    return [make_multiagent_env("pettingzoo:connect_four_v3") for _ in range(n)]


def learner_policy():
    env = envs(1)[0]
    torch.manual_seed(0)
    module = ActorCritic(policy_obs_space(env.observation_space("player_0")),
                         env.action_space("player_0"), ModelConfig(hiddens=(32,)))
    return LocalPolicy(module)


def test_mapping_changes_take_effect_at_the_next_reset_only():
    current = {"learner": "A"}
    chosen: dict[int, list[dict]] = {0: [], 1: [], 2: []}

    def choose(i):
        mapping = {"player_0": current["learner"], "player_1": RANDOM}
        chosen[i].append(mapping)
        return mapping

    loop = MatchLoop(envs(3), choose, seed=0)
    policies = {"A": RandomPolicy(7), "B": RandomPolicy(7), RANDOM: RandomPolicy(7)}
    first = loop.collect(policies.__getitem__, set(), 0, 1.0, 1.0, min_episodes=4)
    current["learner"] = "B"  # the league switches; games in progress keep A
    second = loop.collect(policies.__getitem__, set(), 0, 1.0, 1.0, min_episodes=12)
    results = first.results + second.results
    # Each env's episodes, in order, were played under the mapping chosen at their reset
    # (the last mapping chosen per env belongs to the episode still running).
    for i, mappings in chosen.items():
        played = [r.policies for r in results if r.env == i]
        assert played == mappings[:len(played)] and len(mappings) == len(played) + 1
    switched = [r for r in second.results if r.policies["player_0"] == "A"]
    assert all(r.policies["player_0"] == "A" for r in first.results)
    # The games running at the switch finished with A; every later game used B.
    assert len(switched) == 3  # one per env: each had reset under A before the switch
    assert sum(r.policies["player_0"] == "B" for r in second.results) >= 12 - 3


def test_episodes_rewards_reach_the_seat_that_earned_them():
    pi = learner_policy()
    loop = MatchLoop(envs(4), lambda i: {"player_0": "A", "player_1": RANDOM}
                     if i % 2 == 0 else {"player_0": RANDOM, "player_1": "A"}, seed=1)
    batch = loop.collect({"A": pi, RANDOM: RandomPolicy(7)}.__getitem__, {"A"}, 300,
                         gamma=1.0, lambda_=1.0, generator=torch.Generator().manual_seed(0))
    r = batch.rollouts["A"]
    assert RANDOM not in batch.rollouts and r.size >= 300
    # gamma = lambda = 1 and a reward only at the end: every value target of a seat is
    # that seat's final return (+1, 0, -1), the loser's -1 included although it arrived
    # on the winner's move.
    assert set(np.unique(r.value_targets).round(5)) <= {-1.0, 0.0, 1.0}
    seats = [res.returns[a] for res in batch.results for a, p in res.policies.items()
             if p == "A"]
    assert -1.0 in seats and 1.0 in seats
    lengths = [(res.length + (a == "player_0")) // 2 for res in batch.results
               for a, p in res.policies.items() if p == "A"]
    assert r.size == sum(lengths)  # one sample per move A made, no other seat's moves
    # Chronological per seat: targets change only where a new seat begins.
    starts = np.cumsum([0, *lengths[:-1]])
    for start, n, ret in zip(starts, lengths, seats, strict=True):
        np.testing.assert_allclose(r.value_targets[start:start + n], ret, atol=1e-5)
    # Masks: every sampled action was legal.
    assert r.action_mask[np.arange(r.size), r.actions].all()
    np.testing.assert_allclose(r.advantages, r.value_targets - r.values, atol=1e-5)


class CountingValue(torch.nn.Module):
    """An ActorCritic that counts how many rows its value head computed."""

    def __init__(self, module):
        super().__init__()
        self.module, self.value_rows = module, 0

    def forward(self, obs, value=True):
        self.value_rows += obs.shape[0] if value else 0
        return self.module(obs, value=value)


def test_only_learning_policies_compute_values():
    learner, opponent = learner_policy(), learner_policy()
    counted = {"A": CountingValue(learner.module), "B": CountingValue(opponent.module)}
    loop = MatchLoop(envs(4), lambda i: {"player_0": "A", "player_1": "B"}
                     if i % 2 == 0 else {"player_0": "B", "player_1": "A"}, seed=2)
    policies = {pid: LocalPolicy(m) for pid, m in counted.items()}
    batch = loop.collect(policies.__getitem__, {"A"}, 200, 0.99, 0.95,
                         torch.Generator().manual_seed(0))
    r = batch.rollouts["A"]
    assert counted["B"].value_rows == 0 and counted["A"].value_rows >= r.size
    # The learner's recorded values are its value head's, and its dist inputs those of a
    # full forward pass (value=False changes nothing else).
    with torch.no_grad():
        full_inputs, full_values = learner.module(torch.as_tensor(r.obs))
        pi_inputs, zeros = learner.module(torch.as_tensor(r.obs), value=False)
    np.testing.assert_allclose(r.values, full_values.numpy(), atol=1e-6)
    torch.testing.assert_close(pi_inputs, full_inputs)
    assert not zeros.any()


def test_choose_must_seat_every_agent():
    with pytest.raises(ValueError, match="without a policy"):
        MatchLoop(envs(1), lambda i: {"player_0": "A"}, seed=0)


def test_every_learning_policy_reaches_its_own_batch():
    """A main agent in self-play fills both seats; an exploiter seated in a quarter of
    the games must still get min_samples of its own moves (it got about a quarter of
    the main agent's when the bound was on the learners' total)."""
    rng = np.random.default_rng(0)

    def choose(i):
        if rng.random() < 0.75:
            return {"player_0": "main", "player_1": "main"}
        return {"player_0": "exploiter", "player_1": "main"}

    loop = MatchLoop(envs(4), choose, seed=0)
    policies = {"main": learner_policy(), "exploiter": learner_policy()}
    batch = loop.collect(policies.__getitem__, {"main", "exploiter"}, 200, 0.99, 0.95)
    sizes = {pid: r.size for pid, r in batch.rollouts.items()}
    assert sizes["exploiter"] >= 200 and sizes["main"] >= 200, sizes


def test_a_recurrent_policy_keeps_a_state_per_game_and_seat_that_training_replays():
    """Self-play with an LSTM: both seats of a game are one policy, each with its own
    memory. Unrolling the learner's sequences from their stored states gives the very
    logits and values it acted with (fails if seats shared a state, if a state crossed
    an episode, or if the store's weights acted differently from the module's)."""
    from distrl.core.sequences import unroll_rows
    from distrl.core.types import PPOBatch
    from distrl.models.distributions import mask_logits
    from distrl.models.recurrent import RecurrentActorCritic
    from distrl.store.policy_cache import PolicyCache, PolicySpec, flatten_policy

    env = envs(1)[0]
    spaces = (policy_obs_space(env.observation_space("player_0")), env.action_space("player_0"))
    cfg = ModelConfig(hiddens=(32,), use_lstm=True, lstm_cell_size=8, lstm_use_prev_action=True,
                      lstm_use_prev_reward=True)
    torch.manual_seed(0)
    module = RecurrentActorCritic(*spaces, cfg).requires_grad_(False)
    spec = PolicySpec(*spaces, cfg)
    # The learner acts from its module; its frozen twin from a policy store's views.
    policies = {"A": LocalPolicy(module),
                "B": PolicyCache().put("B", 1, spec, flatten_policy(module))}
    loop = MatchLoop(envs(3), lambda i: {"player_0": "A", "player_1": "AB"[i % 2]}, seed=0,
                     max_seq_len=3)
    batch = loop.collect(policies.__getitem__, {"A", "B"}, 60, 0.99, 0.95)
    for pid in "AB":
        rollout = batch.rollouts[pid]
        assert rollout.seq_starts.sum() > rollout.size / 3  # episodes are cut every 3 moves
        b = PPOBatch.from_rollout(rollout)
        with torch.no_grad():
            dist_inputs, values, rows, _ = unroll_rows(module, b)
        torch.testing.assert_close(mask_logits(dist_inputs, b.action_mask[rows]),
                                   b.dist_inputs[rows], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(values, b.values[rows], rtol=1e-5, atol=1e-5)
        zero = (b.sequences.state_in.abs().sum(dim=(1, 2)) == 0).sum()
        assert 0 < zero < len(b.sequences.state_in)  # zero at a seat's first move only


class Alone:
    """A policy without an architecture key: it acts through its own forward pass."""

    def __init__(self, policy):
        self.policy, self.version = policy, 0

    def __call__(self, obs, value=True):
        return self.policy(obs, value=value)


def test_opponents_stacked_in_one_forward_play_as_they_would_alone():
    """Eight opponents of one architecture (games.batched stacks them) against a
    learner-sized net, greedy, from random openings: the same games as when each
    opponent acts through its own forward pass."""
    from distrl.games.scoring import RandomOpening

    def net(seed):
        torch.manual_seed(seed)
        env = envs(1)[0]
        return LocalPolicy(ActorCritic(policy_obs_space(env.observation_space("player_0")),
                                       env.action_space("player_0"),
                                       ModelConfig(hiddens=(32,))).requires_grad_(False))

    nets = {f"o{k}": net(k) for k in range(8)} | {"A": net(99)}
    runs = []
    for wrap in (lambda p: p, Alone):
        policies = {pid: wrap(p) for pid, p in nets.items()}
        games = [RandomOpening(e, 2, seed=k) for k, e in enumerate(envs(16))]
        loop = MatchLoop(games, lambda i: {"player_0": "A", "player_1": f"o{i % 8}"}, seed=0)
        batch = loop.collect(policies.__getitem__, set(), 0, 1.0, 1.0, greedy=set(nets),
                             min_episodes=48)
        runs.append([(r.env, r.returns, r.length) for r in batch.results])
    assert len(runs[0]) >= 48 and runs[0] == runs[1]
    assert len({returns["player_0"] for _, returns, _ in runs[0]}) > 1  # not one game
