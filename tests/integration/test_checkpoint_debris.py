"""What SIGKILLed saves leave beside a checkpoint (`.checkpoint.tmp-*`, a save's temp
directory; `.checkpoint.old-*/checkpoint`, the previous one set aside) and damaged
manifests: resume takes the newest valid checkpoint, a good save clears the debris."""

import json
import os
import re
import shutil

import pytest

from distrl.cli import main
from distrl.core.checkpoint import Checkpoint, find_checkpoint, save_checkpoint


def saved(logdir, iteration):
    """A real checkpoint of ``iteration`` at logdir/checkpoint."""
    return save_checkpoint(logdir / "checkpoint", "ppo", {"iteration": iteration},
                           {"a": {"x.json": {"v": iteration}}})


def leftover(logdir, name, iteration, manifest=True, mtime=None):
    """A copy of a real checkpoint where a killed save leaves one: a temp directory is
    the checkpoint itself, an old-* one holds it as checkpoint/."""
    source = saved(logdir / "scratch", iteration)
    target = logdir / name / "checkpoint" if ".old-" in name else logdir / name
    shutil.copytree(source, target)
    shutil.rmtree(logdir / "scratch")
    if manifest is False:
        (target / "manifest.json").unlink()
    elif manifest is not True:
        (target / "manifest.json").write_text(manifest)
    if mtime is not None:
        os.utime(target, (mtime, mtime))
    return target


def test_a_good_save_removes_what_killed_saves_left(tmp_path):
    saved(tmp_path, 1)
    leftover(tmp_path, ".checkpoint.old-k1", 1)
    leftover(tmp_path, ".checkpoint.tmp-k2", 2)
    (tmp_path / ".checkpoint.old-k3").mkdir()  # killed before the first rename
    (tmp_path / ".other.tmp-x").mkdir()  # not this checkpoint's
    saved(tmp_path, 3)
    assert sorted(os.listdir(tmp_path)) == [".other.tmp-x", "checkpoint"]
    assert Checkpoint(tmp_path).manifest["iteration"] == 3


def test_without_checkpoint_resume_takes_the_newest_valid_leftover(tmp_path):
    leftover(tmp_path, ".checkpoint.old-a", 5, mtime=1_000)  # oldest on disk
    newest = leftover(tmp_path, ".checkpoint.tmp-b", 8, mtime=2_000)  # killed between renames
    leftover(tmp_path, ".checkpoint.old-c", 9, manifest='{"format": 1, "iter', mtime=500)
    leftover(tmp_path, ".checkpoint.tmp-d", 9, manifest=False)  # killed while writing
    leftover(tmp_path, ".checkpoint.old-e", 7, mtime=3_000)
    assert find_checkpoint(tmp_path) == newest
    assert Checkpoint(tmp_path).json("a", "x.json") == {"v": 8}


def test_a_damaged_manifest_is_one_error_line_naming_it(tmp_path):
    manifest = saved(tmp_path, 1) / "manifest.json"
    manifest.write_text('{"format": 1, "algo": "pp')
    with pytest.raises(ValueError, match=re.escape(str(manifest))):
        Checkpoint(tmp_path)
    with pytest.raises(SystemExit) as exit:
        main(["eval", str(tmp_path)])
    line = str(exit.value.code)
    assert line.startswith("distrl: error:") and str(manifest) in line and "\n" not in line
    manifest.write_text(json.dumps([1]))  # JSON, but no manifest
    with pytest.raises(ValueError, match=re.escape(str(manifest))):
        Checkpoint(tmp_path)
