"""The CLI end to end: train on Ray with --json, then evaluate the checkpoint."""

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.ray


def distrl(*args, **kw):
    return subprocess.run([sys.executable, "-m", "distrl", *args], capture_output=True,
                          text=True, timeout=300, **kw)


def test_train_json_then_eval(tmp_path, capsys):
    out = distrl("train", "ppo", "--env", "CartPole-v1", "--num-env-runners", "2",
                 "--num-envs-per-env-runner", "2", "--max-env-steps", "300", "--seed", "1",
                 "--train-batch-size", "128", "--minibatch-size", "64", "--lambda", "0.9",
                 "--logdir", str(tmp_path), "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["env/steps_total"] >= 300 and result["stopped_by"] == "max_env_steps"
    assert 0 <= result["learner/clip_fraction"] <= 1 and "learner/explained_variance" in result
    assert result["checkpoint"].startswith(str(tmp_path))
    ev = distrl("eval", result["checkpoint"], "--episodes", "3", "--json")
    assert ev.returncode == 0, ev.stderr
    report = json.loads(ev.stdout.strip().splitlines()[-1])
    assert report["episodes"] == 3 and len(report["returns"]) == 3
    assert report["episode_return_mean"] == sum(report["returns"]) / 3
    returns, mean = report["returns"], report["episode_return_mean"]
    std = (sum((r - mean) ** 2 for r in returns) / 3) ** 0.5
    from distrl.cli import main  # the same command line in this process: no start-up

    capsys.readouterr()
    main(["eval", result["checkpoint"], "--episodes", "3"])
    text = capsys.readouterr().out.strip()
    assert text == (f"mean greedy return over 3 episodes: {mean:.2f} (std {std:.2f}, min "
                    f"{min(returns):.2f}, max {max(returns):.2f}; mean length "
                    f"{sum(report['lengths']) / 3:.1f})")  # the same seeds: the same episodes
    with pytest.raises(SystemExit) as bad:
        main(["eval", result["checkpoint"], "--env-config", '{"foo": 1}'])
    # The exit's message is what the process would print on stderr as it ends.
    assert str(bad.value.code).splitlines() == [
        "distrl: error: env 'CartPole-v1' does not take the env_config key 'foo' (given: "
        "['foo']; it takes render_mode, sutton_barto_reward); remove it from --env-config or "
        "fix its name."]


def test_bad_input_exits_with_a_message():
    out = distrl("train", "ppo", "--env", "CartPol-v1", "--num-env-runners", "0")
    assert out.returncode != 0
    assert "Did you mean 'CartPole-v1'" in out.stderr
    out = distrl("train", "ppo", "--minibatch-size", "512", "--train-batch-size", "256")
    assert out.returncode != 0 and "minibatch_size" in out.stderr


C4 = ("--env", "pettingzoo:connect_four_v3")


@pytest.mark.parametrize(("args", "message"), [
    (("ppo", "--env-config", '{"foo": 1}'), "env 'CartPole-v1' does not take the env_config "
     "key 'foo'"),
    (("league", *C4, "--env-config", '{"foo": 1}'), "env 'pettingzoo:connect_four_v3' does "
     "not take the env_config key 'foo'"),
    (("league", "--env", "openspiel:kuhn_poker", "--env-config", '{"foo": 1}'),
     "env openspiel:kuhn_poker: Unknown parameter 'foo'"),
    (("alphazero", *C4, "--eval-opponent", "foo"), "opponent 'foo': give random, mcts"),
    (("alphazero", *C4, "--eval-opponent", "mcts:x"), "opponent 'mcts:x': give mcts:"),
    (("alphazero", *C4, "--eval-opponent", "nomodule:play"), "No module named 'nomodule'"),
    (("league", *C4, "--bots", "mcst", "--bot-prob", "0.1"), "opponent 'mcst': give random"),
    (("alphazero", *C4, "--train-batch-size", "64", "--replay-capacity", "32",
      "--learning-starts", "0"), "`train_batch_size` (64) exceeds `replay_capacity` (32)"),
])
def test_bad_input_is_refused_before_any_training(tmp_path, args, message):
    """One line (or tyro's box for a config it refuses), and not a metrics row first."""
    out = distrl("train", *args, "--max-env-steps", "64", "--logdir", str(tmp_path))
    assert out.returncode != 0
    assert message in " ".join(out.stderr.replace("│", " ").split()), out.stderr
    assert "Traceback" not in out.stderr
    assert not list(tmp_path.rglob("metrics.jsonl"))


@pytest.mark.slow
def test_train_ddppo_json(tmp_path):
    out = distrl("train", "ddppo", "--num-workers", "2", "--num-envs-per-worker", "2",
                 "--evaluation-interval", "1", "--evaluation-duration", "2",
                 "--rollout-fragment-length", "16", "--minibatch-size", "16",
                 "--max-env-steps", "100", "--logdir", str(tmp_path), "--json")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["ddppo/world_size"] == 2 and result["learner/batch_size"] == 64
    assert result["eval/episodes"] == 2  # the shared loop evaluates every algorithm
    assert result["env/steps_total"] >= 100


def test_ddppo_rules_exit_with_a_message():
    out = distrl("train", "ddppo", "--train-batch-size", "1000")
    assert out.returncode != 0 and "Do not set `train_batch_size`" in out.stderr
    out = distrl("train", "ddppo", "--kl-coeff", "0.2")
    assert out.returncode != 0 and "un-decentralize" in out.stderr


def test_resume_with_another_algorithm_or_env_is_one_line(tmp_path):
    out = distrl("train", "ppo", "--env", "Pendulum-v1", "--num-env-runners", "0",
                 "--train-batch-size", "64", "--minibatch-size", "32",
                 "--num-envs-per-env-runner", "4", "--max-env-steps", "64",
                 "--logdir", str(tmp_path), "--json")
    assert out.returncode == 0, out.stderr
    out = distrl("train", "ddppo", "--resume", str(tmp_path))
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert f"resume it with `distrl train ppo --resume {tmp_path}`" in out.stderr
    # No --env: the run continues on its own env (Pendulum), with the changed budget said.
    out = distrl("train", "ppo", "--resume", str(tmp_path), "--max-env-steps", "128", "--json")
    assert out.returncode == 0, out.stderr
    assert "resume: max_env_steps 64 -> 128" in out.stderr
    assert json.loads(out.stdout.strip().splitlines()[-1])["env/steps_total"] >= 128


def test_tuned_in_process_runs_all_the_tuned_envs(tmp_path):
    out = distrl("train", "ppo", "--tuned", "cartpole", "--num-env-runners", "0",
                 "--max-env-steps", "1", "--logdir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    saved = json.loads((tmp_path / "checkpoint" / "run" / "config.json").read_text())
    assert saved["config"]["num_envs_per_env_runner"] == 32  # as the learning test and bench


# alone: a timing bound
@pytest.mark.alone
def test_an_unreachable_address_is_one_line_naming_it():
    t0 = time.perf_counter()
    out = distrl("train", "ppo", "--num-env-runners", "1", "--address", "127.0.0.1:9",
                 "--max-env-steps", "64")
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "cannot reach a Ray cluster at '127.0.0.1:9'" in out.stderr
    assert time.perf_counter() - t0 < 60


# Shares the machine: the `ray start` cluster it registers machine-wide
# (/tmp/ray/ray_current_cluster, as ray.cluster_utils' multi-node tests do) sends only a
# bare ray.init() there, and every test's Ray names its address ("local" or a cluster's)
# or its own temp dir (the documented commands).
def test_a_cluster_already_running_here_does_not_stop_a_local_run(tmp_path):
    """Without --address a run starts a cluster of its own; `ray start --head` on the
    machine made every Ray run fail ("num_cpus ... must not be provided")."""
    port = free_port()
    marker = Path(tempfile.gettempdir(), "ray", "ray_current_cluster")
    had_marker = marker.exists()
    head = subprocess.Popen(
        [str(Path(sys.executable).parent / "ray"), "start", "--head", "--block",
         f"--port={port}", "--num-cpus=1", "--include-dashboard=false"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the head is up once its port answers
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.5)
        else:
            pytest.fail("ray start --head did not come up within 60 s")
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        out = subprocess.run([sys.executable, "-m", "distrl", "train", "ppo",
                              "--num-env-runners", "2", "--num-envs-per-env-runner", "2",
                              "--train-batch-size", "64", "--minibatch-size", "32",
                              "--num-epochs", "1", "--max-env-steps", "128",
                              "--logdir", str(tmp_path / "run"), "--json"],
                             capture_output=True, text=True, timeout=300, env=env)
        assert out.returncode == 0, out.stderr[-3000:]
        assert json.loads(out.stdout.strip().splitlines()[-1])["env/steps_total"] >= 128
    finally:
        head.terminate()  # --block: the head stops its processes when its CLI ends
        head.wait(timeout=60)
        if not had_marker:  # left behind, it would send every later ray.init() looking
            marker.unlink(missing_ok=True)  # for the stopped cluster


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_run_shuts_down_the_ray_it_started_and_only_that_in_a_namespace_of_its_own(tmp_path):
    def train(name: str) -> str:
        return ("train_ppo(PPOConfig(num_env_runners=1, num_envs_per_env_runner=2, "
                "train_batch_size=64, minibatch_size=32, num_epochs=1), RunConfig("
                f"max_env_steps=64, logdir={str(tmp_path / name)!r}, progress=False), "
                "callbacks=note_namespace)\n")

    code = ("import ray\nfrom distrl import Callbacks, PPOConfig, RunConfig, train_ppo\n"
            "names = []\nnote_namespace = Callbacks(on_iteration=lambda m: names.append("
            "ray.get_runtime_context().namespace) and False)\n"
            + train("a") + "assert not ray.is_initialized(), 'the run left its Ray up'\n"
            + train("b") + "assert not ray.is_initialized(), 'the run left its Ray up'\n"
            + "ray.init(address='local', num_cpus=1, include_dashboard=False)\n" + train("c")
            + "assert ray.is_initialized(), 'the run shut down the caller\\'s Ray'\n"
            + "print(*names)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    a, b, c = out.stdout.split()[-3:]  # each run's own; the caller's Ray keeps the caller's
    assert a.startswith("distrl-") and b.startswith("distrl-") and a != b
    assert not c.startswith("distrl-")
