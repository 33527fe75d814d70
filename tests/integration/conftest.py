import time

import pytest

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


def kill(actor, timeout_s: float = 30.0) -> None:
    """ray.kill, then wait until the death is known: a call sent right after the kill can
    still be served (the store then held a version the test had killed the publisher to
    prevent)."""
    from distrl.runtime.supervisor import kill_and_wait

    assert not kill_and_wait([actor], timeout_s), (
        f"the killed actor still answers after {timeout_s:g} s")
