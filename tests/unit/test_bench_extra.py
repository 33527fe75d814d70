"""A bench run without the `bench` extra stops in one line naming what to install (it
printed an ImportError's traceback, or a trial's CalledProcessError)."""

import runpy
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.append(str(BENCH))  # the benches import their neighbours by name

import _extra  # noqa: E402


@pytest.mark.parametrize(("script", "missing"), [
    ("ppo_cartpole.py", "stable_baselines3"), ("ppo_lstm.py", "sb3_contrib"),
    ("apex_cartpole.py", "stable_baselines3"), ("plot_ppo_cartpole.py", "matplotlib"),
    ("plot_league.py", "matplotlib"), ("league_connect4.py", "ray.rllib")])
def test_a_bench_without_its_extra_names_the_package_and_the_command(script, missing,
                                                                     monkeypatch):
    monkeypatch.setattr(_extra, "_importable", lambda module: module != missing)
    monkeypatch.setattr(sys, "argv", [str(BENCH / script)])
    with pytest.raises(SystemExit) as stopped:
        runpy.run_path(str(BENCH / script), run_name="__main__")
    assert str(stopped.value) == (
        f"{BENCH / script} needs {_extra.PACKAGES[missing]} from the bench extra: pip install "
        "-c constraints.txt -e '.[bench]'  (or: make bench)")


def test_a_module_whose_parent_is_missing_is_missing():
    assert _extra._importable("json") and not _extra._importable("no_such_pkg.sub")
