"""Ctrl-C anywhere is one line and exit status 130, with no traceback and nothing
half-written: during `distrl eval` (no partial video), the second (abort) Ctrl-C of a
training run (no partial checkpoint), and Ray's start-up (no Ray process left behind).

Ctrl-C is SIGINT to the command's whole process group, as a terminal sends it; an env
that sleeps in step (or a wrapped ray.init) holds the command in the phase under test."""

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from distrl import PPOConfig, RunConfig, train_ppo

# alone: signals sent at timed moments; no Ray process may be left on the machine
pytestmark = [pytest.mark.ray, pytest.mark.alone]

ROOT = Path(__file__).resolve().parents[2]
INTERRUPTED = "distrl: interrupted; stopped without saving anything more"

SLOW_ENV = '''
import os, pathlib, time
import gymnasium as gym

class Slow(gym.Wrapper):
    def step(self, action):
        pathlib.Path(os.environ["SLOW_MARKER"]).touch()
        time.sleep(0.05)
        return super().step(action)

def make(render_mode=None):
    return Slow(gym.make("CartPole-v1", render_mode=render_mode))
'''

RAY_STARTING = '''
import pathlib, sys
import ray
from distrl.cli import main

real = ray.init
def init(*args, **kwargs):
    pathlib.Path(sys.argv[1]).touch()
    return real(*args, **kwargs)
ray.init = init
main(sys.argv[2:])
'''


def start(tmp_path, args, env=None):
    """`distrl ARGS` in a session of its own; the marker file it touches once in the phase."""
    (tmp_path / "slowenv.py").write_text(SLOW_ENV)
    marker = tmp_path / "marker"
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}",
           "SLOW_MARKER": str(marker), **(env or {})}
    for name in ("DISTRL_MAX_ENV_STEPS", "RAY_ADDRESS"):
        env.pop(name, None)
    # A terminal's foreground command takes Ctrl-C; a test run started in the background
    # (`make test &`) has SIGINT ignored, which children inherit: hand them the default.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env,
                                start_new_session=True)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the command never reached the phase"
        time.sleep(0.05)
    return proc


def ctrl_c(proc, after_s=0.3):
    time.sleep(after_s)
    os.killpg(proc.pid, signal.SIGINT)


def finish(proc):
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip().splitlines()[-1] == INTERRUPTED, err
    return err


def test_ctrl_c_in_eval_is_one_line_and_leaves_no_partial_video(tmp_path):
    run = tmp_path / "run"
    train_ppo(PPOConfig(train_batch_size=64, minibatch_size=32, num_epochs=1,
                        num_env_runners=0, num_envs_per_env_runner=4),
              RunConfig(logdir=str(run), max_env_steps=64, progress=False))
    videos = tmp_path / "videos"
    proc = start(tmp_path, ["-m", "distrl", "eval", str(run), "--env", "slowenv:make",
                            "--episodes", "3", "--video", str(videos)])
    ctrl_c(proc, after_s=0.2)  # within the first episode (CartPole's last >= 8 steps)
    finish(proc)
    assert not [p.name for p in videos.iterdir()]  # the episode in progress is dropped


def test_a_second_ctrl_c_aborts_training_in_one_line(tmp_path):
    logdir = tmp_path / "train"
    proc = start(tmp_path, ["-m", "distrl", "train", "ppo", "--env", "slowenv:make",
                            "--num-env-runners", "0", "--num-envs-per-env-runner", "1",
                            "--train-batch-size", "64", "--minibatch-size", "32",
                            "--max-env-steps", "100000", "--logdir", str(logdir)])
    ctrl_c(proc)  # finishes the iteration (64 steps of 0.05 s), then would save
    ctrl_c(proc, after_s=0.5)  # abort now
    err = finish(proc)
    assert "finishing this iteration" in err
    # No iteration completed: nothing saved, no temporary checkpoint left.
    assert not [p.name for p in logdir.iterdir() if "checkpoint" in p.name]


def test_ctrl_c_while_ray_starts_is_one_line_and_leaves_no_ray_process(tmp_path):
    ray_tmp = tempfile.mkdtemp(prefix="r", dir="/tmp")  # short: Ray's socket paths
    (tmp_path / "ray_starting.py").write_text(RAY_STARTING)
    marker = tmp_path / "marker"
    proc = start(tmp_path, [str(tmp_path / "ray_starting.py"), str(marker), "train", "ppo",
                            "--num-env-runners", "1", "--max-env-steps", "64",
                            "--logdir", str(tmp_path / "run")],
                 env={"RAY_TMPDIR": ray_tmp})
    ctrl_c(proc)
    err = finish(proc)
    assert "Token authentication" not in err  # a local cluster of distrl's own: no notice
    deadline = time.monotonic() + 15
    while left := [p.pid for p in psutil.process_iter(["cmdline"])
                   if ray_tmp in " ".join(p.info["cmdline"] or ())]:
        assert time.monotonic() < deadline, f"Ray processes left: {left}"
        time.sleep(0.5)


def test_ctrl_c_that_python_drops_during_the_ray_start_still_stops(monkeypatch):
    """Python prints and drops a KeyboardInterrupt raised in an import's callback; Ray
    imports as it starts, so a Ctrl-C there was lost and the run went on."""
    import ray

    from distrl.runtime import cluster

    def init_that_drops_the_interrupt(**kwargs):
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        except KeyboardInterrupt:
            pass  # what Python does in a weakref callback

    shut = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init_that_drops_the_interrupt)
    monkeypatch.setattr(cluster, "shutdown_within", lambda timeout_s: shut.append(timeout_s))
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            cluster.init_ray(None)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert shut, "the cluster that started is shut down before the interrupt goes on"
    assert not cluster._started
