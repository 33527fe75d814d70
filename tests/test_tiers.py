"""The tiers hold what they promise: every test that docs/reliability.md or
docs/mutations.toml names runs in the fast tier (`make test`), so a new guarantee cannot
land in the slow tier by accident; tests/unit stays pure (no Ray, no training run, no
`distrl` child process)."""

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import mutations  # noqa: E402

NAMED = re.compile(r"tests/[\w/]+\.py(?:::\w+)?")
# What makes a test more than a unit test: a Ray cluster, a training loop, the CLI.
NOT_UNIT = re.compile(r"\bray_local\b|\btwo_nodes\b|\bray\.init\(|"
                      r"main\(\[\s*\"(?:train|eval|export|play)\"|\"-m\",\s*\"distrl\"|"
                      r"\"distrl\",\s*\"(?:train|eval)\"")
# A run's entry point, allowed only where it must raise before anything starts.
TRAINS = re.compile(r"\btrain_(?:ppo|appo|apex|ddppo|league|alphazero)\(")


def named_tests() -> set[str]:
    """The files and node ids the guarantees name (a mutation's ``-k`` narrows a file,
    taken here as the whole file)."""
    named = set(NAMED.findall((ROOT / "docs" / "reliability.md").read_text()))
    for m in mutations.load(mutations.LIST):
        named |= {arg for arg in m["tests"] if NAMED.fullmatch(arg.split("[")[0])}
    return named


def slow_tests(files: set[str]) -> set[str]:
    """Node ids (without parameters) that `-m slow` selects among ``files``."""
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "slow",
                          "-p", "no:cacheprovider", *sorted(files)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode in (0, 5), out.stdout[-3000:] + out.stderr[-3000:]
    return {line.split("[")[0] for line in out.stdout.splitlines() if "::" in line}


def test_every_named_test_is_in_the_fast_tier():
    named = named_tests()
    assert len(named) > 50
    files = {n.split("::")[0] for n in named}
    missing = sorted(f for f in files if not (ROOT / f).is_file())
    assert not missing, f"named but not there: {missing}"
    slow = slow_tests(files)
    in_slow = sorted(n for n in named if any(s == n or s.startswith(n + "::") for s in slow))
    assert not in_slow, (f"these guard a guarantee but are marked slow: {in_slow}; a "
                         "guarantee's test belongs in `make test` (make it cheaper instead)")


def test_the_check_sees_a_slow_test():
    """The check above could pass by collecting nothing: it must see a marked test."""
    slow = slow_tests({"tests/learning/test_ppo_learns.py"})
    assert slow and all(s.startswith("tests/learning/test_ppo_learns.py::") for s in slow)


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
