"""The layout's rules (docs/architecture.md): one folder per algorithm, module names that
say where a traceback points, files a newcomer can read."""

from collections import Counter
from pathlib import Path

import distrl

ROOT = Path(distrl.__file__).parent
BY_DESIGN = {"__init__", "config", "train", "remote"}  # one per algorithm folder
MAX_LINES = 400


def test_no_module_name_repeats_except_the_per_algorithm_ones():
    names = Counter(p.stem for p in ROOT.rglob("*.py"))
    repeated = {n: c for n, c in names.items() if c > 1 and n not in BY_DESIGN}
    assert not repeated, f"module names used more than once: {repeated}"


def test_no_file_is_longer_than_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in ROOT.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split these by concern: {long}"


def test_every_algorithm_has_its_folder_with_config_and_driver():
    for algo in ("ppo", "ddppo", "apex", "league"):
        assert (ROOT / algo / "config.py").is_file() and (ROOT / algo / "train.py").is_file()
