"""A resume of a finished run (its stop condition holds on the saved counters) says so in
one line and what to raise; it neither trains nor rewrites the checkpoint, nor starts Ray."""

import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from distrl import PPOConfig, RunConfig, train_ppo
from distrl.core import loop
from distrl.core.stopping import RunFinished

SMALL = PPOConfig(train_batch_size=64, minibatch_size=32, num_epochs=1, num_env_runners=0,
                  num_envs_per_env_runner=4)


def run(logdir, **kw):
    return RunConfig(logdir=str(logdir), progress=False, **kw)


def untouched(logdir: Path):
    """What a refused resume must leave as it was: the checkpoint and the metrics."""
    files = [logdir / "checkpoint" / "manifest.json", logdir / "metrics.jsonl"]
    return [(f.stat().st_mtime_ns, f.read_bytes()) for f in files]


def test_a_finished_run_is_refused_with_what_to_raise(tmp_path, monkeypatch):
    out = train_ppo(SMALL, run(tmp_path, max_env_steps=128))
    before = untouched(tmp_path)
    with pytest.raises(RunFinished) as refused:
        train_ppo(SMALL, RunConfig(resume=str(tmp_path), progress=False))
    assert str(refused.value) == (
        f"run {str(tmp_path)!r} finished at {out['env/steps_total']:,} env steps "
        "(max_env_steps 128); raise --max-env-steps (max_env_steps=) to continue.")
    assert untouched(tmp_path) == before
    more = train_ppo(SMALL, RunConfig(resume=str(tmp_path), max_env_steps=192, progress=False))
    assert more["iteration"] == out["iteration"] + 1
    # Cut short by $DISTRL_MAX_ENV_STEPS (a smoke test), a run is not finished: it resumes.
    monkeypatch.setenv("DISTRL_MAX_ENV_STEPS", "64")
    capped = train_ppo(SMALL, run(tmp_path / "capped"))
    again = train_ppo(SMALL, RunConfig(resume=str(tmp_path / "capped"), progress=False))
    assert again["iteration"] == capped["iteration"] + 1


def test_a_new_run_into_a_logdir_that_holds_one_is_refused(tmp_path, monkeypatch):
    """Not appended: metrics.jsonl would repeat iterations 1.. and the checkpoint go."""
    train_ppo(SMALL, run(tmp_path, max_env_steps=64))
    before = untouched(tmp_path)
    with pytest.raises(ValueError) as refused:
        train_ppo(SMALL, run(tmp_path, max_env_steps=128))
    assert str(refused.value) == (
        f"{str(tmp_path)!r} already holds a run: continue it with --resume {tmp_path} "
        "(resume=), or give a new --logdir (logdir=).")
    assert untouched(tmp_path) == before
    (tmp_path / "empty").mkdir()  # a folder without a run is fine
    assert train_ppo(SMALL, run(tmp_path / "empty", max_env_steps=64))["iteration"] == 1
    # Without --logdir, two runs started within the same second get folders of their own.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(loop, "datetime", SimpleNamespace(now=lambda: datetime(2026, 1, 2)))
    cfg = RunConfig(env="CartPole-v1", max_env_steps=64, progress=False)
    first, second = (Path(train_ppo(SMALL, cfg)["checkpoint"]).parent for _ in range(2))
    assert (first.name, second.name) == ("ppo_CartPole-v1_20260102-000000",
                                         "ppo_CartPole-v1_20260102-000000_1")


@pytest.mark.parametrize(("stop", "said"), [
    ({"stop_return": -1.0}, "(stop_return -1); raise --stop-return (stop_return=), or turn "
     "it off with --resume-reset stop_return to continue."),
    ({"max_time_s": 1e-6}, "(max_time_s 1e-06); raise --max-time-s (max_time_s=) to continue."),
])
def test_a_run_stopped_by_its_return_or_time_is_finished_too(tmp_path, stop, said):
    train_ppo(SMALL, run(tmp_path, **stop))
    before = untouched(tmp_path)
    with pytest.raises(RunFinished, match="finished") as refused:
        train_ppo(SMALL, RunConfig(resume=str(tmp_path), progress=False))
    assert str(refused.value).endswith(said)
    assert untouched(tmp_path) == before


def test_the_cli_says_it_in_one_line_without_importing_ray(tmp_path):
    """Ray made unimportable: the resume asks for 2 Ray runners, and is refused first."""
    train_ppo(SMALL, run(tmp_path, max_env_steps=64))
    before = untouched(tmp_path)
    code = ("import sys; sys.modules['ray'] = None; from distrl.cli import main; "
            f"main(['train', 'ppo', '--resume', {str(tmp_path)!r}, '--num-env-runners', '2'])")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    env.pop("DISTRL_MAX_ENV_STEPS", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 1, out.stderr
    # The changes the resume reports, then the one line.
    assert out.stderr.strip().splitlines() == [
        "distrl: resume: num_env_runners 0 -> 2",
        f"distrl: error: run {str(tmp_path)!r} finished at 64 env steps (max_env_steps 64); "
        "raise --max-env-steps (max_env_steps=) to continue."]
    assert untouched(tmp_path) == before
