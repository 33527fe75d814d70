"""The tiers hold what they promise: every test that docs/reliability.md or
docs/mutations.toml names runs in the fast tier (`make test`), so a new guarantee cannot
land in the slow tier by accident; tests/unit stays pure (no Ray, no training run, no
`distrl` child process)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import mutations  # noqa: E402

NAMED = re.compile(r"(?:tests/[\w/]+/)?test_\w+\.py(?:::\w+)?|(?<![\w/])::test_\w+")
# What makes a test more than a unit test: a Ray cluster, a training loop, the CLI.
NOT_UNIT = re.compile(r"\bray_local\b|\btwo_nodes\b|\bray\.init\(|"
                      r"main\(\[\s*\"(?:train|eval|export|play)\"|\"-m\",\s*\"distrl\"|"
                      r"\"distrl\",\s*\"(?:train|eval)\"")
# A run's entry point, allowed only where it must raise before anything starts.
TRAINS = re.compile(r"\btrain_(?:ppo|appo|apex|ddppo|league|alphazero)\(")


def resolve(name: str) -> str:
    """``test_x.py::t`` as written in a table, with its folder."""
    file, sep, node = name.partition("::")
    if "/" not in file:
        found = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").rglob(file))
        assert len(found) == 1, f"{name}: {len(found)} files of that name"
        file = found[0]
    return file + sep + node


def reliability_tests() -> set[str]:
    """Every test docs/reliability.md names; a bare ``::name`` is in the file named
    before it on its line."""
    named = set()
    for line in (ROOT / "docs" / "reliability.md").read_text().splitlines():
        file = None
        for name in NAMED.findall(line):
            if name.startswith("::"):
                assert file, f"reliability.md: {name} follows no file: {line[:80]}"
                name = file + name
            name = resolve(name)
            file = name.split("::")[0]
            named.add(name)
    return named


@pytest.fixture(scope="module")
def slow() -> set[str]:
    """Node ids (without parameters) that `-m slow` selects: the slow tier."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "slow",
                          "-p", "no:cacheprovider", "tests"],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return {line.split("[")[0] for line in out.stdout.splitlines() if "::" in line}


def in_slow(named: set[str], slow: set[str]) -> list[str]:
    return sorted(n for n in named if any(s == n or s.startswith(n + "::") for s in slow))


def test_the_slow_tier_is_seen(slow):
    """The checks below could pass by collecting nothing: the slow tier has the learning
    runs, and none of the unit tests."""
    assert {s for s in slow if s.startswith("tests/learning/test_ppo_learns.py::")}
    assert not {s for s in slow if s.startswith("tests/unit/")}


def test_every_test_reliability_md_names_is_in_the_fast_tier(slow):
    named = reliability_tests()
    assert len(named) > 40
    missing = sorted(n for n in named if not (ROOT / n.split("::")[0]).is_file())
    assert not missing, f"named but not there: {missing}"
    assert not in_slow(named, slow), (
        f"these guard a guarantee but are marked slow: {in_slow(named, slow)}; a guarantee's "
        "test belongs in `make test` (make it cheaper instead)")


def test_every_test_a_mutation_names_is_in_the_fast_tier(slow):
    """bench/mutations.py runs the fast tier only: a slow test would catch nothing. A
    ``-k`` expression counts as naming every test of its file whose name has one of its
    words."""
    offenders = []
    for m in mutations.load(mutations.LIST):
        args = m["tests"]
        if "-k" in args:
            words = re.findall(r"\w+", args[args.index("-k") + 1].replace(" or ", " "))
            named = {s for s in slow for f in args if s.startswith(f + "::")
                     and any(w in s for w in words if w not in ("and", "not"))}
        else:
            named = set(in_slow(set(args), slow))
        offenders += [f"{m['id']}: {n}" for n in sorted(named)]
    assert not offenders, f"mutations name tests marked slow: {offenders}"


def not_unit(lines: list[str], k: int) -> bool:
    line = lines[k]
    if line.lstrip().startswith("#"):
        return False
    raising = any("pytest.raises" in before for before in lines[max(0, k - 2):k + 1])
    return bool(NOT_UNIT.search(line) or (TRAINS.search(line) and not raising))


def test_unit_tests_start_no_ray_no_run_and_no_cli():
    offenders = [f"{path.relative_to(ROOT)}:{k + 1}: {lines[k].strip()}"
                 for path in sorted((ROOT / "tests" / "unit").glob("*.py"))
                 for lines in [path.read_text().splitlines()]
                 for k in range(len(lines)) if not_unit(lines, k)]
    assert not offenders, ("tests/unit is pure and quick (shared/DESIGN.md); move these to "
                           "tests/integration:\n" + "\n".join(offenders))
