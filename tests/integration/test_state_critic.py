"""State critics (LeagueConfig.state_critic): the game nodes league seats record, the
learner's control-variate advantages over them, and a critic that learns the values of a
poker game's hidden-card states."""

import numpy as np
import pytest
import torch

pyspiel = pytest.importorskip("pyspiel")

from distrl import LeagueConfig, ModelConfig  # noqa: E402
from distrl.games.games import make_multiagent_env, policy_obs_space  # noqa: E402
from distrl.games.matches import MatchLoop  # noqa: E402
from distrl.games.policies import LocalPolicy, RandomPolicy  # noqa: E402
from distrl.league.trainer import LeagueTrainer, control_variate_returns  # noqa: E402
from distrl.models.actor_critic import ActorCritic  # noqa: E402

SIZES = {"kuhn_poker": 11, "leduc_poker": 30}  # information-state tensors
CONFIG = LeagueConfig(model=ModelConfig(hiddens=(32, 32)), state_critic=True, lr=1e-2,
                      gamma=1.0, minibatch_size=256, num_epochs=4, use_kl_loss=False)


def spaces(game):
    env = make_multiagent_env(f"openspiel:{game}")
    return policy_obs_space(env.observation_space("player_0")), env.action_space("player_0")


def self_play(game, policy, samples: int, seed: int):
    """Games the learner "A" plays against itself, recording their nodes: the MatchBatch."""
    envs = [make_multiagent_env(f"openspiel:{game}") for _ in range(8)]
    loop = MatchLoop(envs, lambda i: {"player_0": "A", "player_1": "A"}, seed=seed,
                     critic_states=True)
    return loop.collect({"A": policy}.__getitem__, {"A"}, samples, 1.0, 1.0,
                        torch.Generator().manual_seed(seed))


def seat_starts(r):
    """The first row of each seat: a seat's later rows see a suffix of its first's nodes."""
    live = (r.game.critic_choice >= 0).sum(1)
    starts = [0]
    for k in range(1, r.size):
        n, shift = live[k], live[k - 1] - live[k]
        same = shift > 0 and np.array_equal(r.game.critic_obs[k, :n],
                                            r.game.critic_obs[k - 1, shift:shift + n])
        if not same:
            starts.append(k)
    return starts


def test_seats_record_every_node_of_their_games_from_each_step_on():
    torch.manual_seed(0)
    size = SIZES["leduc_poker"]
    policy = LocalPolicy(ActorCritic(*spaces("leduc_poker"), ModelConfig(hiddens=(16,))))
    batch = self_play("leduc_poker", policy, 600, seed=1)
    r = batch.rollouts["A"]
    live = r.game.critic_choice >= 0
    assert r.game.critic_obs.shape[::2] == (r.size, 2 * size) and r.game.critic_probs.shape[2] == 6
    # A row starts at its own step: the seat's information first (what its policy saw),
    # then the other player's, whose private card the policy never sees.
    np.testing.assert_array_equal(r.game.critic_obs[:, 0, :size], r.obs)
    own, other = r.game.critic_obs[:, 0, 2:8], r.game.critic_obs[:, 0, size + 2:size + 8]
    assert ((own * other).sum(1) == 0).all()
    np.testing.assert_array_equal(r.game.critic_choice[:, 0], r.actions)
    probs = torch.softmax(torch.as_tensor(r.dist_inputs), 1).numpy()
    np.testing.assert_allclose(r.game.critic_probs[:, 0, :3], probs, rtol=1e-5, atol=1e-6)
    # The public card is a chance node: four cards left, one each; moves have three.
    chance = live & (r.game.critic_probs[..., 3:].sum(-1) > 0)
    assert chance.sum() > 100 and (~live[:, 0] | ~chance[:, 0]).all()
    np.testing.assert_allclose(np.sort(r.game.critic_probs[chance], 1)[:, 2:], 0.25)
    assert (np.take_along_axis(r.game.critic_probs, np.maximum(r.game.critic_choice, 0)[..., None],
                               2)[..., 0][live] > 0).all()
    np.testing.assert_allclose(r.game.critic_probs[live].sum(1), 1.0, rtol=1e-5)
    assert not r.game.critic_obs[~live].any() and not r.game.critic_rewards[~live].any()
    # Each seat's first row holds its whole game from its first move; its rewards add up
    # to the seat's return (two seats a game, in seat order, rows in finishing order).
    starts = seat_starts(r)
    returns = [g.returns[p] for g in batch.results for p in ("player_0", "player_1")]
    assert len(starts) == len(returns) > 50
    np.testing.assert_allclose(r.game.critic_rewards[starts].sum(1), returns)


def test_the_critic_fits_each_node_once_weighted_by_the_rows_that_hold_it():
    torch.manual_seed(0)
    policy = LocalPolicy(ActorCritic(*spaces("leduc_poker"), ModelConfig(hiddens=(16,))))
    r = self_play("leduc_poker", policy, 600, seed=2).rollouts["A"]
    live, fit = r.game.critic_choice >= 0, r.game.critic_weight > 0
    assert (fit <= live).all() and fit.sum() < 0.8 * live.sum()  # the repeats are dropped
    # Per distinct (node, view, choice): the fit's weight is how often the rows hold it.
    def tally(mask, weight):
        out = {}
        for b, n in zip(*np.nonzero(mask), strict=True):
            key = (r.game.critic_obs[b, n].tobytes(), int(r.game.critic_choice[b, n]))
            out[key] = out.get(key, 0) + weight[b, n]
        return out
    assert tally(fit, r.game.critic_weight) == tally(live, np.ones(live.shape))


def test_a_weighted_node_fits_as_its_repeats_would():
    """One minibatch: weights (2, 1) give the critic the step that rows (a, a, b) give."""
    rng = np.random.default_rng(0)
    states = torch.as_tensor(rng.normal(size=(2, 22)), dtype=torch.float32)
    choice, targets = torch.tensor([0, 2]), torch.tensor([1.0, -0.5])
    critics = []
    for rows in ([0, 1], [0, 0, 1]):
        trainer = LeagueTrainer(*spaces("kuhn_poker"), CONFIG)
        trainer._state_critic(22, 3)
        weight = torch.tensor([2.0, 1.0]) if len(rows) == 2 else torch.ones(3)
        trainer._fit_critic(states[rows], choice[rows], targets[rows], weight, 3, None)
        critics.append(trainer.critic.model.state_dict())
    for k, w in critics[0].items():
        torch.testing.assert_close(w, critics[1][k])


def naive_returns(q, probs, choice, rewards):
    """Per row, node by node from its end: t_n = r_n + u_{n+1},
    u_n = sum_a p_n(a) q_n(a) + t_n - q_n(choice_n)."""
    targets = np.zeros(rewards.shape)
    for b in range(len(choice)):
        u = 0.0
        for n in reversed(range(int((choice[b] >= 0).sum()))):
            targets[b, n] = rewards[b, n] + u
            u = probs[b, n] @ q[b, n] + targets[b, n] - q[b, n, choice[b, n]]
    return targets, (probs[:, 0] * q[:, 0]).sum(1)


def test_control_variate_returns_match_a_naive_recursion_and_monte_carlo_without_a_critic():
    rng = np.random.default_rng(0)
    rows, length, k = 50, 6, 4
    ends = rng.integers(1, length + 1, rows)
    live = np.arange(length) < ends[:, None]
    choice = np.where(live, rng.integers(0, k, (rows, length)), -1)
    probs = rng.dirichlet(np.ones(k), (rows, length)) * live[..., None]
    rewards = rng.normal(size=(rows, length)) * live
    q = rng.normal(size=(rows, length, k))
    as_t = [torch.as_tensor(x, dtype=torch.float64) for x in (q, probs)]
    targets, baseline = control_variate_returns(*as_t, torch.as_tensor(choice),
                                                torch.as_tensor(rewards))
    ref_targets, ref_baseline = naive_returns(q, probs, choice, rewards)
    np.testing.assert_allclose(targets.numpy(), ref_targets, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(baseline.numpy(), ref_baseline, rtol=1e-9, atol=1e-9)
    targets, baseline = control_variate_returns(torch.zeros_like(as_t[0]), as_t[1],
                                                torch.as_tensor(choice), torch.as_tensor(rewards))
    mc = np.cumsum(rewards[:, ::-1], 1)[:, ::-1] * live  # the return from each node on
    np.testing.assert_allclose(targets.numpy(), mc, rtol=1e-9, atol=1e-9)
    assert not baseline.any()


def exact_action_values(game_name):
    """q(h, a) of every move and chance outcome under uniformly random play, to each
    player, keyed by the critic's input for that player (its information first)."""
    game = pyspiel.load_game(game_name)
    env = make_multiagent_env(f"openspiel:{game_name}")
    out = {}

    def walk(state):
        if state.is_terminal():
            return np.asarray(state.returns())
        if state.is_chance_node():
            moves = state.chance_outcomes()
        else:
            legal = state.legal_actions()
            moves = [(a, 1 / len(legal)) for a in legal]
        children = {a: walk(state.child(a)) for a, _ in moves}
        env.state = state
        for p in range(2):
            q = np.zeros(env.critic_outcomes)
            for a, child in children.items():
                q[a] = child[p]
            out[np.roll(env.critic_state(), -p, axis=0).tobytes()] = q
        return sum(prob * children[a] for a, prob in moves)

    walk(game.new_initial_state())
    return out


class Lookup(torch.nn.Module):
    def __init__(self, table):
        super().__init__()
        self.table = table

    def forward(self, states):
        return torch.as_tensor(np.stack([self.table[s.numpy().tobytes()] for s in states]),
                               dtype=torch.float32)


def test_with_the_exact_critic_each_advantage_is_the_moves_exact_advantage():
    # With exact values every control variate cancels the noise of its node, so each
    # advantage is q(h, a) - V(h) exactly, however the later cards and moves fell; the
    # Monte Carlo return (no critic) is far from it.
    table = exact_action_values("leduc_poker")
    trainer = LeagueTrainer(*spaces("leduc_poker"), CONFIG)
    r = self_play("leduc_poker", RandomPolicy(3), 2000, seed=4).rollouts["A"]
    shape = r.game.critic_obs.shape[-1], r.game.critic_probs.shape[-1]
    trainer._state_critic(*shape).model = Lookup(table)
    out, _ = trainer._critic_advantages(r)
    first = [table[s.tobytes()] for s in r.game.critic_obs[:, 0]]
    expected = [q[a] - q[r.game.critic_probs[k, 0] > 0].mean() for k, (q, a)
                in enumerate(zip(first, r.actions, strict=True))]
    np.testing.assert_allclose(out.advantages, expected, rtol=1e-5, atol=1e-5)
    monte_carlo = r.game.critic_rewards.sum(1)
    assert np.abs(monte_carlo - np.array(expected)).mean() > 1.0


def test_a_state_critic_learns_the_values_of_hidden_card_states():
    # Uniformly random Kuhn self-play: a move's value depends on both cards, which the
    # critic sees; an information-state critic could only learn their average.
    torch.manual_seed(0)
    size = SIZES["kuhn_poker"]
    trainer = LeagueTrainer(*spaces("kuhn_poker"), CONFIG)
    rows = []
    for i in range(20):
        r = self_play("kuhn_poker", RandomPolicy(2), 1024, seed=100 + i).rollouts["A"]
        trainer.update(r)
        rows.append(r.game.critic_obs[:, 0])
    table = exact_action_values("kuhn_poker")
    keys = np.unique(np.concatenate(rows), axis=0)  # the states the seats moved in
    with torch.no_grad():
        predicted = trainer.critic.model(torch.as_tensor(keys))[:, :2].numpy()
    expected = np.stack([table[k.tobytes()][:2] for k in keys])
    error = np.abs(predicted - expected)
    own = [k[:size].tobytes() for k in keys]
    pooled = np.stack([expected[[o == x for x in own]].mean(0) for o in own])
    blind = np.abs(pooled - expected)
    assert error.mean() < 0.05 and error.max() < 0.2
    hidden = blind > 0.1  # values the other card changes
    assert hidden.sum() >= 8 and error[hidden].mean() < 0.1 * blind[hidden].mean()


def test_the_critic_resumes_from_a_checkpoint_and_bad_setups_are_refused():
    torch.manual_seed(0)
    cfg = LeagueConfig(model=ModelConfig(hiddens=(16,)), state_critic=True, minibatch_size=64,
                       num_epochs=1, gamma=1.0)
    trainer = LeagueTrainer(*spaces("kuhn_poker"), cfg)
    rollout = self_play("kuhn_poker", RandomPolicy(2), 128, seed=3).rollouts["A"]
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.update(rollout)
    # The policy trains; its own value head is neither used nor trained.
    after = trainer.model.state_dict()
    moved = {k for k in before if not torch.equal(before[k], after[k])}
    assert moved and all(k.startswith("pi.") for k in moved), moved
    restored = LeagueTrainer(*spaces("kuhn_poker"), cfg)
    restored.set_state(trainer.get_state())
    states = torch.as_tensor(rollout.game.critic_obs[:, 0])
    torch.testing.assert_close(restored.critic.model(states), trainer.critic.model(states))
    assert restored.critic.opt.state_dict()["state"]  # Adam's moments came back too
    with pytest.raises(ValueError, match="use_lstm"):
        LeagueConfig(model=ModelConfig(use_lstm=True), state_critic=True, gamma=1.0)
    with pytest.raises(ValueError, match=r"gamma=1\.0"):
        LeagueConfig(state_critic=True, gamma=0.99)
    with pytest.raises(ValueError, match="no critic_state"):
        MatchLoop([object()], lambda i: {}, seed=0, critic_states=True)
