"""Checkpoints: atomic and durable saves, the previous one found after a crash between
the renames, and pickles written under the old module layout."""

import json
import os
import pickle
from pathlib import Path

import pytest

from distrl.core.checkpoint import Checkpoint, find_checkpoint, save_checkpoint, trusted_loads


def test_saves_are_atomic_and_leave_no_temp_files(tmp_path, monkeypatch):
    target = tmp_path / "checkpoint"
    save_checkpoint(target, "ppo", {"iteration": 1}, {"a": {"x.json": {"v": 1}}})
    synced = []  # (path fsynced, the iteration the checkpoint directory held then)
    real_fsync = os.fsync

    def fsync(fd):
        held = json.loads((target / "manifest.json").read_text())["iteration"]
        synced.append((Path(os.readlink(f"/proc/self/fd/{fd}")), held))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    save_checkpoint(target, "ppo", {"iteration": 2}, {"a": {"x.json": {"v": 2}}})
    paths = [p for p, _ in synced]
    tmp = paths[0].parent.parent  # where the new checkpoint was written
    assert tmp.parent == tmp_path and tmp.name.startswith(".checkpoint.tmp-")
    # Each file, then its directory, then the temp directory: all before the rename, while
    # the checkpoint still held iteration 1; then the parent, after it, so the rename lasts.
    assert paths == [tmp / "a" / "x.json", tmp / "a", tmp / "manifest.json", tmp, tmp_path]
    assert [held for _, held in synced] == [1, 1, 1, 1, 2]
    assert Checkpoint(tmp_path).json("a", "x.json") == {"v": 2}
    with pytest.raises(TypeError):  # a failed save (not JSON) keeps the previous checkpoint
        save_checkpoint(target, "ppo", {"iteration": 3}, {"a": {"x.json": {"v": object()}}})
    assert Checkpoint(tmp_path).json("a", "x.json") == {"v": 2}
    assert os.listdir(tmp_path) == ["checkpoint"]  # no temp or old directories left


def test_a_crash_between_the_renames_still_finds_the_previous_checkpoint(tmp_path):
    save_checkpoint(tmp_path / "checkpoint", "ppo", {"iteration": 1}, {"a": {"x.json": 1}})
    aside = tmp_path / ".checkpoint.old-abc"
    aside.mkdir()
    os.rename(tmp_path / "checkpoint", aside / "checkpoint")  # the first rename happened
    assert find_checkpoint(tmp_path) == aside / "checkpoint"


def test_pickles_written_before_the_layout_move_still_load():
    """A resume reads runners/state.pkl, which names classes and functions by module:
    those written under the old flat layout (distrl.envs, distrl.nets, ...) are found
    where they moved. Protocol-0 GLOBAL opcodes, as such a pickle holds them."""
    from distrl.envs.make import env_name
    from distrl.models.filters import RunningStats
    from distrl.models.q_network import QNetwork

    assert trusted_loads(b"cdistrl.envs\nenv_name\n.") is env_name
    assert trusted_loads(b"cdistrl.filters\nRunningStats\n.") is RunningStats
    assert trusted_loads(b"cdistrl.nets\nQNetwork\n.") is QNetwork  # nets was split
    assert trusted_loads(pickle.dumps(RunningStats)) is RunningStats  # today's names
    from distrl.envs.memory_tasks import RepeatFirst

    # The env backends left core/ for envs/: a runner's pickled envs still load.
    assert trusted_loads(b"cdistrl.core.memory_tasks\nRepeatFirst\n.") is RepeatFirst
    assert trusted_loads(b"cdistrl.core.envs\nenv_name\n.") is env_name
    with pytest.raises(ModuleNotFoundError):
        trusted_loads(b"cdistrl.nosuchmodule\nX\n.")
