import os
import sys

import pytest
import torch

# Two cores are shared by Ray, envs and torch: one intra-op thread per process.
torch.set_num_threads(1)
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")


def pytest_collection_modifyitems(items):
    """A test needing Ray says so (`ray`, or a fixture that starts one); `make test`
    runs everything not marked `slow`, `make test-slow` the rest."""
    for item in items:
        if {"ray_local", "two_nodes"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.ray)


@pytest.fixture(scope="session", autouse=True)
def _ray_ends_with_the_session():
    """The shared cluster of tests/integration (ray_local) lives until the last test."""
    yield
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


@pytest.fixture
def tmp_logdir(tmp_path):
    return str(tmp_path / "run")


# The whole suite once crashed with a segmentation fault after its summary (480 passed),
# in the interpreter's finalisation of native extensions that dozens of in-process Ray
# sessions, torch and the game engines leave behind; make then failed a green run. Once
# pytest has reported, the process exits with pytest's status and skips that finalisation.
_exit_status: list[int] = []


def pytest_sessionfinish(session, exitstatus):
    _exit_status.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    if _exit_status and not hasattr(config, "workerinput"):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_exit_status[-1])
