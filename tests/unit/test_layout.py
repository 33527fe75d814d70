"""The layout's rules (docs/architecture.md): one folder per algorithm, imports only
downward through the floors and never in a cycle, module names that say where a
traceback points, files a newcomer can read."""

import ast
import re
from collections import Counter
from pathlib import Path

import distrl
from distrl.registry import ALGORITHMS

ROOT = Path(distrl.__file__).parent
BY_DESIGN = {"__init__", "config", "train", "remote", "loss"}  # one per algorithm folder
MAX_LINES = 400
ALGORITHM_FOLDERS = sorted({a.driver.split(".")[1] for a in ALGORITHMS.values()})
FLOORS = ["envs", "models", "core", "store", "runtime", "games", "algorithms", "tuned", "cli"]
"""Lowest first; a module may import from its own floor and those below."""
TOP_LEVEL = {"registry": "tuned", "tuned": "tuned", "cli": "cli", "cli_train": "cli",
             "__main__": "cli", "tune": "cli", "policy": "tuned", "agent": "tuned",
             "export": "cli", "plot": "cli", "cli_help": "cli"}


def floor(module: str) -> int:
    """The floor of ``distrl.<part>...``; a ValueError for a part no floor declares."""
    part = module.split(".")[1]
    name = "algorithms" if part in ALGORITHM_FOLDERS else TOP_LEVEL.get(part, part)
    return FLOORS.index(name)


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Every distrl module's distrl imports, those inside functions too."""
    graph = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts == ("__init__",):
            continue  # the package's lazy public names, imported on first use
        module = ".".join(("distrl", *parts)).removesuffix(".__init__")
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            deps |= {n for n in names if n.startswith("distrl.")}
        graph[module] = deps - {module}
    return graph


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return [f"{m} -> {d}" for m, deps in graph.items() for d in sorted(deps)
            if floor(d) > floor(m)]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle through each back edge of a depth-first walk (none: a DAG)."""
    found, state, path = [], {}, []

    def visit(m: str) -> None:
        state[m] = "open"
        path.append(m)
        for d in sorted(graph.get(m, ())):
            if state.get(d) == "open":
                found.append([*path[path.index(d):], d])
            elif d not in state:
                visit(d)
        path.pop()
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m)
    return found


def test_every_module_sits_on_a_declared_floor():
    unplaced = []
    for m in import_graph():
        try:
            floor(m)
        except ValueError:
            unplaced.append(m)
    assert not unplaced, f"declare these folders' floor in FLOORS: {unplaced}"


def test_imports_only_go_down_the_floors():
    assert upward_imports(import_graph()) == []


def test_no_import_cycle():
    assert cycles(import_graph()) == []


def test_the_checks_see_an_upward_import_and_a_cycle():
    graph = {"distrl.core.loop": {"distrl.ppo.train"}, "distrl.ppo.train": {"distrl.core.loop"}}
    assert upward_imports(graph) == ["distrl.core.loop -> distrl.ppo.train"]
    assert cycles(graph) == [["distrl.core.loop", "distrl.ppo.train", "distrl.core.loop"]]


def test_no_module_name_repeats_except_the_per_algorithm_ones():
    names = Counter(p.stem for p in ROOT.rglob("*.py"))
    repeated = {n: c for n, c in names.items() if c > 1 and n not in BY_DESIGN}
    assert not repeated, f"module names used more than once: {repeated}"


def test_no_file_is_longer_than_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in ROOT.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split these by concern: {long}"


def test_every_algorithm_has_its_folder_with_config_driver_and_readme():
    assert {"ppo", "ddppo", "apex", "league", "alphazero"} <= set(ALGORITHM_FOLDERS)
    for algo in ALGORITHM_FOLDERS:
        for name in ("config.py", "train.py", "README.md"):
            assert (ROOT / algo / name).is_file(), f"{algo}/{name} is missing"


def architecture_map() -> dict[str, set[str]]:
    """docs/architecture.md's map of distrl/: package folder ("" for the top level) ->
    the modules it names there."""
    text = (ROOT.parent / "docs" / "architecture.md").read_text()
    block = text.split("```\ndistrl/\n", 1)[1].split("```", 1)[0]
    named: dict[str, set[str]] = {"": set()}
    package = ""
    for line in block.splitlines():
        if m := re.match(r"^  (\w+)/", line):
            package = m.group(1)
            named.setdefault(package, set())
        elif m := re.match(r"^  (\w[\w, .]*?\.py)\b", line):
            package = ""
            named[""].update(re.findall(r"\w+\.py", m.group(1)))
        elif m := re.match(r"^    (\w[\w, .]*?\.py)\b", line):
            named[package].update(re.findall(r"\w+\.py", m.group(1)))
    return named


def test_the_architecture_map_names_every_package_and_module():
    named = architecture_map()
    missing = []
    for path in sorted(ROOT.iterdir()):
        if path.is_dir() and (path / "__init__.py").is_file():
            missing += [f"{path.name}/"] if path.name not in named else [
                f"{path.name}/{f.name}" for f in sorted(path.glob("*.py"))
                if f.name != "__init__.py" and f.name not in named[path.name]]
        elif path.suffix == ".py" and path.name != "__init__.py" and path.name not in named[""]:
            missing.append(path.name)
    assert missing == [], f"docs/architecture.md's map lacks {missing}"
