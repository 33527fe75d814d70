import pytest


@pytest.fixture(scope="session")
def ray_local():
    """One embedded 2-CPU Ray cluster for the whole integration tier."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
