"""Placement groups on a one-node, 2-CPU local Ray: what can never be placed is one line at
once, what cannot be placed now is one line after the timeout, and a replaced actor goes
back into its placement group."""

import subprocess
import sys
import time

import pytest
import ray

from distrl.runtime.placement import Placement, bundle_of
from distrl.runtime.supervisor import Fault, Supervisor

pytestmark = pytest.mark.ray


def test_bundles_take_cpus_and_gpus_and_drop_zeros():
    assert bundle_of({"num_cpus": 0.5}) == {"CPU": 0.5}
    assert bundle_of({"num_cpus": 1, "num_gpus": 0.25}) == {"CPU": 1.0, "GPU": 0.25}
    assert bundle_of({"num_cpus": 0}) == {}


@pytest.mark.parametrize("resources, size, strategy, says", [
    ({"num_cpus": 3}, 1, "PACK", "no node is that big"),
    ({"num_cpus": 1}, 2, "STRICT_SPREAD", "STRICT_SPREAD needs 2 such nodes, the cluster has 1"),
    ({"num_cpus": 1.5}, 2, "STRICT_PACK", "STRICT_PACK needs {'CPU': 3.0} on one node"),
    ({"num_cpus": 0}, 2, "SPREAD", "ask for no CPUs or GPUs"),
])
@pytest.mark.slow
def test_what_can_never_be_placed_is_refused_at_once(ray_local, resources, size, strategy, says):
    t0 = time.monotonic()
    with pytest.raises(ValueError, match=says.replace("{", r"\{").replace("}", r"\}")):
        Placement("env_runners", resources, size, strategy)
    assert time.monotonic() - t0 < 5
    assert not [g for g in ray.util.placement_group_table().values() if g["state"] != "REMOVED"]


@pytest.mark.slow
def test_what_cannot_be_placed_now_fails_after_the_timeout(ray_local):
    held = Placement("others", {"num_cpus": 2}, 1, "PACK")  # another job holds both CPUs
    try:
        with pytest.raises(RuntimeError, match=r"could not place 1 env_runners .* within 1 s"):
            Placement("env_runners", {"num_cpus": 1}, 1, "PACK", timeout_s=1)
    finally:
        held.remove()


class Probe:
    def group(self) -> str | None:
        return ray.get_runtime_context().get_placement_group_id()


@pytest.mark.slow
def test_a_replaced_actor_goes_back_into_its_bundle(ray_local):
    sup = Supervisor("probes", Probe, lambda i, r: {}, 2, max_restarts=1, call_timeout_s=30,
                     resources={"num_cpus": 0.5}, placement_strategy="PACK")
    try:
        group = sup.placement.group.id.hex()
        assert ray.get([a.group.remote() for a in sup.actors]) == [group, group]
        sup.replace(1, Fault("died: test", True))
        assert ray.get(sup.actors[1].group.remote()) == group
    finally:
        sup.close()
    assert ray.util.placement_group_table()[group]["state"] == "REMOVED"


@pytest.mark.slow
def test_cli_asking_for_more_nodes_than_there_are_is_one_line(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "distrl", "train", "ppo", "--num-env-runners", "2",
         "--placement-strategy", "STRICT_SPREAD", "--logdir", str(tmp_path)],
        capture_output=True, text=True, timeout=300)
    assert out.returncode != 0
    assert out.stderr.strip().splitlines()[-1].startswith("distrl: error: cannot place 2 "
                                                         "env_runners")
    assert "Traceback" not in out.stderr
