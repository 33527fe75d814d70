"""League maths: PFSP, payoff decay and prior, Elo, matchmaking, snapshots, resets."""

import json

import numpy as np
import pytest

from distrl.league.rules import Elo, League, LeagueRules, PayoffTable, fit_elo, pfsp_weights


def test_pfsp_weights_by_hand():
    p = np.array([0.2, 0.5, 0.9])
    np.testing.assert_allclose(pfsp_weights(p, "hard"), np.array([0.64, 0.25, 0.01]) / 0.9)
    np.testing.assert_allclose(pfsp_weights(p, "variance"),
                               np.array([0.16, 0.25, 0.09]) / 0.5)
    np.testing.assert_allclose(pfsp_weights(p, "linear"), np.array([0.8, 0.5, 0.1]) / 1.4)
    np.testing.assert_allclose(pfsp_weights(np.array([1.0, 1.0]), "hard"), [0.5, 0.5])
    with pytest.raises(ValueError, match="hard, variance, linear"):
        pfsp_weights(p, "squared")


@pytest.mark.parametrize("mode", ["hard", "linear"])
def test_pfsp_never_prefers_an_easier_opponent(mode):
    p = np.sort(np.random.default_rng(0).random(50))
    w = pfsp_weights(p, mode)
    assert w.sum() == pytest.approx(1.0) and (np.diff(w) <= 1e-12).all()


def test_payoff_decay_prior_and_symmetry():
    t = PayoffTable(decay=0.5, prior_games=1.0)
    assert t.win_rate("a", "b") == 0.5  # unplayed
    t.update("a", "b", 1.0)  # w=1, g=1
    t.update("a", "b", 0.0)  # w=0.5, g=1.5
    t.update("a", "b", 0.5)  # w=0.25, d=1, g=1.75
    assert t.games("a", "b") == pytest.approx(1.75)
    assert t.win_rate("a", "b") == pytest.approx((0.25 + 0.5 + 0.5) / 2.75)
    assert t.win_rate("a", "b") + t.win_rate("b", "a") == pytest.approx(1.0)
    with pytest.raises(ValueError, match="outcome"):
        t.update("a", "b", 2)
    t.forget("a")
    assert t.win_rate("b", "a") == 0.5 and t.games("a", "b") == 0


def test_elo_by_hand_and_zero_sum():
    elo = Elo(k=32)
    elo.ratings = {"a": 1200.0, "b": 1000.0}
    expected = 1 / (1 + 10 ** (-200 / 400))
    assert elo.expected("a", "b") == pytest.approx(expected)
    elo.update("a", "b", 0.0)
    assert elo.rating("a") == pytest.approx(1200 - 32 * expected)
    assert elo.rating("a") + elo.rating("b") == pytest.approx(2200)


def league(**rules):
    lg = League(LeagueRules(**rules))
    lg.add_learner("main", "main_agent")
    lg.add_learner("mx", "main_exploiter")
    lg.add_learner("lx", "league_exploiter")
    return lg


def test_fit_elo_by_hand():
    # a scores 3 of 4 against b: P = 3/4 = 1 / (1 + 10^(-d/400)), so d = 400 log10(3).
    one = fit_elo([("a", "b", 3.0, 4.0)], anchor="b", prior_games=0.0)
    assert one["b"] == 0.0
    assert one["a"] == pytest.approx(400 * np.log10(3), abs=1e-6)
    # A chain adds up: c never met a, yet sits two steps below it; draws count half.
    chain = fit_elo([("a", "b", 3.0, 4.0), ("b", "c", 2.5, 4.0), ("c", "b", 1.0, 2.0)],
                    anchor="a", prior_games=0.0)
    assert chain["b"] == pytest.approx(-400 * np.log10(3), abs=1e-6)
    assert chain["c"] == pytest.approx(chain["b"] - 400 * np.log10(3.5 / 2.5), abs=1e-6)
    # The order of the games does not matter, and the prior keeps a perfect score finite.
    assert fit_elo([("c", "b", 1.0, 2.0), ("b", "c", 2.5, 4.0), ("a", "b", 3.0, 4.0)],
                   anchor="a", prior_games=0.0) == pytest.approx(chain)
    sweep = fit_elo([("a", "b", 10.0, 10.0)], anchor="b", prior_games=1.0)
    assert sweep["a"] == pytest.approx(400 * np.log10(10.5 / 0.5), abs=1e-6)


def test_snapshot_rules_threshold_games_and_budget():
    lg = league(min_games_for_decision=5, snapshot_win_rate=0.7, snapshot_steps=1000,
                payoff_decay=1.0)
    assert not lg.ready_to_snapshot("main", 10)  # no snapshots to beat, budget unspent
    assert lg.ready_to_snapshot("main", 1000)  # step budget
    snap = lg.snapshot("main", 1000)
    assert snap == "main@1" and lg.players[snap].frozen and not lg.ready_to_snapshot("main", 1500)
    for _ in range(4):
        lg.record("main", snap, 1.0)
    assert not lg.ready_to_snapshot("main", 1500)  # 4 games < 5
    lg.record("main", snap, 1.0)
    assert lg.ready_to_snapshot("main", 1500)  # (5 + 0.5) / 6 = 0.92 >= 0.7
    # Main exploiters are judged against the main agents only.
    for _ in range(5):
        lg.record("mx", "main", 0.0)
    assert not lg.ready_to_snapshot("mx", 0)
    for _ in range(20):
        lg.record("mx", "main", 1.0)
    assert lg.ready_to_snapshot("mx", 0)


def test_exploiters_have_a_step_budget_of_their_own():
    lg = league(snapshot_steps=100, exploiter_snapshot_steps=1000)
    assert lg.ready_to_snapshot("main", 100)
    assert not lg.ready_to_snapshot("mx", 999) and not lg.ready_to_snapshot("lx", 999)
    assert lg.ready_to_snapshot("mx", 1000) and lg.ready_to_snapshot("lx", 1000)
    shared = league(snapshot_steps=100)  # 0: the exploiters use snapshot_steps
    assert shared.ready_to_snapshot("mx", 100) and shared.ready_to_snapshot("lx", 100)
    with pytest.raises(ValueError, match="exploiter_snapshot_steps >= 0"):
        LeagueRules(exploiter_snapshot_steps=-1)


def test_snapshot_copies_results_and_rating():
    lg = league(payoff_decay=1.0)
    lg.record("main", "lx", 1.0, rated=True)
    snap = lg.snapshot("main", 0)
    assert lg.payoff.win_rate(snap, "lx") == lg.payoff.win_rate("main", "lx") > 0.5
    assert lg.payoff.win_rate("lx", snap) == pytest.approx(1 - lg.payoff.win_rate(snap, "lx"))
    assert lg.elo.rating(snap) == lg.elo.rating("main") > 1000


def test_reset_rules():
    lg = league(league_exploiter_reset_prob=0.25)
    rng = np.random.default_rng(0)
    assert all(lg.should_reset("mx", rng) for _ in range(20))
    assert not any(lg.should_reset("main", rng) for _ in range(20))
    rate = np.mean([lg.should_reset("lx", rng) for _ in range(4000)])
    assert rate == pytest.approx(0.25, abs=0.03)
    lg.record("mx", "main", 1.0)
    lg.should_reset("mx", rng)
    assert lg.payoff.games("mx", "main") == 0  # a restarted learner starts unrated


def test_main_agent_matchmaking_frequencies():
    lg = league(self_play_prob=0.35, exploiter_check_prob=0.15, payoff_decay=1.0)
    for name in ("main", "lx"):
        lg.snapshot(name, 0)
    for _ in range(30):  # main@1 is hard to beat, lx@1 easy
        lg.record("main", "main@1", 0.0)
        lg.record("main", "lx@1", 1.0)
    rng = np.random.default_rng(0)
    picks = [lg.get_match("main", rng) for _ in range(10_000)]
    counts = {k: picks.count(k) / len(picks) for k in set(picks)}
    assert counts["main"] == pytest.approx(0.35, abs=0.02)  # self-play
    # exploiter checks: lx@1 is the only exploiter snapshot (0.15); PFSP over all
    # snapshots (0.5) picks main@1 with (1 - 1/32)^2 / ((1 - 1/32)^2 + (1/32)^2).
    w_hard = pfsp_weights(lg.payoff.win_rates("main", ["main@1", "lx@1"]), "hard")
    assert counts["main@1"] == pytest.approx(0.5 * w_hard[0], abs=0.02)
    assert counts["lx@1"] == pytest.approx(0.15 + 0.5 * w_hard[1], abs=0.02)


def test_main_agents_train_against_bots_by_pfsp():
    lg = league(self_play_prob=0.35, exploiter_check_prob=0.15, bot_prob=0.3,
                bots=("mcts:10", "mcts:200"), payoff_decay=1.0)
    lg.snapshot("lx", 0)
    for _ in range(30):  # mcts:10 is easy for main, mcts:200 hard
        lg.record("main", "mcts:10", 1.0)
        lg.record("main", "mcts:200", 0.0)
    rng = np.random.default_rng(0)
    picks = [lg.get_match("main", rng) for _ in range(10_000)]
    counts = {k: picks.count(k) / len(picks) for k in set(picks)}
    w_hard = pfsp_weights(lg.payoff.win_rates("main", ["mcts:10", "mcts:200"]), "hard")
    assert counts["mcts:200"] == pytest.approx(0.3 * w_hard[1], abs=0.02)
    assert counts.get("mcts:10", 0.0) == pytest.approx(0.3 * w_hard[0], abs=0.002)
    assert counts["main"] == pytest.approx(0.35, abs=0.02)  # self-play keeps its share
    assert counts["lx@1"] == pytest.approx(0.35, abs=0.02)  # checks 0.15 + PFSP 0.2
    # Only main agents play bots, and bots are never snapshot opponents.
    assert not {lg.get_match(p, rng) for p in ("mx", "lx") for _ in range(500)} & set(
        lg.rules.bots)
    assert lg.payoff.win_rate("main", "mcts:200") < 0.05


def test_draws_follow_results_recorded_between_them():
    # Draws share cached PFSP weights; every recorded result must renew them.
    lg = league(payoff_decay=1.0)
    for name in ("main", "mx"):
        lg.snapshot(name, 0)
    rng = np.random.default_rng(0)
    before = [lg.get_match("lx", rng) for _ in range(2_000)]
    assert before.count("main@1") / 2_000 == pytest.approx(0.5, abs=0.05)  # both unplayed
    for _ in range(30):  # lx now always beats main@1: "hard" PFSP drops it
        lg.record("lx", "main@1", 1.0)
    after = [lg.get_match("lx", rng) for _ in range(2_000)]
    w = pfsp_weights(lg.payoff.win_rates("lx", ["main@1", "mx@1"]), "hard")
    assert after.count("main@1") / 2_000 == pytest.approx(w[0], abs=0.02)
    lg.snapshot("main", 0)  # a new snapshot joins the pool at once
    assert "main@2" in {lg.get_match("lx", rng) for _ in range(500)}


def test_exploiter_matchmaking():
    lg = league(payoff_decay=1.0)
    rng = np.random.default_rng(0)
    assert {lg.get_match("mx", rng) for _ in range(50)} == {"main"}
    assert {lg.get_match("lx", rng) for _ in range(50)} == {"main"}  # no snapshots yet
    lg.snapshot("main", 0)
    for _ in range(40):  # the exploiter cannot beat the current main agent
        lg.record("mx", "main", 0.0)
    assert {lg.get_match("mx", rng) for _ in range(50)} == {"main@1"}
    assert {lg.get_match("lx", rng) for _ in range(50)} == {"main@1"}


def test_league_json_round_trip():
    lg = league(bots=("mcts:10",), bot_prob=0.1)
    lg.snapshot("main", 10)
    lg.record("main", "main@1", 1.0, rated=True)
    lg.record("lx", "main", 0.5)
    data = json.loads(json.dumps(lg.to_json()))
    back = League.from_json(data)
    # Equal to what a checkpoint reads back (JSON has lists, no tuples).
    assert back.to_json() == lg.to_json() == data
    assert back.rules == lg.rules and back.players["main@1"].parent == "main"


def test_rules_validation_and_roles():
    with pytest.raises(ValueError, match="pfsp_weighting must be one of"):
        LeagueRules(pfsp_weighting="x")
    with pytest.raises(ValueError, match="num_main_agents >= 1"):
        LeagueRules(num_main_agents=0)
    with pytest.raises(ValueError, match="probabilities"):
        LeagueRules(self_play_prob=0.9, exploiter_check_prob=0.2)
    with pytest.raises(ValueError, match="payoff_decay"):
        LeagueRules(payoff_decay=0)
    with pytest.raises(ValueError, match="go together"):
        LeagueRules(bots=("mcts:10",))
    with pytest.raises(ValueError, match="go together"):
        LeagueRules(bot_prob=0.2)
    with pytest.raises(ValueError, match="give random, mcts:<simulations>"):
        LeagueRules(bots=("mcts10",), bot_prob=0.2)
    with pytest.raises(ValueError, match="summing to <= 1"):
        LeagueRules(self_play_prob=0.5, exploiter_check_prob=0.15, bots=("random",),
                    bot_prob=0.4)
    with pytest.raises(ValueError, match="role must be one of"):
        League().add_learner("x", "coach")
    lg = league()
    with pytest.raises(ValueError, match="already"):
        lg.add_learner("main", "main_agent")


def test_the_learner_list_follows_the_league_though_it_is_cached():
    lg = League()
    lg.add_learner("main", "main_agent")
    assert lg.learners() == ["main"] and lg.learners("main_exploiter") == []
    lg.add_learner("mx", "main_exploiter")  # after a cached answer: seen at once
    assert lg.learners() == ["main", "mx"] and lg.learners("main_exploiter") == ["mx"]
    snap = lg.snapshot("main", env_steps=10)
    assert snap not in lg.learners() and lg.learners("main_agent") == ["main"]
