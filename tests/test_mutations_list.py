"""docs/mutations.toml cannot rot unnoticed: every mutation still applies to the tree
exactly once, and every test it names exists. A refactor that moves a guarded line must
update its mutation in the same commit (bench/mutations.py would report it stale)."""

import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import mutations  # noqa: E402

MUTATIONS = mutations.load(mutations.LIST)


def test_the_list_is_there():
    assert len(MUTATIONS) >= 70


@pytest.mark.parametrize("m", MUTATIONS, ids=[m["id"] for m in MUTATIONS])
def test_each_mutation_applies_exactly_once_and_changes_the_file(m):
    path = ROOT / m["file"]
    assert path.is_file(), f"{m['id']}: no file {m['file']}"
    found = path.read_text().count(m["old"])
    assert found == 1, (f"{m['id']}: `old` occurs {found} times in {m['file']}; update it in "
                        "docs/mutations.toml with the line it guards")
    assert m["new"] != m["old"]


@pytest.mark.parametrize("m", MUTATIONS, ids=[m["id"] for m in MUTATIONS])
def test_each_mutation_names_tests_that_exist(m):
    args = iter(m["tests"])
    for arg in args:
        if arg == "-k":
            next(args)  # an expression, not a path
            continue
        file, _, node = arg.partition("::")
        assert (ROOT / file).is_file(), f"{m['id']}: no test file {file}"
        name = node.split("[")[0].split("::")[-1]
        if name:
            assert re.search(rf"^\s*def {re.escape(name)}\b", (ROOT / file).read_text(),
                             re.MULTILINE), f"{m['id']}: no test {name} in {file}"
