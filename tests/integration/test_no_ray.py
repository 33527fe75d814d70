"""The one rule: only distrl/runtime/, an algorithm's Ray roles (modules named
remote.py, and the league's learner actors) and the Ray Tune entry point import Ray,
and `import distrl` imports nothing heavy."""

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import distrl


def may_import_ray(module: str) -> bool:
    return (module.startswith("distrl.runtime") or module.endswith(".remote")
            or module in ("distrl.league.learners", "distrl.tune"))


PURE = sorted(
    m.name for m in pkgutil.walk_packages(distrl.__path__, "distrl.")
    if not may_import_ray(m.name) and m.name != "distrl.__main__"
)


def test_every_pure_module_imports_with_ray_blocked():
    assert "distrl.ppo.train" in PURE and "distrl.ppo.config" in PURE
    assert "distrl.apex.remote" not in PURE and "distrl.runtime.supervisor" not in PURE
    code = "import sys; sys.modules['ray'] = None\n" + "".join(f"import {m}\n" for m in PURE)
    subprocess.run([sys.executable, "-c", code], check=True)


def test_import_distrl_does_not_import_ray_or_torch():
    code = "import sys, distrl; assert 'ray' not in sys.modules and 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_in_process_training_never_imports_ray(tmp_path):
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "from distrl import PPOConfig, RunConfig, train_ppo\n"
        "r = train_ppo(PPOConfig(train_batch_size=64, minibatch_size=32, num_epochs=1,\n"
        "                        num_env_runners=0, num_envs_per_env_runner=2),\n"
        f"    RunConfig(max_env_steps=128, logdir={str(tmp_path)!r}, progress=False))\n"
        "assert r['env/steps_total'] >= 128\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_ray_is_imported_only_in_runtime_and_remote_modules():
    """Also the imports inside functions, which the test above never executes."""
    root = Path(distrl.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        module = ".".join(("distrl", *path.relative_to(root).with_suffix("").parts))
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n == "ray" or n.startswith("ray.") for n in names) and not may_import_ray(
                    module):
                offenders.append(f"{module}:{node.lineno}")
    assert not offenders, f"Ray imported outside its modules: {offenders}"
