"""The one rule: only distrl.runtime imports Ray, and `import distrl` imports nothing heavy."""

import pkgutil
import subprocess
import sys

import distrl

PURE = sorted(
    m.name for m in pkgutil.walk_packages(distrl.__path__, "distrl.")
    if not m.name.startswith("distrl.runtime") and m.name != "distrl.__main__"
)


def test_every_pure_module_imports_with_ray_blocked():
    assert "distrl.train.ppo" in PURE and "distrl.algos.ppo" in PURE
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
