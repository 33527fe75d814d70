"""State critics (ModelConfig.state_critic): what league seats record around their
moves, the learner's advantages over those nodes, and a critic that learns the values
of a poker game's hidden-card states."""

import numpy as np
import pytest
import torch

pyspiel = pytest.importorskip("pyspiel")

from distrl import LeagueConfig, ModelConfig, PPOConfig  # noqa: E402
from distrl.league.games import make_multiagent_env, policy_obs_space  # noqa: E402
from distrl.league.matches import MatchLoop  # noqa: E402
from distrl.league.policies import LocalPolicy, RandomPolicy  # noqa: E402
from distrl.league.trainer import PolicyTrainer, node_advantages  # noqa: E402
from distrl.models.actor_critic import ActorCritic  # noqa: E402

KUHN = "openspiel:kuhn_poker"
SIZE = 11  # Kuhn's information-state tensor: player (2), card (3), bets (6)


def spaces():
    env = make_multiagent_env(KUHN)
    return policy_obs_space(env.observation_space("player_0")), env.action_space("player_0")


def self_play(policy, samples: int, seed: int):
    """Kuhn games the learner "A" plays against itself, recording critic states: the
    MatchBatch (A's rollout, the games' results)."""
    envs = [make_multiagent_env(KUHN) for _ in range(8)]
    loop = MatchLoop(envs, lambda i: {"player_0": "A", "player_1": "A"}, seed=seed,
                     critic_states=True)
    return loop.collect({"A": policy}.__getitem__, {"A"}, samples, 1.0, 1.0,
                        torch.Generator().manual_seed(seed))


def seat_slices(ends):
    """Each seat's rows: seats end where their last after-node's end is non-zero."""
    last = np.flatnonzero(ends[:, 1] != 0)
    starts = np.concatenate([[0], last[:-1] + 1])
    return [slice(a, b + 1) for a, b in zip(starts, last, strict=True)]


def test_seats_record_the_whole_state_around_each_of_their_moves():
    torch.manual_seed(0)
    policy = LocalPolicy(ActorCritic(*spaces(), ModelConfig(hiddens=(16,))))
    batch = self_play(policy, 400, seed=1)
    r = batch.rollouts["A"]
    before, after, ends = r.critic_obs[:, 0], r.critic_obs[:, 1], r.critic_ends
    assert r.critic_obs.shape == (r.size, 2, 2 * SIZE)
    # The mover's own information first (what its policy saw), then the other player's,
    # whose card is the one the policy never sees: a different one, as Kuhn deals.
    np.testing.assert_array_equal(before[:, :SIZE], r.obs)
    own_card, other_card = before[:, 2:5], before[:, SIZE + 2:SIZE + 5]
    assert (other_card.sum(1) == 1).all() and ((own_card * other_card).sum(1) == 0).all()
    np.testing.assert_array_equal(before[:, SIZE:SIZE + 2], before[:, 1::-1])
    # After the move: the same cards and one more bet recorded, or nothing (game over).
    going = ends[:, 0] == 0
    np.testing.assert_array_equal(after[going][:, :5], before[going][:, :5])
    assert ((after[going] - before[going])[:, 5:SIZE].sum(1) == 1).all()
    assert not after[~going].any() and (ends[~going, 1] == 2).all()
    # Every seat ends once, at its last step; its nodes' rewards add up to its return
    # (a finished game's two seats, in seat order: both players act in every Kuhn game).
    seats = seat_slices(ends)
    assert sum(s.stop - s.start for s in seats) == r.size and len(seats) > 100
    for s in seats:
        assert (ends[s][:-1] == 0).all() and ends[s][-1, 1] in (1, 2)
    returns = [g.returns[p] for g in batch.results for p in ("player_0", "player_1")]
    np.testing.assert_allclose([r.critic_rewards[s].sum() for s in seats], returns)
    assert (np.abs(r.critic_rewards[:, 0][going]) == 0).all()  # Kuhn pays at the end


def naive_node_advantages(values, rewards, ends, gamma, lam):
    """Per seat, its live nodes in order: A_k = sum_j (prod_{k<=i<j} g_i lam) delta_j,
    delta_j = r_j + g_j V_{j+1} - V_j, g = 1 after a step's node and gamma after its
    after-node, V = 0 after the seat's last node."""
    adv, targets = np.zeros(len(values)), np.zeros(len(values))
    for s in seat_slices(ends.reshape(-1, 2)):
        nodes = [k for k in range(2 * s.start, 2 * s.stop) if ends[k] != 2]
        for n, k in enumerate(nodes):
            total, weight = 0.0, 1.0
            for m in range(n, len(nodes)):
                j = nodes[m]
                g = gamma if j % 2 == 1 else 1.0
                following = values[nodes[m + 1]] if m + 1 < len(nodes) else 0.0
                total += weight * (rewards[j] + g * following - values[j])
                weight *= g * lam
            adv[k], targets[k] = total, total + values[k]
    return adv, targets


@pytest.mark.parametrize("gamma,lam", [(1.0, 0.0), (0.9, 0.7), (1.0, 1.0)])
def test_node_advantages_match_a_naive_sum_over_each_seats_nodes(gamma, lam):
    torch.manual_seed(0)
    policy = LocalPolicy(ActorCritic(*spaces(), ModelConfig(hiddens=(16,))))
    r = self_play(policy, 300, seed=2).rollouts["A"]
    rng = np.random.default_rng(0)
    values = rng.normal(size=2 * r.size).astype(np.float32)
    rewards = r.critic_rewards.reshape(-1) + rng.normal(size=2 * r.size).astype(np.float32)
    ends = r.critic_ends.reshape(-1)
    adv, targets = node_advantages(values, rewards, ends, gamma, lam)
    ref_adv, ref_targets = naive_node_advantages(values, rewards, ends, gamma, lam)
    np.testing.assert_allclose(adv, ref_adv, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(targets, ref_targets, rtol=1e-5, atol=1e-5)
    if lam == 1.0 and gamma == 1.0:  # Monte Carlo: the return from the step on
        paid = np.where(ends == 2, 0.0, rewards)  # a node that is not there pays nothing
        np.testing.assert_allclose(adv[0::2] + values[0::2],
                                   [paid[2 * i:2 * s.stop].sum()
                                    for s in seat_slices(r.critic_ends)
                                    for i in range(s.start, s.stop)], rtol=1e-4, atol=1e-4)


def exact_values(policy_probs):
    """V(h) for the player to move at every Kuhn decision, under a policy both play,
    keyed by the critic's input (both players' information, the mover's first)."""
    game = pyspiel.load_game("kuhn_poker")
    out = {}

    def walk(state):
        if state.is_terminal():
            return np.asarray(state.returns())
        if state.is_chance_node():
            return sum(p * walk(state.child(a)) for a, p in state.chance_outcomes())
        probs = policy_probs(state)
        value = sum(probs[a] * walk(state.child(a)) for a in state.legal_actions())
        mover = state.current_player()
        key = np.concatenate([state.information_state_tensor(mover),
                              state.information_state_tensor(1 - mover)]).astype(np.float32)
        out[key.tobytes()] = value[mover]
        return value

    walk(game.new_initial_state())
    return out


def test_a_state_critic_learns_the_values_of_hidden_card_states():
    # Uniformly random self-play: a Kuhn state's value depends on both cards, which the
    # critic sees; an information-state critic could only learn their average over the
    # card it cannot see.
    torch.manual_seed(0)
    cfg = LeagueConfig(model=ModelConfig(hiddens=(32, 32), state_critic=True), lr=1e-2,
                       gamma=1.0, lambda_=1.0, minibatch_size=256, num_epochs=4,
                       use_kl_loss=False)
    trainer = PolicyTrainer(*spaces(), cfg)
    for i in range(20):
        trainer.update(self_play(RandomPolicy(2), 1024, seed=100 + i).rollouts["A"])
    truth = exact_values(lambda state: {a: 0.5 for a in state.legal_actions()})
    keys = np.stack([np.frombuffer(k, np.float32) for k in truth])
    with torch.no_grad():
        predicted = trainer.critic.model(torch.as_tensor(keys)).numpy()
    expected = np.array(list(truth.values()))
    error = np.abs(predicted - expected)
    # The best a critic of the mover's information alone can do: the mean value of the
    # states it cannot tell apart (uniform play: every other card equally likely).
    own = [k[:SIZE].tobytes() for k in keys]
    pooled = np.array([expected[[o == x for x in own]].mean() for o in own])
    blind = np.abs(pooled - expected)
    assert error.mean() < 0.12 and error.max() < 0.3  # ~1,000 Monte Carlo returns a state
    hidden = blind > 0.1  # states whose value the other card changes
    assert hidden.sum() >= 8 and error[hidden].mean() < 0.2 * blind[hidden].mean()


def test_the_critic_resumes_from_a_checkpoint_and_bad_setups_are_refused():
    torch.manual_seed(0)
    cfg = LeagueConfig(model=ModelConfig(hiddens=(16,), state_critic=True), minibatch_size=64,
                       num_epochs=1)
    trainer = PolicyTrainer(*spaces(), cfg)
    rollout = self_play(RandomPolicy(2), 128, seed=3).rollouts["A"]
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.update(rollout)
    # The policy trains; its own value head is neither used nor trained.
    after = trainer.model.state_dict()
    moved = {k for k in before if not torch.equal(before[k], after[k])}
    assert moved and all(k.startswith("pi.") for k in moved), moved
    restored = PolicyTrainer(*spaces(), cfg)
    restored.set_state(trainer.get_state())
    states = torch.as_tensor(rollout.critic_obs[:, 0])
    torch.testing.assert_close(restored.critic.model(states), trainer.critic.model(states))
    assert restored.critic.opt.state_dict()["state"]  # Adam's moments came back too
    with pytest.raises(ValueError, match="only league"):
        PPOConfig(model=ModelConfig(state_critic=True))
    with pytest.raises(ValueError, match="use_lstm"):
        ModelConfig(state_critic=True, use_lstm=True)
    with pytest.raises(ValueError, match="no critic_state"):
        MatchLoop([object()], lambda i: {}, seed=0, critic_states=True)
