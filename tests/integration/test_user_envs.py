"""A user's own env: module:EnvId and module:callable from the CLI, in-process
and on Ray runners, env_config through resume and eval, evaluation during training,
videos. The env module is on PYTHONPATH only, as a user would have it."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from distrl import PPOConfig, RunConfig, train_ppo

pytestmark = pytest.mark.ray

ENVMODS = str(Path(__file__).parents[1] / "envmods")
SMALL = ["--train-batch-size", "64", "--minibatch-size", "32", "--num-epochs", "1"]


def distrl(*args, pythonpath=ENVMODS):
    # The caller's own PYTHONPATH stays after the env modules (a scratch copy of distrl).
    path = os.pathsep.join(filter(None, [pythonpath, os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    return subprocess.run([sys.executable, "-m", "distrl", *args], capture_output=True,
                          text=True, timeout=300, env=env, cwd="/")


def last_json(out):
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("runners", [0, 2])
def test_registered_env_with_env_config_trains_resumes_and_evaluates(tmp_path, runners):
    per_runner = "4" if runners == 0 else "2"
    result = last_json(distrl(
        "train", "ppo", "--env", "distrl_user_envs:Countdown-v0", "--env-config",
        '{"length": 7}', "--num-env-runners", str(runners), "--num-envs-per-env-runner",
        per_runner, *SMALL, "--max-env-steps", "128", "--logdir", str(tmp_path), "--json"))
    assert result["env/episode_return_mean"] == 7.0  # env_config reached every sub-env
    resumed = last_json(distrl("train", "ppo", "--resume", str(tmp_path), "--max-env-steps",
                               "256", "--json"))
    assert resumed["env/steps_total"] >= 256 and resumed["env/episode_return_mean"] == 7.0
    if runners == 0:  # eval runs in its own process whatever the run's runners were
        report = last_json(distrl("eval", str(tmp_path), "--episodes", "2", "--json"))
        assert report["returns"] == [7.0, 7.0] and report["lengths"] == [7, 7]


def test_a_factory_by_name_is_saved_as_a_string(tmp_path):
    last_json(distrl("train", "ppo", "--env", "distrl_user_envs:countdown", "--env-config",
                     '{"length": 3}', "--num-env-runners", "0", "--num-envs-per-env-runner",
                     "4", *SMALL, "--max-env-steps", "64", "--logdir", str(tmp_path), "--json"))
    saved = json.loads((tmp_path / "checkpoint" / "run" / "config.json").read_text())["run"]
    assert saved["env"] == "distrl_user_envs:countdown" and saved["env_config"] == {"length": 3}
    report = last_json(distrl("eval", str(tmp_path), "--episodes", "3", "--json"))
    assert report["returns"] == [3.0] * 3


def test_a_module_that_cannot_be_imported_is_named():
    out = distrl("train", "ppo", "--env", "distrl_user_envs:Countdown-v0",
                 "--num-env-runners", "0", pythonpath="")
    assert out.returncode != 0 and "Traceback" not in out.stderr
    assert "cannot import module 'distrl_user_envs'" in out.stderr
    assert "PYTHONPATH" in out.stderr


def test_videos_of_every_episode(tmp_path):
    pytest.importorskip("moviepy", reason="distrl[video] (moviepy) is not installed")
    last_json(distrl("train", "ppo", "--env", "distrl_user_envs:Countdown-v0",
                     "--num-env-runners", "0", "--num-envs-per-env-runner", "4", *SMALL,
                     "--max-env-steps", "64", "--logdir", str(tmp_path / "run"), "--json"))
    report = last_json(distrl("eval", str(tmp_path / "run"), "--episodes", "2", "--video",
                              str(tmp_path / "videos"), "--json"))
    assert report["returns"] == [5.0, 5.0]
    videos = sorted(p.name for p in (tmp_path / "videos").glob("*.mp4"))
    assert len(videos) == 2, videos
    assert all((tmp_path / "videos" / v).stat().st_size > 0 for v in videos)


def test_evaluation_every_n_iterations_and_stop_on_eval(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(ENVMODS)
    cfg = PPOConfig(train_batch_size=64, minibatch_size=32, num_epochs=1, num_env_runners=0,
                    num_envs_per_env_runner=4)
    run = RunConfig(env="distrl_user_envs:Countdown-v0", env_config={"length": 4},
                    evaluation_interval=2, evaluation_duration=3, max_env_steps=64 * 5,
                    logdir=str(tmp_path / "a"), progress=False)
    train_ppo(cfg, run)
    rows = [json.loads(x) for x in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    # Every 2 iterations, and at the end (5) once more: the run's final evaluation.
    assert [r["iteration"] for r in rows if "eval/episode_return_mean" in r] == [2, 4, 5]
    assert rows[-1]["final_evaluation"] and rows[-2]["iteration"] == 5
    assert all(r["eval/episode_return_mean"] == 4.0 and r["eval/episodes"] == 3
               for r in rows if "eval/episodes" in r)
    # Training episodes return 4 from the first iteration on; only the evaluation at
    # iteration 3 may stop the run.
    result = train_ppo(cfg, RunConfig(env=run.env, env_config={"length": 4}, stop_return=4.0,
                                      stop_on="eval", evaluation_interval=3,
                                      logdir=str(tmp_path / "b"), progress=False))
    assert result["stopped_by"] == "stop_return" and result["iteration"] == 3


@pytest.mark.slow
def test_a_ray_node_that_cannot_import_the_env_module_is_named(ray_local, tmp_path,
                                                                monkeypatch):
    # The cluster started without the module on its path; only the driver can import it.
    monkeypatch.syspath_prepend(ENVMODS)
    cfg = PPOConfig(train_batch_size=64, minibatch_size=32, num_epochs=1, num_env_runners=1,
                    num_envs_per_env_runner=4)
    with pytest.raises(RuntimeError, match=r"env_runners 0 failed to start: .*cannot import "
                                           r"module 'distrl_user_envs' on .*PYTHONPATH"):
        train_ppo(cfg, RunConfig(env="distrl_user_envs:Countdown-v0", max_env_steps=64,
                                 logdir=str(tmp_path), progress=False))


BUG_LINE = next(i for i, line in enumerate(
    (Path(ENVMODS) / "distrl_user_envs.py").read_text().splitlines(), 1) if line.endswith("# BUG"))
BUG_AT = f"{ENVMODS}/distrl_user_envs.py:{BUG_LINE} (in divide)"


def test_an_env_that_fails_on_a_ray_runner_is_its_one_line_not_a_resource_problem():
    # reset() fails while the runner starts: Ray reports a dead actor, not the env's error.
    out = distrl("train", "ppo", "--env", "distrl_user_envs:Broken", "--env-config",
                 '{"fail_in": "reset"}', "--max-episode-steps", "10", "--num-env-runners",
                 "1", "--num-envs-per-env-runner", "2", *SMALL, "--max-env-steps", "64")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines()[-1] == (
        "distrl: error: env 'distrl_user_envs:Broken' raised ZeroDivisionError: division by "
        f"zero at {BUG_AT}; --debug or DISTRL_DEBUG=1 shows the traceback")
    assert "Lower the count" not in out.stderr and "creation task" not in out.stderr


def test_an_env_that_fails_in_a_ray_runners_step_keeps_its_traceback(ray_local, tmp_path,
                                                                       monkeypatch):
    import traceback

    from ray import cloudpickle

    from distrl.envs.errors import EnvError

    monkeypatch.syspath_prepend(ENVMODS)
    import distrl_user_envs  # the cluster cannot import it: the class travels by value

    cloudpickle.register_pickle_by_value(distrl_user_envs)
    cfg = PPOConfig(train_batch_size=64, minibatch_size=32, num_epochs=1, num_env_runners=1,
                    num_envs_per_env_runner=2)
    try:
        with pytest.raises(EnvError) as raised:
            train_ppo(cfg, RunConfig(env=distrl_user_envs.Broken, max_episode_steps=10,
                                     max_env_steps=64, logdir=str(tmp_path), progress=False))
    finally:
        cloudpickle.unregister_pickle_by_value(distrl_user_envs)
    assert str(raised.value).startswith("env 'distrl_user_envs:Broken' raised "
                                        f"ZeroDivisionError: division by zero at {BUG_AT}; ")
    # What --debug prints: the runner's traceback down to the user's line.
    text = "".join(traceback.format_exception(raised.value))
    assert f'distrl_user_envs.py", line {BUG_LINE}, in divide' in text


def test_a_class_env_with_max_episode_steps_ends_its_episodes_in_training_and_eval(tmp_path):
    result = last_json(distrl(
        "train", "ppo", "--env", "distrl_user_envs:Endless", "--max-episode-steps", "6",
        "--num-env-runners", "0", "--num-envs-per-env-runner", "4", *SMALL,
        "--max-env-steps", "64", "--logdir", str(tmp_path), "--json"))
    assert result["env/episode_len_mean"] == 6.0
    assert last_json(distrl("eval", str(tmp_path), "--episodes", "2", "--json")
                     )["lengths"] == [6, 6]
    assert last_json(distrl("eval", str(tmp_path), "--episodes", "2", "--max-episode-steps",
                            "3", "--json"))["lengths"] == [3, 3]
