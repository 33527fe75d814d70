"""What a resumed run takes from its checkpoint and what from the new invocation:
nested configs merged field by field, fields set back to their defaults, league rules
that follow the resumed config, the directory it continues in and its metrics once."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from distrl import LeagueConfig, LeagueRules, Magnet, PPOConfig, RunConfig, train_ppo
from distrl.core.checkpoint import Checkpoint, save_checkpoint
from distrl.core.config import to_json
from distrl.core.resume import resumed_configs

SMALL = PPOConfig(train_batch_size=64, minibatch_size=32, num_epochs=1, num_env_runners=0,
                  num_envs_per_env_runner=4)


def saved_run(tmp_path, config, run):
    """A checkpoint holding only the configs, as every algorithm writes them."""
    run_json = {**to_json(run), "env_name": run.env}
    save_checkpoint(tmp_path / "checkpoint", "league", {"iteration": 1, "env_steps": 1},
                    {"run": {"config.json": {"run": run_json, "config": to_json(config)}}})
    return Checkpoint(tmp_path)


def test_one_nested_field_given_leaves_its_siblings_as_saved(tmp_path, capsys):
    saved = LeagueConfig(magnet=Magnet(coeff=0.2, update_steps=1_000),
                         rules=LeagueRules(self_play_prob=0.35, num_main_exploiters=2))
    ckpt = saved_run(tmp_path, saved, RunConfig(env="pettingzoo:connect_four_v3"))
    given = LeagueConfig(magnet=Magnet(coeff=0.3), rules=LeagueRules(self_play_prob=0.5))
    config, _ = resumed_configs(ckpt, given, RunConfig(resume=str(tmp_path)))
    assert config.magnet == Magnet(coeff=0.3, update_steps=1_000)
    assert config.rules == LeagueRules(self_play_prob=0.5, num_main_exploiters=2)
    err = capsys.readouterr().err
    assert "magnet.coeff 0.2 -> 0.3" in err and "rules.self_play_prob 0.35 -> 0.5" in err


def test_resume_reset_sets_a_saved_field_back_to_its_default(tmp_path):
    ckpt = saved_run(tmp_path, LeagueConfig(magnet=Magnet(coeff=0.2, update_steps=10)),
                     RunConfig(env="pettingzoo:connect_four_v3", stop_return=1.0))
    config, run = resumed_configs(ckpt, LeagueConfig(), RunConfig(
        resume=str(tmp_path), resume_reset=("stop_return", "magnet.update_steps")))
    assert run.stop_return is None and config.magnet == Magnet(coeff=0.2, update_steps=0)
    untouched, run = resumed_configs(ckpt, LeagueConfig(), RunConfig(resume=str(tmp_path)))
    assert run.stop_return == 1.0 and untouched.magnet.update_steps == 10
    with pytest.raises(ValueError, match="no fields of this run"):
        resumed_configs(ckpt, LeagueConfig(), RunConfig(resume=str(tmp_path),
                                                         resume_reset=("stop_retrun",)))


def test_a_copied_run_resumes_in_the_directory_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the run saves a relative logdir, as the CLI's default
    train_ppo(SMALL, RunConfig(logdir="first", max_env_steps=128, progress=False))
    shutil.copytree("first", "copy")
    out = train_ppo(SMALL, RunConfig(resume="copy", max_env_steps=256, progress=False))
    assert Path(out["checkpoint"]).resolve() == (tmp_path / "copy" / "checkpoint")
    assert Checkpoint("copy").manifest["env_steps"] >= 256
    assert Checkpoint("first").manifest["env_steps"] < 256  # the original is untouched
    lines = (tmp_path / "copy" / "metrics.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["env/steps_total"] >= 256
    again = train_ppo(SMALL, RunConfig(resume="copy/checkpoint", max_env_steps=384,
                                       progress=False))
    assert Path(again["checkpoint"]).resolve() == (tmp_path / "copy" / "checkpoint")


def cli(*args, cwd):
    out = subprocess.run([sys.executable, "-m", "distrl", "train", "ppo", *args],
                         capture_output=True, text=True, timeout=300, cwd=cwd)
    assert out.returncode == 0, out.stderr
    return out


def test_cli_flags_on_resume_change_only_their_fields_and_can_restore_defaults(tmp_path):
    flags = ["--num-env-runners", "0", "--num-envs-per-env-runner", "4",
             "--train-batch-size", "64", "--minibatch-size", "32", "--num-epochs", "1",
             "--no-progress"]
    cli(*flags, "--stop-return", "1000", "--entropy-coeff", "0.01", "--lr", "0.001",
        "--max-env-steps", "128", "--logdir", "run", cwd=tmp_path)
    out = cli("--resume", "run", "--stop-return", "None", "--lr", "0.0003",
              "--max-env-steps", "256", cwd=tmp_path)
    saved = Checkpoint(tmp_path / "run").json("run", "config.json")
    assert saved["run"]["stop_return"] is None  # set back to the default by its flag
    assert saved["config"]["lr"] == 0.0003  # the default value, given
    assert saved["config"]["entropy_coeff"] == 0.01  # not given: as saved
    assert "stop_return 1000.0 -> None" in out.stderr and "lr 0.001 -> 0.0003" in out.stderr


def test_a_resumed_run_logs_each_iteration_once(tmp_path):
    """Killed after logging iterations past its checkpoint (the last row torn), a run
    resumed from iteration 2 redoes them: metrics.jsonl keeps each iteration once."""
    train_ppo(SMALL, RunConfig(logdir=str(tmp_path), max_env_steps=128, progress=False))
    metrics = tmp_path / "metrics.jsonl"
    metrics.chmod(0o640)
    with metrics.open("a") as f:  # what the killed run logged after its checkpoint
        f.write('{"iteration": 3, "killed": true}\n{"iteration": 4, "kil')
    train_ppo(SMALL, RunConfig(resume=str(tmp_path), max_env_steps=256, progress=False))
    rows = [json.loads(line) for line in metrics.read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [1, 2, 3, 4]
    assert not any("killed" in r for r in rows)
    assert metrics.stat().st_mode & 0o777 == 0o640  # rewritten, its mode kept
    assert sorted(os.listdir(tmp_path)) == sorted(
        ["checkpoint", "config.json", "metrics.jsonl",
         *(p.name for p in tmp_path.glob("events.*"))])
