"""The train loop in-process (no Ray): metrics, checkpoints, exact resume, evaluation."""

import json
import os
import signal
from pathlib import Path

import gymnasium as gym
import pytest
import torch

from distrl import PPOConfig, RunConfig, evaluate, train_ddppo, train_ppo
from distrl.core.callbacks import Callbacks
from distrl.core.checkpoint import Checkpoint
from tests.fakes import counting

SMALL = PPOConfig(train_batch_size=64, minibatch_size=32, num_epochs=2, num_env_runners=0,
                  num_envs_per_env_runner=4)
REQUIRED = ["iteration", "time/total_s", "env/steps_total", "env/episode_return_mean",
            "env/steps_per_s", "learner/policy_loss", "learner/vf_loss", "learner/entropy",
            "learner/kl", "learner/kl_coeff", "learner/clip_fraction",
            "learner/explained_variance"]


def run(logdir, **kw):
    return RunConfig(logdir=str(logdir), progress=False, **kw)


def test_metrics_jsonl_and_tensorboard(tmp_path):
    result = train_ppo(SMALL, run(tmp_path, max_env_steps=200))
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == list(range(1, len(rows) + 1))
    assert len(rows) >= 3 and rows[-1]["env/steps_total"] >= 200
    for key in REQUIRED:
        assert key in rows[-1], key
    assert all(r["learner/batch_size"] == 64 for r in rows)
    assert all(0 <= r["learner/clip_fraction"] <= 1 for r in rows)
    assert all(r["learner/explained_variance"] <= 1 for r in rows)
    assert list(tmp_path.glob("events.out.tfevents.*"))
    assert Path(result["checkpoint"], "manifest.json").is_file()


def test_resume_continues_exactly(tmp_path):
    straight = train_ppo(SMALL, run(tmp_path / "a", max_env_steps=256))
    train_ppo(SMALL, run(tmp_path / "b", max_env_steps=128))
    resumed = train_ppo(SMALL, run(tmp_path / "b", max_env_steps=256, resume=str(tmp_path / "b")))
    assert resumed["iteration"] == straight["iteration"]
    assert resumed["env/steps_total"] == straight["env/steps_total"]
    a = Checkpoint(tmp_path / "a").tensors("policy", "weights.pt")
    b = Checkpoint(tmp_path / "b").tensors("policy", "weights.pt")
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0)
    rows = (tmp_path / "b" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(r)["iteration"] for r in rows] == [1, 2, 3, 4]


def test_stop_return_and_evaluate_a_factory_env(tmp_path):
    # Every episode of the counting env returns 3, so the stop return is met at once.
    result = train_ppo(SMALL, run(tmp_path, env=counting(end=3), stop_return=3.0))
    assert result["stopped_by"] == "stop_return" and result["iteration"] == 1
    assert evaluate(result["checkpoint"], episodes=5, env=counting(end=3)) == [3.0] * 5


def test_max_time_s_stops_between_iterations(tmp_path):
    result = train_ppo(SMALL, run(tmp_path, max_time_s=1e-9, max_env_steps=10_000))
    assert result["stopped_by"] == "max_time_s" and result["iteration"] == 1
    with pytest.raises(ValueError, match="max_time_s"):
        RunConfig(max_time_s=0)


def test_evaluate_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        evaluate(tmp_path / "missing")
    with pytest.raises(ValueError, match="episodes"):
        evaluate(tmp_path, episodes=0)


class InterruptOnce(gym.Env):
    """CartPole that sends this process SIGINT at the armed global step (a user's
    Ctrl-C in the middle of an iteration); otherwise plain CartPole."""

    fire_at: int | None = None
    again_at: int | None = None  # a second Ctrl-C
    steps = 0
    signal = signal.SIGINT
    observation_space = gym.make("CartPole-v1").observation_space
    action_space = gym.spaces.Discrete(2)

    def __init__(self):
        self.env = gym.make("CartPole-v1")

    def reset(self, *, seed=None, options=None):
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        InterruptOnce.steps += 1
        if InterruptOnce.steps in (InterruptOnce.fire_at, InterruptOnce.again_at):
            os.kill(os.getpid(), InterruptOnce.signal)
        return self.env.step(action)


def weights(logdir):
    return Checkpoint(logdir).tensors("policy", "weights.pt")


def assert_same_weights(a, b):
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=0)


def test_ctrl_c_saves_the_completed_iteration_and_resumes_exactly(tmp_path):
    straight = train_ppo(SMALL, run(tmp_path / "a", env=InterruptOnce, max_env_steps=256))
    InterruptOnce.steps, InterruptOnce.fire_at = 0, 100  # inside iteration 2 (~68 per iteration)
    try:
        stopped = train_ppo(SMALL, run(tmp_path / "b", env=InterruptOnce, max_env_steps=256))
    finally:
        InterruptOnce.fire_at = None
    assert stopped["stopped_by"] == "interrupted" and stopped["iteration"] == 2
    assert Checkpoint(tmp_path / "b").manifest["iteration"] == 2
    resumed = train_ppo(SMALL, run(tmp_path / "b", resume=str(tmp_path / "b"),
                                   max_env_steps=256))
    assert resumed["iteration"] == straight["iteration"]
    assert_same_weights(weights(tmp_path / "a"), weights(tmp_path / "b"))


def test_the_command_of_a_run_stopped_by_ctrl_c_says_so_then_exits_130(tmp_path, capsys):
    """Saved and resumable, yet stopped from outside: 130 as for any Ctrl-C (it was 0)."""
    from distrl.cli import main

    InterruptOnce.steps, InterruptOnce.fire_at = 0, 100
    try:
        with pytest.raises(SystemExit) as ended:
            main(["train", "ppo", "--env", f"{__name__}:InterruptOnce", "--num-env-runners",
                  "0", "--num-envs-per-env-runner", "4", "--train-batch-size", "64",
                  "--minibatch-size", "32", "--max-env-steps", "256", "--no-progress",
                  "--logdir", str(tmp_path)])
    finally:
        InterruptOnce.fire_at = None
    assert ended.value.code == 130
    assert capsys.readouterr().out.startswith("done (interrupted): ")
    assert Checkpoint(tmp_path).manifest["iteration"] == 2


def test_a_second_ctrl_c_aborts_without_saving(tmp_path):
    InterruptOnce.steps, InterruptOnce.fire_at, InterruptOnce.again_at = 0, 100, 110
    try:  # both inside iteration 2: the first alone would save it (the test above)
        with pytest.raises(KeyboardInterrupt):
            train_ppo(SMALL, run(tmp_path, env=InterruptOnce, max_env_steps=1_000))
    finally:
        InterruptOnce.fire_at = InterruptOnce.again_at = None
    saved = list(tmp_path.rglob("manifest.json"))
    assert not saved or Checkpoint(tmp_path).manifest["iteration"] < 2


def test_resume_takes_a_non_default_env_from_the_checkpoint(tmp_path, capsys):
    straight = train_ppo(SMALL, run(tmp_path / "a", env="Pendulum-v1", max_env_steps=256))
    train_ppo(SMALL, run(tmp_path / "b", env="Pendulum-v1", max_env_steps=128))
    resumed = train_ppo(SMALL, run(tmp_path / "b", resume=str(tmp_path / "b"),
                                   max_env_steps=256))
    assert "resume: max_env_steps 128 -> 256" in capsys.readouterr().err
    assert resumed["env/steps_total"] == straight["env/steps_total"]
    assert_same_weights(weights(tmp_path / "a"), weights(tmp_path / "b"))


def test_resume_refuses_another_env_or_algorithm(tmp_path):
    train_ppo(SMALL, run(tmp_path, env="Pendulum-v1", max_env_steps=64))
    with pytest.raises(ValueError, match=r"keeps its env.*'Pendulum-v1', not 'Acrobot-v1'"):
        train_ppo(SMALL, run(tmp_path, env="Acrobot-v1", resume=str(tmp_path)))
    with pytest.raises(ValueError, match=r"checkpoint of a 'ppo' run, not 'ddppo'.*train ppo"):
        train_ddppo(None, run(tmp_path, resume=str(tmp_path)))


def test_the_environment_variable_caps_every_run(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTRL_MAX_ENV_STEPS", "100")
    result = train_ppo(SMALL, run(tmp_path, max_env_steps=10**9))
    assert result["stopped_by"] == "max_env_steps" and 100 <= result["env/steps_total"] < 200


def test_a_nan_loss_stops_the_run_naming_algorithm_iteration_and_value(tmp_path, monkeypatch):
    from distrl.core.learner import NonFiniteError
    from distrl.ppo import loss as ppo_loss_module

    real = ppo_loss_module.ppo_loss
    calls = []

    def nan_in_the_second_iteration(*args, **kwargs):
        loss, parts = real(*args, **kwargs)
        calls.append(1)
        return (loss * float("nan") if len(calls) > SMALL.num_epochs * 2 else loss), parts

    monkeypatch.setattr(ppo_loss_module, "ppo_loss", nan_in_the_second_iteration)
    with pytest.raises(NonFiniteError, match=r"ppo, iteration 2: the loss is nan"):
        train_ppo(SMALL, run(tmp_path, max_env_steps=640))


def test_a_run_that_fails_saves_its_last_completed_iteration(tmp_path, capsys):
    """checkpoint_every=0 (the default) used to leave nothing after an error."""
    with pytest.raises(ValueError, match="non-finite"):
        train_ppo(SMALL, run(tmp_path, env=counting(end=100, nan_at=50), max_env_steps=10**6))
    ckpt = Checkpoint(tmp_path)
    assert ckpt.manifest["iteration"] == 3  # 16 steps per env per iteration; step 50 failed
    assert f"saved iteration 3 to {tmp_path / 'checkpoint'}" in capsys.readouterr().err
    rows = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert len(rows) == 3


def test_sigterm_stops_cleanly_like_ctrl_c(tmp_path):
    InterruptOnce.steps, InterruptOnce.fire_at = 0, 100
    InterruptOnce.signal = signal.SIGTERM
    before = signal.getsignal(signal.SIGTERM)
    try:
        stopped = train_ppo(SMALL, run(tmp_path, env=InterruptOnce, max_env_steps=256))
    finally:
        InterruptOnce.fire_at, InterruptOnce.signal = None, signal.SIGINT
    assert stopped["stopped_by"] == "interrupted" and stopped["iteration"] == 2
    assert Checkpoint(tmp_path).manifest["iteration"] == 2
    assert signal.getsignal(signal.SIGTERM) == before  # the handler is given back


def test_max_time_s_cuts_an_iteration_that_never_returns(tmp_path, monkeypatch, capsys):
    import time

    from distrl.core import interrupts

    monkeypatch.setattr(interrupts, "overdue_grace_s", lambda max_time_s, longest: 1.0)

    def hang(metrics):
        time.sleep(30)  # a call that does not return in time, inside the loop

    before = signal.getsignal(signal.SIGINT)  # SIG_IGN where a shell started pytest with &
    t0 = time.monotonic()
    with pytest.raises(interrupts.RunOverdue, match=r"no iteration ended within 1 s after "
                       r"--max-time-s \(1 s\) passed"):
        train_ppo(SMALL, run(tmp_path, max_time_s=1.0), callbacks=Callbacks(on_iteration=hang))
    assert time.monotonic() - t0 < 20
    assert Checkpoint(tmp_path).manifest["iteration"] == 1  # the completed one is saved
    assert "--resume" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGINT) is before  # restored


def test_ray_shutdown_is_waited_for_only_so_long(monkeypatch, capsys):
    import time

    import ray

    from distrl.runtime.cluster import shutdown_within

    monkeypatch.setattr(ray, "shutdown", lambda: time.sleep(30))  # a log thread stuck
    t0 = time.monotonic()
    assert shutdown_within(0.5) is False
    assert time.monotonic() - t0 < 5
    assert "Ray did not shut down within 0.5 s" in capsys.readouterr().err


def test_the_command_ends_even_when_its_exit_handlers_hang():
    import subprocess
    import sys
    import time

    code = ("import atexit, sys, time; import distrl.core.interrupts as i; i.EXIT_GRACE_S = 1.0; "
            "import distrl.cli as cli; atexit.register(time.sleep, 30); "
            "sys.argv = ['distrl', '--version']; cli.main()")
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60)
    assert time.monotonic() - t0 < 20
    assert out.returncode == 0 and out.stdout.startswith("distrl ")


def test_a_finished_command_runs_its_exit_handlers_flushes_and_ends_there():
    """The process ends at the command's end (skipping the interpreter's teardown of
    native modules, a second per command) after its other threads and its exit handlers,
    with every byte of its piped, block-buffered output."""
    import os
    import subprocess
    import sys

    code = ("import atexit, threading, time; from distrl.core.interrupts import command; "
            "atexit.register(print, 'handler ran'); "
            "late = threading.Thread(target=lambda: (time.sleep(0.5), print('thread ran'))); "
            "command(lambda: (late.start(), print('x' * 100_000)), end_process=True); "
            "print('after the command')")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout == "x" * 100_000 + "\nthread ran\nhandler ran\n"


def test_the_grace_past_max_time_s_follows_the_longest_iteration():
    from distrl.core.interrupts import overdue_grace_s

    assert overdue_grace_s(10.0, 1.0) == 60.0  # short runs: a minute
    assert overdue_grace_s(3600.0, 1.0) == 900.0  # a quarter of a long one
    assert overdue_grace_s(30.0, 50.0) == 150.0  # iterations longer than the run's limit
