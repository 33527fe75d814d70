import pytest


@pytest.fixture(scope="module")
def ray_local():
    """One embedded 2-CPU Ray cluster per test module (the two-node test makes its own)."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
