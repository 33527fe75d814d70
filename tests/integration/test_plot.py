"""distrl plot: runs' returns, win rates and Elo against env steps and wall time, from
their metrics.jsonl, several runs in one PNG."""

import json

import pytest

from distrl import PPOConfig, RunConfig, train_ppo
from distrl.cli import main
from distrl.plot import figure, plot_runs

LEAGUE_ROWS = [  # what a league run logs, the keys that matter here
    {"iteration": i, "env/steps_total": 1000 * i, "time/total_s": 2.0 * i,
     "env/episode_return_mean": 0.0, "league/win_rate/main_0_vs_random": 0.5 + 0.1 * i,
     "league/win_rate/main_0_vs_main_0@1": 0.5, "league/elo/main_0": 1200.0 + 10 * i,
     "league/elo/main_0@1": 1200.0} for i in (1, 2, 3)]


@pytest.fixture
def runs(tmp_path):
    ppo = tmp_path / "ppo"
    train_ppo(PPOConfig(num_env_runners=0, num_envs_per_env_runner=4, train_batch_size=64,
                        minibatch_size=32, num_epochs=1),
              RunConfig(env="CartPole-v1", max_env_steps=192, evaluation_interval=1,
                        evaluation_duration=2, logdir=str(ppo), progress=False))
    league = tmp_path / "league"
    league.mkdir()
    (league / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in LEAGUE_ROWS))
    return ppo, league


def test_two_runs_draw_each_curve_against_steps_and_time(runs, tmp_path, capsys):
    ppo, league = runs
    fig = figure([ppo / "checkpoint", league])
    axes = fig.axes
    assert [ax.get_ylabel() for ax in axes] == ["return", "return", "win rate", "win rate",
                                                "Elo", "Elo"]
    assert [ax.get_xlabel() for ax in axes[:2]] == ["env steps", "wall time (s)"]
    # PPO's training and evaluation returns; the league's return (self-play) is left out;
    # its win rate against random, not against its own snapshot; main_0's Elo, no snapshot's.
    labels = [[line.get_label() for line in ax.lines] for ax in axes]
    assert labels[0] == labels[1] == ["ppo: env/episode_return_mean",
                                      "ppo: eval/episode_return_mean"]
    assert labels[2] == ["league: league/win_rate/main_0_vs_random"]
    assert labels[4] == ["league: league/elo/main_0"]
    elo_by_time = axes[5].lines[0].get_data()
    assert list(elo_by_time[0]) == [2.0, 4.0, 6.0] and list(elo_by_time[1]) == [1210, 1220, 1230]
    rows = [json.loads(line) for line in (ppo / "metrics.jsonl").read_text().splitlines()]
    rows = [r for r in rows if r["env/episode_return_mean"] is not None]  # no episode ended
    steps, returns = axes[0].lines[0].get_data()
    assert list(steps) == [r["env/steps_total"] for r in rows]
    assert list(returns) == [r["env/episode_return_mean"] for r in rows]

    main(["plot", str(ppo), str(league), "--out", str(tmp_path / "both.png")])
    assert capsys.readouterr().out.strip() == f"wrote {tmp_path / 'both.png'}"
    assert (tmp_path / "both.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot_runs([ppo]) == ppo / "plot.png" and (ppo / "plot.png").is_file()


def test_a_folder_without_metrics_is_one_line(tmp_path):
    with pytest.raises(SystemExit, match=r"^distrl: error: '.*' has no metrics\.jsonl: give a "
                       r"run's logdir"):
        main(["plot", str(tmp_path)])
