
"""What a person reads of a run: progress against the budget with an ETA, the last
evaluation's win rates kept on screen, the final line's headline, the configs in force
(`--print-config`, config.json beside the run)."""

import json
import subprocess
import sys

import pytest
from rich.console import Console

from distrl.core.display import Budget, Shown, headline, progress_text
from distrl.core.metrics import MetricsLogger, _table
from distrl.tuned import tuned


def test_progress_counts_env_steps_with_an_eta_at_the_mean_rate():
    text = progress_text({"env/steps_total": 25_000, "time/total_s": 10.0}, Budget(100_000))
    assert "25% 25,000 / 100,000 env steps, ETA 0:00:30 to max_env_steps" in text
    assert text.startswith("█████░") and text.count("█") == 5  # a quarter of 20
    done = progress_text({"env/steps_total": 100_000, "time/total_s": 40.0},
                         Budget(100_000), bar=False)
    assert done == "100% 100,000 / 100,000 env steps, ETA 0:00:00 to max_env_steps"
    assert progress_text({"iteration": 1}, Budget(10)) is None


def test_progress_counts_seconds_when_max_time_s_stops_the_run_first():
    # 1,000 of 1,000,000 steps in 30 s: the 60 s limit comes long before the steps.
    text = progress_text({"env/steps_total": 1_000, "time/total_s": 30.0},
                         Budget(1_000_000, max_time_s=60.0), bar=False)
    assert text == "50% 0:00:30 / 0:01:00, ETA 0:00:30 to max_time_s"
    # The steps run out first: counted by steps, though the clock is set.
    text = progress_text({"env/steps_total": 900, "time/total_s": 30.0},
                         Budget(1_000, max_time_s=3_600.0), bar=False)
    assert text == "90% 900 / 1,000 env steps, ETA 0:00:03 to max_env_steps"
    # A stop_return may end it sooner: the ETA says what it counts to, and that.
    text = progress_text({"env/steps_total": 900, "time/total_s": 30.0},
                         Budget(1_000, stop_return=475.0), bar=False)
    assert text == "90% 900 / 1,000 env steps, ETA 0:00:03 to max_env_steps (sooner at return 475)"


def _render(rows):
    console = Console(record=True, width=120)
    console.print(_table(rows))
    return console.export_text()


def test_the_table_keeps_the_last_win_rate_in_place_of_the_self_play_return():
    shown = Shown(Budget(10_000))
    evaluated = {"iteration": 2, "env/steps_total": 2_000, "time/total_s": 4.0,
                 "env/episode_return_mean": 0.01,
                 "league/win_rate/main_0_vs_random": 0.75,
                 "league/win_rate/main_0_vs_main_0@1": 0.5,  # a member: not a headline
                 "league/nash_conv_avg/main_0": 0.125}
    first = _render(shown.rows(evaluated))
    assert "league/win_rate/main_0_vs_random" in first and "0.75" in first
    assert "0.125" in first and "main_0@1" not in first
    assert "episode_return_mean" not in first  # a self-play game's return says nothing
    assert "20% 2,000 / 10,000 env steps, ETA 0:00:16 to max_env_steps" in first
    later = _render(shown.rows({"iteration": 3, "env/steps_total": 3_000,
                                "time/total_s": 6.0, "env/episode_return_mean": 0.0}))
    assert "0.75 (iteration 2)" in later and "30%" in later


def test_a_single_agent_run_shows_its_return_and_its_evaluations():
    rows = dict(Shown(Budget(1_000)).rows({"iteration": 1, "env/steps_total": 100,
                                           "time/total_s": 1.0,
                                           "env/episode_return_mean": 21.5,
                                           "eval/episode_return_mean": 30.0}))
    assert rows["env/episode_return_mean"] == "21.5" and rows["eval/episode_return_mean"] == "30"
    assert rows["progress"].endswith("10% 100 / 1,000 env steps, ETA 0:00:09 to max_env_steps")


def test_the_plain_line_shows_progress_and_win_rates(tmp_path, capsys):
    logger = MetricsLogger(tmp_path, progress=True, budget=Budget(4_000))
    assert logger.plain  # pytest's stderr is no TTY
    logger.log({"iteration": 1, "env/steps_total": 1_000, "time/total_s": 2.0,
                "eval/win_rate_vs_random": 0.9, "eval/win_rate_vs_mcts:50": 0.25})
    logger.close()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) > 120  # one line, not wrapped at 80 columns
    line = err.strip()
    assert "progress=25% 1,000 / 4,000 env steps, ETA 0:00:06 to max_env_steps" in line
    assert "eval/win_rate_vs_random=0.9" in line and "eval/win_rate_vs_mcts:50=0.25" in line


def test_the_final_line_names_what_the_run_achieved():
    game = {"env/episode_return_mean": 0.02, "league/win_rate/main_0_vs_random": 0.8,
            "league/nash_conv/main_0": 0.3, "league/nash_conv_avg/main_0": 0.1}
    assert headline(game, game=True) == ("win rate main_0 vs random 0.800; NashConv main_0 "
                                         "0.3000, main_0 (average) 0.1000")
    az = {"eval/win_rate_vs_random": 1.0, "eval/win_rate_vs_mcts:200": 0.25}
    assert headline(az, game=True) == "win rate vs mcts:200 0.250, vs random 1.000"
    assert "no evaluation" in headline({"env/episode_return_mean": 0.0}, game=True)
    assert headline({"env/episode_return_mean": 475.0}, game=False) == "mean return 475.0"
    evaluated = {"env/episode_return_mean": 475.0, "eval/episode_return_mean": 500.0,
                 "eval/episodes": 10}
    assert headline(evaluated, game=False) == ("eval return 500.0 over 10 episodes "
                                               "(training's mean return 475.0)")


def _cli(args, cwd):
    """distrl.cli.main(args) in a fresh interpreter; its stdout, and whether Ray was
    imported."""
    code = ("import sys\nfrom distrl.cli import main\n"
            f"main({args!r})\nprint('RAY', 'ray' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True,
                         text=True, check=True)
    *config, ray = out.stdout.strip().splitlines()
    return json.loads("\n".join(config)), ray


def test_print_config_shows_the_tuned_and_given_values_without_training(tmp_path):
    config, ray = _cli(["train", "ppo", "--tuned", "cartpole", "--print-config",
                        "--lr", "0.0005", "--num-env-runners", "2"], tmp_path)
    assert ray == "RAY False"
    assert config["algo"] == "ppo" and config["config"]["lr"] == 0.0005
    assert config["run"]["env"] == "CartPole-v1" and config["run"]["stop_return"] == 475.0
    # The entry's lr_schedule would override the --lr given: the flag wins.
    entry = tuned("cartpole", "ppo")
    assert entry.config.lr_schedule is not None and config["config"]["lr_schedule"] is None
    # The tuned entry's envs split over the runners given, as training splits them.
    assert config["config"]["num_env_runners"] == 2 and entry.num_envs
    assert config["config"]["num_envs_per_env_runner"] == entry.num_envs // 2
    assert not list(tmp_path.iterdir())  # no run directory: nothing trained


@pytest.mark.slow
def test_a_tuned_entry_env_config_goes_with_its_env_only(tmp_path):
    keep = {"include_cfrc_ext_in_observation": False}
    assert tuned("ant").env_config == keep
    config, _ = _cli(["train", "ppo", "--tuned", "ant", "--print-config"], tmp_path)
    assert config["run"]["env"] == "Ant-v5" and config["run"]["env_config"] == keep
    other, _ = _cli(["train", "ppo", "--tuned", "ant", "--env", "Hopper-v5",
                     "--print-config"], tmp_path)
    assert other["run"]["env"] == "Hopper-v5" and other["run"]["env_config"] == {}
    given, _ = _cli(["train", "ppo", "--tuned", "ant", "--env", "Hopper-v5", "--env-config",
                     '{"healthy_reward": 2.0}', "--print-config"], tmp_path)
    assert given["run"]["env_config"] == {"healthy_reward": 2.0}


@pytest.mark.slow
def test_a_tuned_entry_brings_its_vector_mode_and_a_flag_overrides_it(tmp_path):
    config, _ = _cli(["train", "ppo", "--tuned", "humanoid", "--print-config"], tmp_path)
    assert config["run"]["vector_mode"] == tuned("humanoid").vector_mode == "threads"
    given, _ = _cli(["train", "ppo", "--tuned", "humanoid", "--vector-mode", "sync",
                     "--print-config"], tmp_path)
    assert given["run"]["vector_mode"] == "sync"


def test_print_config_of_a_resume_merges_the_saved_configs(tmp_path):
    from distrl import PPOConfig, RunConfig, train_ppo

    run = tmp_path / "run"
    train_ppo(PPOConfig(num_env_runners=0, num_envs_per_env_runner=2, train_batch_size=64,
                        minibatch_size=32, num_epochs=1, lr_schedule=((0, 3e-3), (500, 1e-3))),
              RunConfig(env="CartPole-v1", max_env_steps=64, logdir=str(run), progress=False))
    beside = json.loads((run / "config.json").read_text())  # written at the run's start
    assert beside["algo"] == "ppo" and beside["config"]["train_batch_size"] == 64
    before = (run / "checkpoint" / "manifest.json").read_text()
    config, ray = _cli(["train", "ppo", "--resume", str(run), "--lr", "0.002",
                        "--max-env-steps", "500", "--print-config"], tmp_path)
    assert ray == "RAY False"
    assert config["config"]["lr"] == 0.002 and config["config"]["train_batch_size"] == 64
    assert config["config"]["lr_schedule"] is None  # the saved schedule would override --lr
    saved, _ = _cli(["train", "ppo", "--resume", str(run), "--print-config"], tmp_path)
    assert saved["config"]["lr_schedule"] == [[0, 3e-3], [500, 1e-3]]
    both, _ = _cli(["train", "ppo", "--resume", str(run), "--lr-schedule", "0", "1e-3",
                    "1000", "1e-4", "--lr", "0.002", "--print-config"], tmp_path)
    assert both["config"]["lr_schedule"] == [[0, 1e-3], [1000, 1e-4]]
    assert config["run"]["max_env_steps"] == 500 and config["run"]["logdir"] == str(run)
    assert (run / "checkpoint" / "manifest.json").read_text() == before


def test_the_plain_line_always_shows_a_runs_last_row(tmp_path, capsys):
    """Off a TTY a line is printed every 10 s; the final evaluation's row is printed
    however soon it follows the last line."""
    logger = MetricsLogger(tmp_path, progress=True, budget=Budget(4_000))
    row = {"iteration": 1, "env/steps_total": 1_000, "time/total_s": 2.0}
    logger.log(row)
    logger.log({**row, "iteration": 2})  # within 10 s of the first: not printed
    logger.log({**row, "iteration": 2, "eval/episode_return_mean": 42.0}, last=True)
    logger.close()
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and "eval/episode_return_mean=42" in lines[1]
