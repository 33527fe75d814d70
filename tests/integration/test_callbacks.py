"""Callbacks of every train_* (on_iteration, on_checkpoint) and the optional W&B logger,
in process with tiny budgets."""

from __future__ import annotations

import json
import struct
import sys
import time
from pathlib import Path

import pytest

from distrl import (
    ApexConfig,
    Callbacks,
    LeagueConfig,
    LeagueRules,
    ModelConfig,
    PPOConfig,
    train_apex,
    train_league,
    train_ppo,
)
from distrl.core.checkpoint import Checkpoint
from distrl.core.metrics import read_jsonl
from tests.fakes import quiet_run as run

PPO = PPOConfig(train_batch_size=64, minibatch_size=32, num_epochs=1, num_env_runners=0,
                num_envs_per_env_runner=2)
APEX = ApexConfig(num_workers=0, num_envs_per_worker=2, rollout_fragment_length=25,
                  learning_starts=200, capacity=5_000, train_batch_size=32,
                  target_network_update_freq=300, min_time_s_per_reporting=0.0,
                  min_sample_timesteps_per_reporting=100,
                  model=ModelConfig(hiddens=(32,), activation="relu"))
LEAGUE = LeagueConfig(rules=LeagueRules(snapshot_steps=300), train_batch_size=128,
                      minibatch_size=64, num_epochs=1, num_envs=4, league_eval_interval=1,
                      league_eval_games=2)


def saved_iteration(path: Path) -> int:
    return Checkpoint(path).progress()["iteration"]


def test_on_iteration_gets_each_iterations_metrics_in_order(tmp_path):
    seen = []
    result = train_ppo(PPO, run(tmp_path, max_env_steps=300),
                       callbacks=Callbacks(on_iteration=seen.append))
    rows = read_jsonl(tmp_path / "metrics.jsonl")
    assert [m["iteration"] for m in seen] == [r["iteration"] for r in rows] == [1, 2, 3, 4, 5]
    for m, row in zip(seen, rows, strict=True):
        assert m["env/steps_total"] == row["env/steps_total"]
        assert m["learner/policy_loss"] == pytest.approx(row["learner/policy_loss"])
    assert seen[-1]["env/steps_total"] == result["env/steps_total"]
    assert result["stopped_by"] == "max_env_steps"


@pytest.mark.parametrize("train, config, env, budget", [
    (train_ppo, PPO, "CartPole-v1", 1_280),  # 20 iterations' env steps
    (train_apex, APEX, "CartPole-v1", 2_000),
    (train_league, LEAGUE, "pettingzoo:connect_four_v3", 2_560),
], ids=["ppo", "apex", "league"])
def test_returning_true_stops_after_that_iteration_with_a_checkpoint(tmp_path, train, config,
                                                                    env, budget):
    if env.startswith("pettingzoo"):
        pytest.importorskip("pettingzoo")
    seen = []

    def stop_at_two(metrics):
        seen.append(metrics["iteration"])
        return metrics["iteration"] == 2

    result = train(config, run(tmp_path, env=env, max_env_steps=budget),
                   callbacks=Callbacks(on_iteration=stop_at_two))
    assert seen == [1, 2]
    assert result["iteration"] == 2 and result["stopped_by"] == "callback"
    assert saved_iteration(result["checkpoint"]) == 2


def test_on_checkpoint_gets_each_saved_checkpoint_and_the_final_one(tmp_path):
    saved = []  # (path, the iteration it held when the callback ran)
    result = train_apex(APEX, run(tmp_path, max_env_steps=600, checkpoint_every=2),
                        callbacks=Callbacks(on_checkpoint=lambda p: saved.append(
                            (p, saved_iteration(p)))))
    n = result["iteration"]
    assert n == 6
    assert saved == [(Path(result["checkpoint"]), i) for i in (2, 4, 6, 6)]


def test_a_callback_error_propagates_naming_it_after_saving_the_iteration(tmp_path):
    def broken_hook(metrics):
        if metrics["iteration"] == 2:
            raise ValueError("my own bug")

    with pytest.raises(ValueError, match="my own bug") as caught:
        train_ppo(PPO, run(tmp_path, max_env_steps=1_280),
                  callbacks=Callbacks(on_iteration=broken_hook))
    assert any("on_iteration callback" in n and "broken_hook" in n
               for n in caught.value.__notes__), caught.value.__notes__
    assert saved_iteration(tmp_path / "checkpoint") == 2


def test_on_checkpoint_error_names_the_callback(tmp_path):
    def upload(path):
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full") as caught:
        train_ppo(PPO, run(tmp_path, max_env_steps=64),
                  callbacks=Callbacks(on_checkpoint=upload))
    assert any("on_checkpoint callback" in n and "upload" in n for n in caught.value.__notes__)


def test_on_iteration_must_answer_a_bool_or_none(tmp_path):
    lines = []
    with pytest.raises(TypeError, match=r"returned 17: return True to stop the run"):
        train_ppo(PPO, run(tmp_path, max_env_steps=1_280),
                  callbacks=Callbacks(on_iteration=lambda m: lines.append(m) or 17))
    assert len(lines) == 1


# --- Weights & Biases ---------------------------------------------------------------------


@pytest.fixture
def no_wandb_account(tmp_path, monkeypatch):
    """No W&B key anywhere (environment, ~/.netrc), no mode set: offline must follow."""
    for var in ("WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE", "WANDB_MODE", "WANDB_DIR",
                "WANDB_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def wandb_records(run_dir: Path) -> list:
    """The records of W&B's offline run file, once its service has written the run's end:
    finish() can return before the service process has flushed the file's tail."""
    import wandb

    wandb.teardown()  # stops this process's W&B service, which flushes what it holds
    deadline = time.monotonic() + 60
    while True:
        records = read_run(run_dir)
        if any(r.WhichOneof("record_type") == "exit" for r in records):
            return records
        assert time.monotonic() < deadline, "W&B never wrote the run's exit record"
        time.sleep(0.5)


def read_run(run_dir: Path) -> list:
    """The records of a W&B run file: a LevelDB-style log (32 KiB blocks of chunks with a
    7-byte header) of protobuf Records after a 7-byte ':W&B' header."""
    from wandb.proto import wandb_internal_pb2 as pb

    (path,) = run_dir.glob("wandb/offline-run-*/run-*.wandb")
    data, pos, chunks, records = path.read_bytes(), 7, b"", []
    assert data[:4] == b":W&B"
    while pos + 7 <= len(data):
        if 32768 - pos % 32768 < 7:  # a block's trailer
            pos += 32768 - pos % 32768
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        chunk, pos = data[pos + 7:pos + 7 + length], pos + 7 + length
        chunks = chunk if kind in (1, 2) else chunks + chunk  # FULL/FIRST start a record
        if kind in (1, 4) and chunks:  # FULL/LAST end one
            record = pb.Record()
            record.ParseFromString(chunks)
            records.append(record)
    return records


def test_wandb_offline_logs_the_tensorboard_scalars_and_configs(tmp_path, no_wandb_account,
                                                                capfd):
    pytest.importorskip("wandb")
    logdir = tmp_path / "run"
    train_ppo(PPO, run(logdir, max_env_steps=200, wandb_project="distrl-tests", seed=3))
    err = capfd.readouterr().err
    assert "W&B logs offline (no W&B API key)" in err and str(logdir / "wandb") in err
    records = wandb_records(logdir)
    logged = [r.history for r in records if r.WhichOneof("record_type") == "history"]
    history = [{i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in h.item}
               for h in logged]
    rows = read_jsonl(logdir / "metrics.jsonl")
    assert [h.step.num for h in logged] == [r["env/steps_total"] for r in rows]
    for h, row in zip(history, rows, strict=True):
        assert "iteration" not in h  # as in TensorBoard
        for key in ("env/steps_per_s", "learner/policy_loss", "learner/kl", "time/total_s"):
            assert h[key] == pytest.approx(row[key]), key
    (started,) = [r.run for r in records if r.WhichOneof("record_type") == "run"]
    assert started.project == "distrl-tests" and started.display_name == "run"
    config = {i.key or "/".join(i.nested_key): json.loads(i.value_json)
              for i in started.config.update}
    assert config["algo"] == "ppo" and config["run"]["seed"] == 3
    assert config["config"]["train_batch_size"] == 64


def test_wandb_is_imported_only_when_asked_for(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # any import of it fails
    train_ppo(PPO, run(tmp_path / "a", max_env_steps=64))
    with pytest.raises(ImportError, match=r"needs the wandb package: pip install "
                                          r"'distrl\[wandb\]'"):
        train_ppo(PPO, run(tmp_path / "b", max_env_steps=64, wandb_project="x"))
    assert not (tmp_path / "b").exists(), "said before the run started"



def test_wandb_online_start_that_fails_logs_offline_instead(tmp_path, no_wandb_account,
                                                            monkeypatch, capfd):
    wandb = pytest.importorskip("wandb")
    monkeypatch.setenv("WANDB_API_KEY", "k" * 40)  # a key, but (say) no network
    real_init, modes = wandb.init, []

    def init(mode, **kwargs):  # what wandb.init raises once its init_timeout has passed
        modes.append(mode)
        if mode == "online":
            raise wandb.errors.CommError("Timed out while retrying: no route to host")
        return real_init(mode=mode, **kwargs)

    monkeypatch.setattr(wandb, "init", init)
    result = train_ppo(PPO, run(tmp_path, max_env_steps=64, wandb_project="distrl-tests"))
    assert modes == ["online", "offline"] and result["stopped_by"] == "max_env_steps"
    assert "W&B could not start online (CommError: Timed out" in capfd.readouterr().err
    assert any(r.WhichOneof("record_type") == "history" for r in wandb_records(tmp_path))
