import os
import sys
import time

import pytest
import torch

# Two cores are shared by Ray, envs and torch: one intra-op thread per process.
torch.set_num_threads(1)
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")


def pytest_collection_modifyitems(items):
    """A test needing Ray says so (`ray`, or a fixture that starts one); `make test`
    runs everything not marked `slow`, `make test-slow` the rest. The costly ones go
    first: two workers that end together waste no core on a long last test. Among the
    Ray tests, those of one kind of cluster run together: a worker that went from the
    shared cluster to a two-node one and back paid a Ray start (seconds) each time."""
    for item in items:
        if {"ray_local", "two_nodes"} & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.ray)
    items.sort(key=lambda item: (not item.get_closest_marker("long"),
                                 not item.get_closest_marker("slow"),
                                 not item.get_closest_marker("ray"), _cluster(item)))


def _cluster(item) -> int:
    """0: the shared cluster (ray_local), or whatever Ray is up; 1: a two-node cluster;
    2: the multi-node module's own."""
    if item.get_closest_marker("multinode") and "two_nodes" not in item.fixturenames:
        return 2
    return 1 if "two_nodes" in getattr(item, "fixturenames", ()) else 0


@pytest.fixture(scope="session", autouse=True)
def _ray_ends_with_the_session():
    """The shared cluster of tests/integration (ray_local) lives until the last test."""
    yield
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


CPUS = 2


@pytest.fixture(scope="module")
def ray_local():
    """The embedded 2-CPU Ray cluster this test process shares across its modules (a
    Ray start costs seconds); started on first use and again after a test shut it down.
    A module that leaves actors holding CPUs would starve the next one: the cluster is
    then shut down, and the next module starts a clean one."""
    ray = pytest.importorskip("ray")
    if not ray.is_initialized():
        ray.init(address="local", num_cpus=CPUS, include_dashboard=False, log_to_driver=False)
    yield ray
    if ray.is_initialized() and not _cpus_free(ray, wait_s=10.0):
        ray.shutdown()


def _cpus_free(ray, wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    while ray.available_resources().get("CPU", 0.0) < CPUS:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


@pytest.fixture(scope="module")
def two_nodes():
    """Two Ray nodes of one CPU each on this machine; yields (head node id, other id)."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(initialize_head=True,  # no dashboard: these tests need no state API
                      head_node_args={"num_cpus": 1, "include_dashboard": False})
    second = cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address)
    yield cluster.head_node.node_id, second.node_id
    ray.shutdown()
    cluster.shutdown()


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
