import os
from pathlib import Path

import pytest
import torch

# Two cores are shared by Ray, envs and torch: one intra-op thread per process.
torch.set_num_threads(1)
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")


INTEGRATION = Path(__file__).parent / "integration"


def pytest_collection_modifyitems(items):
    """Integration tests start Ray clusters, time recoveries, kill actors and look at the
    machine's processes: `make test` runs them (marked alone) one at a time, after the rest."""
    for item in items:
        if INTEGRATION in item.path.parents:
            item.add_marker(pytest.mark.alone)


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
        import sys

        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_exit_status[-1])
