"""The public API: ``from distrl import NAME`` gives the documented class or
function for every NAME in ``distrl.__all__``, in a fresh interpreter, both before and
after every submodule of distrl has been imported, and no public name equals the last
component of any submodule's name (a submodule named like a public function replaces it
as an attribute of its package once imported: ``train_ddppo`` was a module in a fresh
process that ran the README's DD-PPO example).

Every check runs in a subprocess on the distrl next to this file, so names added later
(Ape-X, the league) are checked too without editing this test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import distrl

ROOT = Path(__file__).resolve().parents[1]

# What one name gives: a class or function, named as exported, defined in a distrl module
# that has it under that name.
DESCRIBE = textwrap.dedent("""
    import inspect, sys

    def describe(name, obj):
        kind = ("module" if inspect.ismodule(obj) else "class" if inspect.isclass(obj)
                else "function" if inspect.isfunction(obj) else type(obj).__name__)
        home = getattr(obj, "__module__", None) or ""
        return {"kind": kind, "name": getattr(obj, "__name__", None), "module": home,
                "defined_there": getattr(sys.modules.get(home), name, None) is obj}
""")

FRESH = DESCRIBE + textwrap.dedent("""
    import json
    name = sys.argv[1]
    ns = {}
    exec(f"from distrl import {name}", ns)
    print(json.dumps(describe(name, ns[name])))
""")

AFTER_ALL = DESCRIBE + textwrap.dedent("""
    import importlib, json, pkgutil
    import distrl

    def imported(names):
        ns = {}
        exec("from distrl import " + ", ".join(names), ns)
        return {n: ns[n] for n in names}

    before = imported(distrl.__all__)
    failed = []
    modules = [m.name for m in pkgutil.walk_packages(distrl.__path__, "distrl.",
                                                     onerror=failed.append)
               if m.name != "distrl.__main__"]
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as err:
            failed.append(f"{name}: {type(err).__name__}: {err}")
    after = imported(distrl.__all__)
    star = {}
    exec("from distrl import *", star)
    print(json.dumps({
        "modules": modules,
        "failed": [str(f) for f in failed],
        "after": {n: describe(n, o) for n, o in after.items()},
        "same_object": {n: after[n] is before[n] and getattr(distrl, n) is before[n]
                        and star.get(n) is before[n] for n in distrl.__all__},
    }))
""")


def run_python(code: str, cwd: Path, *args: str) -> dict:
    """Run ``code`` in a fresh interpreter on this checkout's distrl; its last stdout line
    is JSON."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    out = subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env, capture_output=True,
                         text=True, timeout=300)
    if out.returncode != 0:
        pytest.fail(f"the check's interpreter failed:\n{out.stderr[-4000:]}", pytrace=False)
    return json.loads(out.stdout.strip().splitlines()[-1])


def check_documented(name: str, d: dict) -> None:
    assert d["kind"] in ("class", "function"), (
        f"`from distrl import {name}` gave a {d['kind']} ({d['module'] or d['name']}), "
        "not a class or function: a submodule probably shadows the public name."
    )
    assert d["name"] == name, f"`from distrl import {name}` gave {d['name']!r}"
    assert d["module"].startswith("distrl.") and d["defined_there"], (
        f"{name} should be defined in a distrl module that has it under that name: {d}"
    )


@pytest.fixture(scope="module")
def after_all(tmp_path_factory) -> dict:
    return run_python(AFTER_ALL, tmp_path_factory.mktemp("api"))


def test_all_lists_the_documented_names():
    assert {"PPOConfig", "RunConfig", "train_ppo", "evaluate", "DDPPOConfig",
            "train_ddppo", "ModelConfig", "Callbacks"} <= set(distrl.__all__)


# An interpreter per name: slow tier. test_no_public_name_is_a_submodule_name guards the
# same bug (a submodule shadowing a public name) in the fast tier.
@pytest.mark.slow
@pytest.mark.parametrize("name", distrl.__all__)
def test_fresh_interpreter_imports_the_object(name, tmp_path):
    check_documented(name, run_python(FRESH, tmp_path, name))


def test_every_submodule_imports(after_all):
    assert after_all["failed"] == [], "submodules of distrl that fail to import"
    assert len(after_all["modules"]) > 10, after_all["modules"]


@pytest.mark.parametrize("name", distrl.__all__)
def test_after_every_submodule_the_name_is_the_same_object(name, after_all):
    check_documented(name, after_all["after"][name])
    assert after_all["same_object"][name], (
        f"`from distrl import {name}`, `distrl.{name}` and `from distrl import *` must give "
        "the same object before and after every submodule is imported"
    )


def test_no_public_name_is_a_submodule_name(after_all):
    last = {m.rsplit(".", 1)[-1]: m for m in after_all["modules"]}
    clashes = {n: last[n] for n in distrl.__all__ if n in last}
    assert not clashes, (
        f"public names equal to a submodule's name (the submodule shadows the name once "
        f"imported; rename the module): {clashes}"
    )
