"""Magnet.counterfactual: moves record their game's probability under the mover's own
earlier moves and under the others and chance; the policy term is weighted by the
inverse of the first, the magnet and entropy terms by the inverse of their product."""

import math

import numpy as np
import pytest
import torch

pyspiel = pytest.importorskip("pyspiel")

from distrl import LeagueConfig, Magnet, ModelConfig  # noqa: E402
from distrl.core.types import PPOBatch  # noqa: E402
from distrl.games.games import make_multiagent_env, policy_obs_space  # noqa: E402
from distrl.games.matches import MatchLoop  # noqa: E402
from distrl.games.policies import LocalPolicy  # noqa: E402
from distrl.league.terms import (  # noqa: E402
    LeagueRows,
    counterfactual_weights,
    magnet_term,
    reweighting_term,
    visit_weights,
)
from distrl.league.trainer import LeagueTrainer  # noqa: E402
from distrl.models.actor_critic import ActorCritic  # noqa: E402
from distrl.models.distributions import Categorical  # noqa: E402
from distrl.ppo.config import PPOHyperparams  # noqa: E402
from distrl.ppo.loss import ppo_loss  # noqa: E402

KUHN = "openspiel:kuhn_poker"
DEAL = math.log(1 / 6)  # Kuhn deals two of three cards


def test_openspiel_envs_add_up_their_chance_outcomes_log_probabilities():
    env = make_multiagent_env("openspiel:leduc_poker")
    env.reset(seed=0)
    assert env.chance_logp == pytest.approx(math.log(1 / 6 * 1 / 5))  # two private cards
    env.step({"player_0": 1})  # call
    assert env.chance_logp == pytest.approx(math.log(1 / 30))
    env.step({"player_1": 1})  # call: the first round ends, a public card of the 4 left
    assert env.chance_logp == pytest.approx(math.log(1 / 30 * 1 / 4))
    env.reset(seed=1)
    assert env.chance_logp == pytest.approx(math.log(1 / 30))


def kuhn_self_play(samples: int):
    """One env of Kuhn self-play by a skewed random network, recording others' reach."""
    torch.manual_seed(0)
    env = make_multiagent_env(KUHN)
    model = ActorCritic(policy_obs_space(env.observation_space("player_0")),
                        env.action_space("player_0"), ModelConfig(hiddens=(8,)))
    with torch.no_grad():
        model.pi[-1].weight.mul_(300.0)  # distinct action probabilities per state
    loop = MatchLoop([env], lambda i: {"player_0": "A", "player_1": "A"}, seed=0,
                     others_reach=True)
    return loop.collect({"A": LocalPolicy(model)}.__getitem__, {"A"}, samples, 1.0, 1.0,
                        torch.Generator().manual_seed(0)).rollouts["A"]


def test_each_move_records_the_deal_and_the_other_players_moves_before_it():
    r = kuhn_self_play(300)
    others, own = r.game.reach_logp[:, 1], r.game.reach_logp[:, 0]
    # Rows per game: player 0's moves (1 or 2), then player 1's (one). Player 0's first
    # move saw only the deal; player 1 saw the deal and player 0's first move; player
    # 0's second saw the deal and player 1's move, after its own first.
    firsts = np.flatnonzero(np.isclose(others, DEAL, atol=1e-6))
    games = np.split(np.arange(r.size), firsts[1:])
    assert firsts[0] == 0 and len(games) > 80
    assert {len(g) for g in games} == {2, 3}
    for g in games:
        p0_first, p1 = g[0], g[-1]
        assert others[p1] == pytest.approx(DEAL + r.logp[p0_first], abs=1e-5)
        assert own[p0_first] == 0.0 and own[p1] == 0.0
        if len(g) == 3:
            assert others[g[1]] == pytest.approx(DEAL + r.logp[p1], abs=1e-5)
            assert own[g[1]] == pytest.approx(r.logp[p0_first], abs=1e-6)
    assert np.ptp(r.logp) > 1.0  # the checks above see different probabilities


def test_counterfactual_weights_are_inverse_reaches_with_mean_one():
    own = np.log([1.0, 0.5, 0.25, 1.0])
    others = np.log([0.5, 0.1, 0.02, 0.5])
    pg, reg = counterfactual_weights(np.stack([own, others], 1).astype(np.float32),
                                     torch.device("cpu"))
    np.testing.assert_allclose(pg.numpy(), np.array([1, 2, 4, 1]) / 2.0, rtol=1e-5)
    inverse = 1 / (np.exp(own) * np.exp(others))  # 2, 20, 200, 2
    np.testing.assert_allclose(reg.numpy(), inverse / inverse.mean(), rtol=1e-5)


def test_visit_weights_give_each_information_state_of_the_batch_one_share(monkeypatch):
    import distrl.league.trainer as trainer_module

    r = kuhn_self_play(256)
    keys = [row.tobytes() for row in r.obs]
    counts = {k: keys.count(k) for k in keys}
    naive = np.array([1 / counts[k] for k in keys])
    weights = visit_weights(r.obs, torch.device("cpu")).numpy()
    np.testing.assert_allclose(weights, naive / naive.mean(), rtol=1e-5)
    assert 6 <= len(counts) <= 12 and weights.max() / weights.min() > 5  # of 12 states
    seen = {}

    def capture(learner, batch, *args, **kwargs):
        seen["reg"], seen["pg"] = batch.extra.reg_weights, batch.extra.pg_weights
        return {"kl": 0.0}

    monkeypatch.setattr(trainer_module, "ppo_update", capture)
    env = make_multiagent_env(KUHN)
    cfg = LeagueConfig(model=ModelConfig(hiddens=(8,)), minibatch_size=128, num_epochs=1,
                       magnet=Magnet(coeff=0.5, counterfactual=True, regulariser="visits"))
    trainer = LeagueTrainer(policy_obs_space(env.observation_space("player_0")),
                            env.action_space("player_0"), cfg, magnet=cfg.magnet)
    trainer.update(r)
    np.testing.assert_allclose(seen["reg"].numpy(), weights, rtol=1e-6)
    pg, _ = counterfactual_weights(r.game.reach_logp, torch.device("cpu"))
    torch.testing.assert_close(seen["pg"], pg)  # the policy term keeps its weights
    with pytest.raises(ValueError, match="set counterfactual=True"):
        Magnet(coeff=0.5, regulariser="visits")  # would do nothing without it


def test_weights_scale_the_policy_and_the_regularisers_apart():
    cfg = PPOHyperparams(use_kl_loss=False)
    logits = torch.log(torch.tensor([[0.6, 0.4], [0.9, 0.1]]))
    batch = PPOBatch(obs=torch.zeros(2, 4), actions=torch.tensor([0, 1]),
                     logp=torch.log(torch.tensor([0.5, 0.5])), dist_inputs=torch.zeros(2, 2),
                     values=torch.zeros(2), advantages=torch.tensor([1.0, -2.0]),
                     value_targets=torch.zeros(2))
    terms = [magnet_term(Categorical, 0.3), reweighting_term(Categorical, cfg.clip_param, 0.1)]
    batch.extra = LeagueRows(magnet=torch.zeros(2, 2))  # a uniform magnet
    plain_loss, plain = ppo_loss(logits, torch.zeros(2), batch, cfg, Categorical, 0.0, 0.1,
                                 terms)
    batch.extra = LeagueRows(torch.zeros(2, 2), torch.tensor([1.6, 0.4]), torch.tensor([0.5, 1.5]))
    loss, weighted = ppo_loss(logits, torch.zeros(2), batch, cfg, Categorical, 0.0, 0.1, terms)
    entropy = [-(p * math.log(p) + (1 - p) * math.log(1 - p)) for p in (0.6, 0.9)]
    kl = [math.log(2) - h for h in entropy]  # KL(p || uniform) = log 2 - H(p)
    assert weighted["weighted_entropy"].item() == pytest.approx(
        (0.5 * entropy[0] + 1.5 * entropy[1]) / 2)
    assert weighted["magnet_kl"].item() == pytest.approx((0.5 * kl[0] + 1.5 * kl[1]) / 2)
    assert plain["magnet_kl"].item() == pytest.approx(sum(kl) / 2)
    # Ratios 1.2 (A = 1) and 0.2 (A = -2, clipped to 0.8): surrogates 1.2 and -1.6.
    assert plain["policy_loss"].item() == pytest.approx(-(1.2 - 1.6) / 2, rel=1e-5)
    weighted_pg = -(1.6 * 1.2 - 0.4 * 1.6) / 2
    assert weighted["weighted_policy_loss"].item() == pytest.approx(weighted_pg, rel=1e-5)
    # The total: the weighted policy term, minus 0.1 x the weighted entropy, plus 0.3 x
    # the weighted KL to the magnet, and PPO's value loss (0 here)
    expected = (weighted_pg - 0.1 * (0.5 * entropy[0] + 1.5 * entropy[1]) / 2
                + 0.3 * (0.5 * kl[0] + 1.5 * kl[1]) / 2)
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    assert plain_loss.item() == pytest.approx(-(1.2 - 1.6) / 2 - 0.1 * sum(entropy) / 2
                                              + 0.3 * sum(kl) / 2, rel=1e-5)


def test_a_counterfactual_learner_trains_on_kuhn_and_bad_setups_are_refused():
    r = kuhn_self_play(256)
    env = make_multiagent_env(KUHN)
    cfg = LeagueConfig(model=ModelConfig(hiddens=(8,)), minibatch_size=128, num_epochs=1,
                       magnet=Magnet(coeff=0.5, counterfactual=True))
    trainer = LeagueTrainer(policy_obs_space(env.observation_space("player_0")),
                            env.action_space("player_0"), cfg, magnet=cfg.magnet)
    assert trainer.update(r)["magnet_kl"] >= 0
    r.game.reach_logp = None
    with pytest.raises(ValueError, match="reach_logp"):
        trainer.update(r)
    with pytest.raises(ValueError, match="no chance_logp"):
        MatchLoop([object()], lambda i: {}, seed=0, others_reach=True)


def test_the_cli_flag_trains_a_kuhn_league(tmp_path):
    import subprocess
    import sys

    from distrl.core.checkpoint import Checkpoint
    from distrl.core.config import from_json

    logdir = str(tmp_path / "run")
    subprocess.run([sys.executable, "-m", "distrl", "train", "league", "--env", KUHN,
                    "--max-env-steps", "300", "--num-envs", "4", "--train-batch-size", "64",
                    "--minibatch-size", "32", "--magnet-coeff", "0.2",
                    "--magnet-counterfactual", "--logdir", logdir], check=True,
                   capture_output=True)
    saved = Checkpoint(logdir).json("run", "config.json")["config"]
    assert from_json(LeagueConfig, saved).magnet == Magnet(0.2, counterfactual=True)


def test_a_seat_pickled_before_its_newer_fields_gets_their_defaults():
    from distrl.core.checkpoint import games_in_progress, trusted_loads
    from distrl.games.seats import Seat

    env = make_multiagent_env(KUHN)
    seat = Seat("A", env.action_space("player_0"))
    seat.logp.append(-0.5)
    del seat.others_logp, seat.node_ids  # as an older version pickled it
    restored = trusted_loads(games_in_progress(seat, KUHN))
    assert restored.others_logp == [] and restored.node_ids == [] and restored.logp == [-0.5]
