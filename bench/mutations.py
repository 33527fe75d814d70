"""Do the tests catch a broken guarantee? Each mutation in docs/mutations.toml is a small
edit that breaks one guarantee of docs/reliability.md; this applies them one at a time,
runs the tests that guard that guarantee, and puts the file back. A mutation is caught
when its tests fail (pytest exit code 1); passing tests (0) mean a weak test; any other
outcome (a collection error, a timeout) is an error, not a catch.

    python bench/mutations.py [--only ID ...] [--list] [--baseline] [--timeout S]

Prints one JSON line per mutation, then {"mutations", "caught", "tier", "missed",
"errors", "stale", "seconds"}; exits 1 unless every mutation was caught. Only the fast
tier's tests run (``-m "not slow"``). An entry whose ``old``
snippet no longer occurs exactly once in its file is stale: reported, not run.
``--baseline`` runs each distinct set of tests without any mutation: all must pass.

The mutations are made in a scratch copy of the working tree (the files git tracks or
would track), never in it: others may be editing or running it meanwhile.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LIST = ROOT / "docs" / "mutations.toml"
KEYS = ("id", "guarantee", "file", "old", "new", "tests")
TIER = "not slow"
"""Mutations are run against the fast tier (`make test`) only: a test that guards one is
never marked slow (a slow one would be deselected, pytest exits 5: an error, not a catch)."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="ID", help="run only these mutations")
    parser.add_argument("--list", action="store_true", help="list the mutations and stop")
    parser.add_argument("--baseline", action="store_true",
                        help="run each test set unmutated; all must pass")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds for one mutation's tests (default 600)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` cleans up like Ctrl-C
    mutations = selected(load(LIST), args.only)
    if args.list:
        for m in mutations:
            print(f"{m['id']:50} {m['guarantee']}")
        return 0
    with tempfile.TemporaryDirectory(prefix="distrl-mutations-") as tmp:
        tree = scratch_copy(ROOT, Path(tmp))
        if args.baseline:
            return baseline(tree, mutations, args.timeout)
        return mutate_all(tree, mutations, args.timeout)


def load(path: Path) -> list[dict[str, Any]]:
    """The [[mutation]] tables, each checked for its keys; ids unique."""
    mutations = tomllib.loads(path.read_text())["mutation"]
    for m in mutations:
        missing = [k for k in KEYS if k not in m]
        if missing or not all(isinstance(t, str) for t in m.get("tests", [None])):
            sys.exit(f"{path}: mutation {m.get('id', '?')!r} needs {', '.join(KEYS)} "
                     f"(missing {missing}; tests is a list of strings)")
    ids = [m["id"] for m in mutations]
    if len(set(ids)) != len(ids):
        sys.exit(f"{path}: ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}")
    return mutations


def selected(mutations: list[dict[str, Any]], only: list[str] | None) -> list[dict[str, Any]]:
    if not only:
        return mutations
    unknown = sorted(set(only) - {m["id"] for m in mutations})
    if unknown:
        sys.exit(f"no such mutations: {unknown} (see --list)")
    return [m for m in mutations if m["id"] in only]


def scratch_copy(root: Path, into: Path) -> Path:
    """The working tree as it is now (tracked files and untracked ones git does not
    ignore; no caches), copied under ``into``."""
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], capture_output=True, check=True).stdout
    tree = into / "tree"
    for name in filter(None, listed.decode().split("\0")):
        source = root / name
        if source.is_file():  # a tracked file deleted from the tree is not listed twice
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, tree / name)
    return tree


def mutate_all(tree: Path, mutations: list[dict[str, Any]], timeout: float) -> int:
    t0 = time.monotonic()
    results: dict[str, list[str]] = {"caught": [], "missed": [], "error": [], "stale": []}
    for m in mutations:
        record = mutate(tree, m, timeout)
        results[record["result"]].append(m["id"])
        print(json.dumps(record), flush=True)
    print(json.dumps({"mutations": len(mutations), "caught": len(results["caught"]),
                      "tier": "fast", "missed": results["missed"], "errors": results["error"],
                      "stale": results["stale"],
                      "seconds": round(time.monotonic() - t0, 1)}), flush=True)
    return 0 if len(results["caught"]) == len(mutations) else 1


def mutate(tree: Path, m: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Apply ``m``, run its tests, and always put the file back byte for byte."""
    path = tree / m["file"]
    record: dict[str, Any] = {"id": m["id"], "file": m["file"]}
    original = path.read_bytes() if path.is_file() else None
    found = original.decode().count(m["old"]) if original is not None else 0
    if found != 1:
        where = "no such file" if original is None else f"found {found} times"
        return {**record, "result": "stale",
                "why": f"`old` must occur exactly once in {m['file']} ({where}): update "
                       f"{m['id']!r} in docs/mutations.toml"}
    try:
        path.write_bytes(original.decode().replace(m["old"], m["new"]).encode())
        rc, why, seconds = run_tests(tree, m["tests"], timeout)
    finally:
        path.write_bytes(original)
        forget_bytecode(path)
    result = {1: "caught", 0: "missed"}.get(rc, "error")
    return {**record, "result": result, "rc": rc, "seconds": seconds, "why": why}


def forget_bytecode(path: Path) -> None:
    """A .pyc of the mutated source could pass for the restored one (same size, same
    second): remove any a child process wrote despite PYTHONDONTWRITEBYTECODE."""
    for pyc in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
        pyc.unlink(missing_ok=True)


def baseline(tree: Path, mutations: list[dict[str, Any]], timeout: float) -> int:
    t0 = time.monotonic()
    sets = list(dict.fromkeys(tuple(m["tests"]) for m in mutations))
    failed = []
    for tests in sets:
        rc, why, seconds = run_tests(tree, list(tests), timeout)
        if rc != 0:
            failed.append(list(tests))
        print(json.dumps({"tests": list(tests), "result": "passed" if rc == 0 else "failed",
                          "rc": rc, "seconds": seconds, "why": why}), flush=True)
    print(json.dumps({"baseline": len(sets), "passed": len(sets) - len(failed),
                      "failed": failed, "seconds": round(time.monotonic() - t0, 1)}), flush=True)
    return 1 if failed else 0


def run_tests(tree: Path, tests: list[str], timeout: float) -> tuple[int | None, str, float]:
    """pytest's exit code (None after ``timeout``), the line that says why, seconds.
    PYTHONPATH puts the copy first for subprocesses and Ray workers too (the editable
    install points at the real tree); no bytecode is written, so none goes stale."""
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "COLUMNS": "300",  # whole lines
           "PYTHONPATH": os.pathsep.join(filter(None, [str(tree), os.environ.get("PYTHONPATH")]))}
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-m", TIER,
           *tests]
    t0 = time.monotonic()
    # A process group of its own (start_new_session), so that a timeout or Ctrl-C ends
    # its Ray processes with it.
    proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        return None, f"timeout after {timeout:g} s", round(time.monotonic() - t0, 1)
    except BaseException:
        _kill(proc)
        raise
    return proc.returncode, _why(out), round(time.monotonic() - t0, 1)


def _kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _why(out: str) -> str:
    """pytest's FAILED/ERROR summary line, else its last line."""
    lines = [line for line in out.splitlines() if line.strip()]
    failed = [line for line in lines if line.startswith(("FAILED ", "ERROR "))]
    return (failed or lines or [""])[-1][:300]


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit("interrupted: every mutated file was put back")
