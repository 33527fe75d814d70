"""Every fenced ```python and ```bash block of README.md and docs/*.md runs as a user
would copy it, with a tiny budget: $DISTRL_MAX_ENV_STEPS caps every run (distrl.loop),
$RAY_ADDRESS is unset and Ray's temp dir is the block's own (Ray starts embedded, never
joining a cluster that another test or process registered on the machine), ``distrl``
is this venv's console script, and the working directory is an empty tmp dir (so
``runs/...`` paths must be made by an earlier line of the same block).

Python blocks run in a fresh interpreter; bash blocks run line by line in one bash
(``set -e``, each logical line announced, so a failure names its markdown line).
README.md is run as a reader follows it: its blocks in order, in one folder (a later block
may use what an earlier one trained), in one shell's state (what its ``source`` and
``export`` lines set carries on), with the venv's ``bin`` on PATH only once README's own
activation line put it there. Each block of docs/ runs on its own, in a folder of its own.

A block that cannot run here (a GPU, a real cluster address, ``make``) is marked by an
HTML comment right before its fence (blank lines between are allowed)::

    <!-- not-run: needs a GPU -->
    ```python
    ...

and is only checked. Every block, run or not, is checked in the fast tier (python with
compile() plus every ``distrl`` name it imports must exist; bash with ``bash -n``); the
runs are the slow tier's (``make test-slow``). One case per block, ids like ``README.md:L33``.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MAX_ENV_STEPS = "2000"
TIMEOUT_S = 300  # per block; a Ray start costs a few seconds of it
BIN = Path(sys.executable).parent  # the venv's: its `distrl` console script comes first

LANGS = {"python": "python", "py": "python", "bash": "bash", "sh": "bash", "shell": "bash"}
FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<lang>[^\s`]*)")
MARKER = re.compile(r"^\s*<!--\s*not-run:\s*(?P<reason>\S.*?)\s*-->\s*$")
LINE_TAG = "@@distrl-docs-line"
HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str  # "python" or "bash"
    code: str
    not_run: str | None  # the marker's reason

    @property
    def id(self) -> str:
        return f"{self.path.relative_to(ROOT)}:L{self.line}"


def parse(path: Path) -> list[Block]:
    """The python and bash blocks of one markdown file; blocks in other languages (json,
    diagrams) are skipped."""
    lines = path.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, indent, start = m["fence"], len(m["indent"]), i
        i += 1
        body = []
        while i < len(lines) and not re.match(rf"^ {{0,3}}{fence[0]}{{{len(fence)},}}\s*$",
                                              lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i])
            i += 1
        i += 1  # the closing fence
        lang = LANGS.get(m["lang"].lower())
        if lang is not None:
            blocks.append(Block(path, start + 1, lang, "\n".join(body) + "\n",
                                marker_before(lines, start)))
    return blocks


def marker_before(lines: list[str], fence: int) -> str | None:
    j = fence - 1
    while j >= 0 and not lines[j].strip():
        j -= 1
    m = MARKER.match(lines[j]) if j >= 0 else None
    return m["reason"] if m else None


BLOCKS = [b for path in DOCS for b in parse(path)]


def example_env(ray_tmp: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    # A plain ray.init() joins the cluster that `ray start` (or ray.cluster_utils, in a
    # test beside this one) named in <temp dir>/ray/ray_current_cluster: a fresh machine
    # has none. Short: Ray's socket paths under it must fit 107 bytes.
    env["RAY_TMPDIR"] = ray_tmp
    env["DISTRL_MAX_ENV_STEPS"] = MAX_ENV_STEPS
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    # The distrl next to these docs, also when the venv's editable install points elsewhere.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def run(args: list[str], cwd: Path, path_has_venv: bool = True) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="distrl-docs-", ignore_cleanup_errors=True) as t:
        env = example_env(t)
        if not path_has_venv:
            env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                          if Path(p) != BIN)
        return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=TIMEOUT_S)


def tail(text: str, n: int = 6000) -> str:
    return text if len(text) <= n else "...\n" + text[-n:]


def logical_lines(code: str) -> list[tuple[int, str]]:
    """(offset in the block, command) per command: backslash continuations and heredoc
    bodies (``<<'EOF'`` ... ``EOF``) joined, blank and comment-only lines dropped."""
    out, pending, first, heredoc_end = [], "", 0, None
    for k, raw in enumerate(code.splitlines()):
        if not pending:
            first = k
            if not raw.strip() or raw.lstrip().startswith("#"):
                continue
        pending += raw + "\n"
        if heredoc_end is not None:
            if raw.strip() == heredoc_end:
                heredoc_end = None
                out.append((first, pending))
                pending = ""
            continue
        opened = HEREDOC.search(raw)
        if opened:
            heredoc_end = opened.group(1)
        elif not raw.endswith("\\"):
            out.append((first, pending))
            pending = ""
    if pending:
        out.append((first, pending))
    return out


def bash_script(block: Block) -> str:
    """The block as one bash script that announces each line (stderr) before running it."""
    parts = ["set -eo pipefail"]
    for offset, cmd in logical_lines(block.code):
        parts.append(f"echo '{LINE_TAG} {block.line + 1 + offset}' >&2")
        parts.append(cmd.rstrip("\n"))
    return "\n".join(parts) + "\n"


def distrl_imports(code: str) -> list[tuple[str, str | None]]:
    """(module, name) for every ``import distrl...`` / ``from distrl... import name``."""
    found = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            found += [(a.name, None) for a in node.names if a.name.split(".")[0] == "distrl"]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module.split(".")[0] == "distrl"):
            found += [(node.module, a.name) for a in node.names]
    return found


def missing_names(names: list[tuple[str, str | None]]) -> list[str]:
    """The (module, name) pairs distrl lacks (in this interpreter: the fast tier starts
    no child for it)."""
    missing = []
    for module, name in names:
        try:
            mod = importlib.import_module(module)
        except ImportError as err:
            missing.append(f"{module} ({err})")
            continue
        if name and name != "*" and not hasattr(mod, name) and (
                importlib.util.find_spec(f"{module}.{name}") is None):
            missing.append(f"{module}.{name}")
    return missing


def check_only(block: Block, tmp_path: Path) -> None:
    if block.lang == "bash":
        out = subprocess.run(["bash", "-n"], cwd=tmp_path, input=block.code,
                             capture_output=True, text=True, timeout=60)
        if out.returncode != 0:
            pytest.fail(f"{block.id}: bash -n:\n{out.stderr}")
        return
    try:
        compile(block.code, block.id, "exec")
    except SyntaxError as err:
        pytest.fail(f"{block.id}: {err}")
    missing = missing_names(distrl_imports(block.code))
    if missing:
        pytest.fail(f"{block.id} imports names distrl lacks: {missing}")


SHELL_STATE = re.compile(r"^\s*(source|\.|export)\s")
"""A bash line whose effect outlives it in a reader's shell (PATH, PYTHONPATH, ...)."""


def run_block(block: Block, tmp_path: Path, shell: tuple[str, ...] = (),
              path_has_venv: bool = True) -> None:
    """One block in ``tmp_path``; a bash block after the ``shell`` lines of earlier ones."""
    if block.lang == "python":
        script = tmp_path / "example.py"
        script.write_text(block.code)
        out = run([sys.executable, script.name], tmp_path, path_has_venv)
        if out.returncode != 0:
            pytest.fail(f"{block.id} (python, exit {out.returncode}):\n"
                        f"{tail(out.stdout, 2000)}\n{tail(out.stderr)}", pytrace=False)
        return
    if not (BIN / "distrl").exists():
        pytest.fail(f"no `distrl` console script in {BIN}: install distrl into the env that "
                    "runs pytest (make setup)")
    out = run(["bash", "-c", "\n".join(shell) + "\n" + bash_script(block)], tmp_path,
              path_has_venv)
    if out.returncode != 0:
        tags = re.findall(rf"^{LINE_TAG} (\d+)$", out.stderr, re.M)
        where = f"{block.path.relative_to(ROOT)}:L{tags[-1]}" if tags else block.id
        stderr = re.sub(rf"^{LINE_TAG} \d+\n", "", out.stderr, flags=re.M)
        pytest.fail(f"{where} (bash, exit {out.returncode}):\n{tail(out.stdout, 2000)}\n"
                    f"{tail(stderr)}", pytrace=False)


def test_docs_have_examples():
    ids = [b.id for b in BLOCKS]
    assert any(i.startswith("README.md") for i in ids) and len(ids) >= 5, ids


def test_every_marker_precedes_a_block():
    """A misspelt or misplaced marker would silently run (or skip) the wrong block."""
    marked = {(b.path, b.line) for b in BLOCKS if b.not_run}
    for path in DOCS:
        lines = path.read_text().splitlines()
        for k, text in enumerate(lines):
            if not (text.lstrip().startswith("<!--") and "not-run" in text):
                continue
            assert MARKER.match(text), f"{path.name}:L{k + 1}: write `<!-- not-run: why -->`"
            j = k + 1
            while j < len(lines) and not lines[j].strip():
                j += 1
            assert (path, j + 1) in marked, (
                f"{path.name}:L{k + 1}: a not-run marker must come right before a ```python "
                "or ```bash fence"
            )


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_example_parses_and_imports_what_exists(block: Block, tmp_path: Path):
    check_only(block, tmp_path)


README = ROOT / "README.md"
DOCS_RUN = [b for b in BLOCKS if not b.not_run and b.path != README]


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.parametrize("block", DOCS_RUN, ids=[b.id for b in DOCS_RUN])
def test_example(block: Block, tmp_path: Path):
    run_block(block, tmp_path)


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.long
def test_readme_runs_in_order_in_one_folder_as_a_reader_would(tmp_path: Path):
    """A fresh clone's folder after README's set-up (its .venv, here the one running
    pytest) where the reader types README's commands one after another: `distrl` is on
    PATH only because README says to activate the venv."""
    (tmp_path / ".venv").symlink_to(BIN.parent, target_is_directory=True)
    shell: list[str] = []
    for block in (b for b in BLOCKS if b.path == README and not b.not_run):
        run_block(block, tmp_path, tuple(shell), path_has_venv=False)
        if block.lang == "bash":
            shell += [line for _, line in logical_lines(block.code) if SHELL_STATE.match(line)]
