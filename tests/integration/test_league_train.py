"""train_league in one process on connect four: roles, snapshots, resets, resume."""

import dataclasses

import pytest
import torch

pytest.importorskip("pettingzoo")

from distrl import LeagueConfig, LeagueRules, RunConfig
from distrl.core.checkpoint import Checkpoint
from distrl.games.matches import MatchResult
from distrl.games.scoring import outcome
from distrl.league.train import train_league

GAME = "pettingzoo:connect_four_v3"
SMALL = LeagueConfig(
    rules=LeagueRules(snapshot_steps=300, league_exploiter_reset_prob=1.0),
    train_batch_size=128, minibatch_size=64, num_epochs=1, num_envs=4,
    league_eval_interval=1, league_eval_games=6)


def run(tmp_path, **kw):
    return RunConfig(**{"env": GAME, "logdir": str(tmp_path), "progress": False, **kw})


def test_outcome_by_seat_returns():
    r = MatchResult({"player_0": "a", "player_1": "b"}, {"player_0": -1.0, "player_1": 1.0},
                    10, 0)
    assert outcome(r, "a", "b") == 0.0 and outcome(r, "b", "a") == 1.0
    draw = MatchResult({"player_0": "a", "player_1": "b"}, {"player_0": 0.0, "player_1": 0.0},
                       42, 0)
    assert outcome(draw, "a", "b") == 0.5


def test_league_trains_snapshots_and_resumes_its_league(tmp_path):
    first = train_league(SMALL, run(tmp_path, max_env_steps=3_000))
    ckpt = Checkpoint(first["checkpoint"])
    league = ckpt.json("progress", "progress.json")["algo"]["league"]
    roles = {p["id"]: p["role"] for p in league["players"]}
    assert {"main_0", "main_exploiter_0", "league_exploiter_0"} <= set(roles)
    snaps = [p for p in league["players"] if p["parent"]]
    assert snaps, "no learner was frozen although snapshot_steps was spent"
    assert first["league/num_policies"] == 3 + len(snaps)
    assert "league/win_rate/main_0_vs_random" in first and "league/elo/main_0" in first
    assert 1 <= first["league/distinct_games/main_0_vs_random"] <= 6
    assert league["payoff"]["main_0"], "finished games must fill the payoff table"
    weights = ckpt.tensors("learner", "state.pt")["weights"]
    assert {p["id"] for p in snaps} <= set(weights)
    # Resume for more steps: every player keeps its role, results and, when frozen, its
    # weights.
    again = train_league(SMALL, run(tmp_path, resume=str(tmp_path),
                                    max_env_steps=first["env/steps_total"] + 1))
    ckpt2 = Checkpoint(again["checkpoint"])
    league2 = ckpt2.json("progress", "progress.json")["algo"]["league"]
    assert roles.items() <= {p["id"]: p["role"] for p in league2["players"]}.items()
    kept = {"main_0", *(p["id"] for p in snaps)}  # never reset: their results stay
    for pid in kept & set(league["payoff"]):
        assert set(league["payoff"][pid]) & kept <= set(league2["payoff"][pid])
    weights2 = ckpt2.tensors("learner", "state.pt")["weights"]
    for snap in snaps:  # frozen: unchanged by further training
        for k, v in weights[snap["id"]].items():
            torch.testing.assert_close(weights2[snap["id"]][k], v, rtol=0, atol=0)
    assert again["iteration"] > first["iteration"]


def test_main_agents_train_against_bots_and_bots_stay_out_of_checkpoints(tmp_path):
    cfg = dataclasses.replace(SMALL, rules=LeagueRules(
        num_main_exploiters=0, num_league_exploiters=0, self_play_prob=0.0,
        exploiter_check_prob=0.0, bots=("mcts:2", "random"), bot_prob=1.0))
    out = train_league(cfg, run(tmp_path, max_env_steps=600))
    ckpt = Checkpoint(out["checkpoint"])
    payoff = ckpt.json("progress", "progress.json")["algo"]["league"]["payoff"]
    # Every training game of main_0 was against a bot (its results, decayed, are there).
    assert set(payoff["main_0"]) == {"mcts:2", "random"}
    assert payoff["mcts:2"]["main_0"][2] > 0
    assert set(ckpt.tensors("learner", "state.pt")["weights"]) == {"main_0"}
    again = train_league(cfg, run(tmp_path, resume=str(tmp_path), max_env_steps=900))
    assert again["env/steps_total"] >= 900


def test_resume_restores_the_league_state(tmp_path):
    from dataclasses import replace

    from distrl import Magnet
    from distrl.core.loop import Start
    from distrl.league.train import LeagueRun

    config = replace(SMALL, magnet=Magnet(coeff=0.2, update_steps=200))
    first = train_league(config, run(tmp_path, max_env_steps=1_500))
    ckpt = Checkpoint(first["checkpoint"])
    saved = ckpt.json("progress", "progress.json")["algo"]
    restored = LeagueRun(Start("league", config, run(tmp_path), tmp_path, ckpt))
    assert restored.league.to_json() == saved["league"]
    state = ckpt.tensors("learner", "state.pt")
    assert restored.workers.env_steps() == {
        pid: t["env_steps"] for pid, t in state["trainers"].items()}
    assert min(restored.workers.env_steps().values()) > 0
    weights = state["weights"]
    for pid, module in ((p, restored.workers.module(p)) for p in weights):
        for k, v in module.state_dict().items():
            torch.testing.assert_close(v, weights[pid][k], rtol=0, atol=0)
    for pid, trainer in restored.workers.trainers.items():  # magnets moved, and restored
        saved_trainer = state["trainers"][pid]
        assert trainer.magnet_at == saved_trainer["magnet_at"] > 0
        for k, v in trainer.magnet.state_dict().items():
            torch.testing.assert_close(v, saved_trainer["magnet"][k], rtol=0, atol=0)
    restored.close()


def test_league_refuses_single_agent_evaluation_and_bad_counts(tmp_path):
    with pytest.raises(ValueError, match="league-eval-interval"):
        train_league(SMALL, run(tmp_path, evaluation_interval=1))
    with pytest.raises(ValueError, match="num_env_runners"):
        LeagueConfig(num_env_runners=-1)
    with pytest.raises(ValueError, match="stop_win_rate"):
        LeagueConfig(league_eval_interval=0, stop_win_rate=0.9)
    with pytest.raises(ValueError, match="set num_env_runners >= 1 or turn overlap_learning"):
        LeagueConfig(overlap_learning=True)
    assert LeagueConfig(overlap_learning=True, num_env_runners=1).overlap_learning


def test_league_logs_the_nash_conv_of_its_average_policy_on_kuhn(tmp_path):
    import json

    pytest.importorskip("pyspiel")
    config = LeagueConfig(rules=LeagueRules(num_main_exploiters=0, num_league_exploiters=0),
                          train_batch_size=64, minibatch_size=32, num_epochs=1, num_envs=4,
                          league_eval_interval=1, league_eval_games=2,
                          league_eval_average_window=3)
    train_league(config, run(tmp_path, env="openspiel:kuhn_poker", max_env_steps=600))
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if "league/nash_conv_avg/main_0" in r]
    now = [r["league/nash_conv/main_0"] for r in rows]
    avg = [r["league/nash_conv_avg/main_0"] for r in rows]
    assert len(rows) >= 4
    assert avg[0] == pytest.approx(now[0], abs=1e-12)  # the average of one policy is it
    assert all(abs(a - n) > 1e-9 for a, n in zip(avg[1:], now[1:], strict=True))
    with pytest.raises(ValueError, match="league_eval_average_window"):
        LeagueConfig(league_eval_average_window=-1)


def test_evaluate_league_rates_and_exact_nash_conv_on_kuhn(tmp_path):
    import numpy as np
    from open_spiel.python import policy as policy_lib
    from open_spiel.python.algorithms import exploitability

    from distrl.games.scoring import evaluate_league

    pytest.importorskip("pyspiel")
    config = LeagueConfig(rules=LeagueRules(num_main_exploiters=0, num_league_exploiters=0),
                          train_batch_size=64, minibatch_size=32, num_epochs=1, num_envs=4,
                          league_eval_interval=1, league_eval_games=4)
    first = train_league(config, run(tmp_path, env="openspiel:kuhn_poker", max_env_steps=200))
    out = evaluate_league(first["checkpoint"], games=40, stochastic=True)
    # The run's last evaluation saw the weights it then saved.
    assert first["league/nash_conv/main_0"] == pytest.approx(out["nash_conv"], abs=1e-9)
    # Every Kuhn hand has a winner, and each rate is a count of the 40 games.
    assert out["draw_rate"] == 0.0 and (out["win_rate"] * 40) == round(out["win_rate"] * 40)
    # The NashConv is open_spiel's for the tabular policy the network defines.
    import pyspiel

    from distrl.games.games import observe

    game = pyspiel.load_game("kuhn_poker")
    tab = policy_lib.TabularPolicy(game)
    module = _load_main(first["checkpoint"])
    for state in tab.states:
        o = observe(state, state.current_player())
        with torch.no_grad():
            logits, _ = module(torch.as_tensor(o["observation"][None]))
        logits = logits[0].masked_fill(~torch.as_tensor(o["action_mask"]).bool(), -1e9)
        tab.policy_for_key(state.information_state_string())[:] = torch.softmax(
            logits, -1).numpy()
    assert out["nash_conv"] == pytest.approx(exploitability.nash_conv(game, tab), abs=1e-6)
    assert np.isfinite(out["nash_conv"]) and out["nash_conv"] > 0


def test_a_league_on_connect_four_evaluates_without_tabulating(tmp_path, monkeypatch, capsys):
    # OpenSpiel's connect four has ~10^13 histories: tabulating it never ended.
    pytest.importorskip("pyspiel")
    from distrl.games import scoring
    from distrl.league import train

    def refuse(*args, **kwargs):
        raise AssertionError("tabulated a game past nash_conv_max_states")

    monkeypatch.setattr(scoring, "tabulate", refuse)
    monkeypatch.setattr(train, "AveragePolicy", refuse)
    config = LeagueConfig(rules=LeagueRules(num_main_exploiters=0, num_league_exploiters=0),
                          train_batch_size=32, minibatch_size=32, num_epochs=1, num_envs=2,
                          league_eval_interval=1, league_eval_games=2,
                          league_eval_average_window=2)
    first = train_league(config, run(tmp_path, env="openspiel:connect_four", max_env_steps=100))
    line = ("distrl: NashConv skipped: openspiel:connect_four has more than 100,000 states "
            "(nash_conv_max_states)\n")
    assert first["iteration"] >= 2 and not any("nash_conv" in k for k in first)
    assert capsys.readouterr().err.count(line) == 1  # once per run, not per evaluation
    out = scoring.evaluate_league(first["checkpoint"], games=2)  # `distrl eval`
    assert "nash_conv" not in out and capsys.readouterr().err.count(line) == 1


def _load_main(checkpoint):
    from distrl.core.evaluation import load_policy

    return load_policy(Checkpoint(checkpoint))


def test_cli_trains_and_evaluates_a_league(tmp_path, capsys):
    import json
    import subprocess
    import sys

    logdir = str(tmp_path / "run")
    subprocess.run([sys.executable, "-m", "distrl", "train", "league", "--env", GAME,
                    "--max-env-steps", "300", "--num-envs", "4", "--train-batch-size", "64",
                    "--minibatch-size", "32", "--magnet-coeff", "0.2",
                    "--magnet-update-steps", "128", "--logdir", logdir], check=True,
                   capture_output=True)
    from distrl import Magnet
    from distrl.core.config import from_json

    saved = Checkpoint(logdir).json("run", "config.json")["config"]
    assert from_json(LeagueConfig, saved).magnet == Magnet(0.2, 128)  # flags reach the config
    out = subprocess.run([sys.executable, "-m", "distrl", "eval", logdir, "--episodes", "10",
                          "--json"], check=True, capture_output=True, text=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["policy"] == "main_0" and result["opponent"] == "random"
    assert result["games"] == 10 and "nash_conv" not in result
    by_seat = result["win_rate_by_seat"]  # 5 games a seat: their mean is the win rate
    assert sorted(by_seat) == ["player_0", "player_1"]
    assert sum(by_seat.values()) / 2 == pytest.approx(result["win_rate"])
    from distrl.cli import main  # the same command lines in this process: no start-up

    capsys.readouterr()
    main(["eval", logdir, "--episodes", "10"])
    assert (f"win by seat: player_0 {by_seat['player_0']:.3f}, player_1 "
            f"{by_seat['player_1']:.3f}") in capsys.readouterr().out
    with pytest.raises(SystemExit) as bad:  # its message: the process's last line
        main(["eval", logdir, "--opponent", "x"])
    assert "no policy 'x'" in str(bad.value.code)
    # Greedy play against a deterministic bot repeats one game per seat; random openings
    # vary them; MCTS is an opponent like any other.
    distinct = {}
    for opening, bot in ((0, "tests.fakes:first_legal_move"), (2, "tests.fakes:first_legal_move"),
                         (2, "mcts:10")):
        main(["eval", logdir, "--opponent", bot, "--episodes", "8",
              "--random-opening-moves", str(opening), "--json"])
        result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert result["random_opening_moves"] == opening and result["opponent"] == bot
        distinct[opening, bot] = result["distinct_games"]
    assert distinct[0, "tests.fakes:first_legal_move"] == 2
    assert distinct[2, "tests.fakes:first_legal_move"] >= 5
    assert distinct[2, "mcts:10"] >= 5


def rightmost(obs, action_mask):
    """A scripted connect-four player: the rightmost legal column."""
    return int(len(action_mask) - 1 - action_mask[::-1].argmax())


def leftmost(obs, action_mask):
    return int(action_mask.argmax())


def column_zero(obs, action_mask):
    return 0


def naive_game(first, second):
    """player_0's final reward when ``first`` plays player_0 and ``second`` player_1."""
    from pettingzoo.classic import connect_four_v3

    env = connect_four_v3.env()
    env.reset(seed=0)
    final = {}
    for agent in env.agent_iter():
        obs, reward, term, trunc, _ = env.last()
        if term or trunc:
            final[agent] = reward
        bot = first if agent == "player_0" else second
        env.step(None if term or trunc else bot(None, obs["action_mask"]))
    env.close()
    return final["player_0"]


def test_scripted_opponent_matches_a_naive_game_loop(tmp_path):
    from distrl.games.scoring import evaluate_league

    config = LeagueConfig(rules=LeagueRules(num_main_exploiters=0, num_league_exploiters=0),
                          train_batch_size=64, minibatch_size=32, num_epochs=1, num_envs=2,
                          league_eval_interval=0)
    ckpt = train_league(config, run(tmp_path, max_env_steps=100))["checkpoint"]
    right, left = f"{__name__}:rightmost", f"{__name__}:leftmost"
    # Naive reference: rightmost as player_0, then as player_1, against leftmost.
    scores = [naive_game(rightmost, leftmost), -naive_game(leftmost, rightmost)]
    out = evaluate_league(ckpt, policy=right, opponent=left, games=4)
    assert out["win_rate"] == sum(s > 0 for s in scores) / 2
    assert out["draw_rate"] == sum(s == 0 for s in scores) / 2
    assert out["win_rate_by_seat"] == {"player_0": float(scores[0] > 0),
                                       "player_1": float(scores[1] > 0)}
    vs_bot = evaluate_league(ckpt, opponent=right, games=10)
    assert vs_bot["opponent"] == right and sum(
        vs_bot[k] for k in ("win_rate", "draw_rate", "loss_rate")) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="not legal"):  # both fill column 0 in 6 moves
        evaluate_league(ckpt, policy=left, opponent=f"{__name__}:column_zero", games=2)
    with pytest.raises(ValueError, match="itself"):
        evaluate_league(ckpt, policy=right, opponent=right, games=2)
    with pytest.raises(ValueError, match="module:callable"):
        evaluate_league(ckpt, opponent="no_such_module_xyz:bot", games=2)


def test_a_resumed_league_plays_by_the_resumed_rules_and_keeps_its_learners(tmp_path):
    from dataclasses import replace

    from distrl.league.train import start_league

    train_league(SMALL, run(tmp_path, max_env_steps=600))
    changed = replace(SMALL, rules=LeagueRules(self_play_prob=0.5))
    # More steps than the saved run's: a finished run is refused before anything starts.
    league_run = start_league(changed, run(tmp_path, resume=str(tmp_path), max_env_steps=1_200))
    try:  # the saved snapshot settings stay; the given rule is the league's now
        assert league_run.league.rules == replace(SMALL.rules, self_play_prob=0.5)
        assert sorted(league_run.workers.trainers) == sorted(league_run.league.learners())
    finally:
        league_run.close()
    more = replace(SMALL, rules=replace(SMALL.rules, num_main_exploiters=2))
    with pytest.raises(ValueError, match="keeps its learners"):
        start_league(more, run(tmp_path, resume=str(tmp_path), max_env_steps=1_200))


def test_league_win_rates_do_not_over_count_short_games(tmp_path):
    """Seat player_0 wins a 2-move game half the time, else a 30-move game is drawn: the
    true win rate over both seats is 0.25 (keeping the first games to finish gave 0.275)."""
    from distrl.games.scoring import evaluate_league

    config = LeagueConfig(rules=LeagueRules(num_main_exploiters=0, num_league_exploiters=0),
                          train_batch_size=64, minibatch_size=32, num_epochs=1, num_envs=4,
                          league_eval_interval=0)
    first = train_league(config, run(tmp_path, env="tests.fakes:ShortWinLongDraw",
                                     max_env_steps=100))
    rates = [evaluate_league(first["checkpoint"], games=200, seed=s)["win_rate"]
             for s in range(20)]
    assert abs(sum(rates) / 20 - 0.25) <= 0.02, rates
    with pytest.raises(ValueError, match="must be > 0"):
        evaluate_league(first["checkpoint"], games=0)


def test_a_league_refuses_the_observation_filter():
    from distrl import ModelConfig

    with pytest.raises(ValueError, match="not supported in a league"):
        LeagueConfig(model=ModelConfig(observation_filter="MeanStdFilter"))


def test_league_evaluation_refuses_what_it_cannot_do(tmp_path):
    from distrl.cli import main
    from distrl.core.evaluation import run_episodes
    from distrl.games.policies import scripted_policy

    config = LeagueConfig(rules=LeagueRules(num_main_exploiters=0, num_league_exploiters=0),
                          train_batch_size=64, minibatch_size=32, num_epochs=1, num_envs=2,
                          league_eval_interval=0)
    first = train_league(config, run(tmp_path, max_env_steps=100))
    with pytest.raises(ValueError, match=r"holds a 'league' run.*--opponent"):
        run_episodes(first["checkpoint"], video_dir=str(tmp_path / "v"))
    with pytest.raises(SystemExit, match="--video, --env apply to single-agent runs"):
        main(["eval", first["checkpoint"], "--video", str(tmp_path / "v"), "--env", "x"])
    with pytest.raises(ValueError, match=r"must be a callable\(obs, action_mask\)"):
        scripted_policy("builtins:len")  # takes one argument
    assert scripted_policy("tests.fakes:first_legal_move").name == "tests.fakes:first_legal_move"


@pytest.mark.parametrize("lstm", [False, True], ids=["feedforward", "lstm"])
def test_a_league_resumes_exactly_games_in_progress_included(tmp_path, lstm):
    """N iterations = N/2 + stop + resume + N/2, in process: the same weights of every
    policy, the same league and the same metrics (win rates and Elo included). Connect
    four's games outlive an iteration, so this fails when their state is not saved
    (with an LSTM, each seat's memory too)."""
    import json

    from distrl import ModelConfig

    model = ModelConfig(use_lstm=lstm, lstm_cell_size=16, max_seq_len=4)
    config = LeagueConfig(rules=LeagueRules(snapshot_steps=120), train_batch_size=128,
                          minibatch_size=64, num_epochs=1, num_envs=4,
                          league_eval_interval=2, league_eval_games=4, model=model)
    straight = train_league(config, run(tmp_path / "a", max_env_steps=3_200))
    train_league(config, run(tmp_path / "b", max_env_steps=1_600))
    resumed = train_league(config, run(tmp_path / "b", max_env_steps=3_200,
                                       resume=str(tmp_path / "b")))
    assert resumed["iteration"] == straight["iteration"] >= 4

    def rows(d):
        lines = (tmp_path / d / "metrics.jsonl").read_text().splitlines()
        return [{k: v for k, v in json.loads(r).items() if not k.startswith("time")
                 and not k.endswith("_per_s") and k != "checkpoint"} for r in lines]

    # The first half's end was evaluated (off the record: Elo moves only at the
    # scheduled evaluations); the straight run had no end there.
    halves = rows("b")
    assert rows("a") == [r for r in halves[:-1] if "final_evaluation" not in r] + halves[-1:]
    a, b = (Checkpoint(tmp_path / d) for d in "ab")
    assert a.json("progress", "progress.json")["algo"] == b.json("progress",
                                                                  "progress.json")["algo"]
    wa, wb = (c.tensors("learner", "state.pt")["weights"] for c in (a, b))
    assert wa.keys() == wb.keys()
    for pid in wa:
        for k, v in wa[pid].items():
            torch.testing.assert_close(wb[pid][k], v, rtol=0, atol=0)


def test_the_average_policy_is_saved_and_plays_with_the_nash_conv_reported(tmp_path, capsys):
    import json

    import numpy as np

    from distrl.cli import main
    from distrl.games.scoring import evaluate_league
    from distrl.games.tabular import load_table

    pytest.importorskip("pyspiel")
    config = LeagueConfig(rules=LeagueRules(num_main_exploiters=0, num_league_exploiters=0),
                          train_batch_size=64, minibatch_size=32, num_epochs=1, num_envs=4,
                          league_eval_interval=2, league_eval_games=4,
                          league_eval_average_window=3)
    out = train_league(config, run(tmp_path, env="openspiel:kuhn_poker", max_env_steps=700))
    # The last iteration was not evaluated on schedule: the run's final evaluation (off
    # the record: the average it reports is the saved one, without this iterate).
    assert out["iteration"] % 2 == 1
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    last = [r for r in rows if "league/nash_conv_avg/main_0" in r][-1]
    assert last["iteration"] == out["iteration"] and last["final_evaluation"]
    for key in ("league/win_rate/main_0_vs_random", "league/nash_conv_avg/main_0"):
        assert out[key] == last[key]
    # The average is a policy of the run, read without unpickling (tensors and JSON).
    ckpt = Checkpoint(out["checkpoint"])
    assert ckpt.json("average", "policy.json")["of"] == "main_0"
    average = load_table(ckpt)
    legal = average.probs > 0
    assert np.allclose(average.probs.sum(axis=1), 1.0) and legal.any(axis=1).all()
    # What it plays is its table; its NashConv is the one the run reported.
    with torch.no_grad():
        logits, _ = average(torch.as_tensor(average.observations))
    np.testing.assert_allclose(torch.softmax(logits, -1).numpy(), average.probs, atol=1e-6)
    judged = evaluate_league(out["checkpoint"], policy="average", games=20, stochastic=True)
    assert judged["nash_conv"] == pytest.approx(out["league/nash_conv_avg/main_0"], abs=1e-12)
    assert judged["nash_conv"] != pytest.approx(out["league/nash_conv/main_0"], abs=1e-9)
    main(["eval", str(tmp_path), "--policy", "average", "--episodes", "10", "--json"])
    played = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert played["policy"] == "average" and played["games"] == 10
    assert played["nash_conv"] == judged["nash_conv"]


def test_a_league_without_an_average_says_how_to_save_one(tmp_path):
    from distrl.games.scoring import evaluate_league

    pytest.importorskip("pyspiel")
    config = LeagueConfig(rules=LeagueRules(num_main_exploiters=0, num_league_exploiters=0),
                          train_batch_size=64, minibatch_size=32, num_epochs=1, num_envs=4,
                          league_eval_interval=1, league_eval_games=2)
    out = train_league(config, run(tmp_path, env="openspiel:kuhn_poker", max_env_steps=64))
    assert "average" not in Checkpoint(out["checkpoint"]).manifest["components"]
    with pytest.raises(ValueError, match="league_eval_average_window > 0"):
        evaluate_league(out["checkpoint"], policy="average", games=2)


def test_the_cli_final_line_of_a_league_is_its_win_rate(tmp_path, capsys):
    from distrl.cli import main

    pytest.importorskip("pyspiel")
    main(["train", "league", "--env", "openspiel:kuhn_poker", "--num-main-exploiters", "0",
          "--num-league-exploiters", "0", "--train-batch-size", "64", "--minibatch-size", "32",
          "--num-envs", "4", "--league-eval-interval", "1", "--league-eval-games", "4",
          "--max-env-steps", "200", "--logdir", str(tmp_path), "--no-progress"])
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith("done (max_env_steps)") and "mean return" not in line
    assert "win rate main_0 vs random" in line and "NashConv main_0" in line
    assert (tmp_path / "config.json").is_file()  # the configs, beside the run
