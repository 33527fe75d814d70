
"""Two Ray nodes on this machine: each node gets its own store and its own copy."""

import numpy as np
import pytest
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from distrl.store.policy_cache import flatten_policy
from distrl.store.remote import head_store, publish
from tests.integration.conftest import kill
from tests.integration.test_policy_store import SPEC, Probe, Publisher, reference_output

pytestmark = [pytest.mark.ray, pytest.mark.multinode]


def on(node_id):
    return NodeAffinitySchedulingStrategy(node_id, soft=False)


@pytest.mark.slow
def test_each_node_reads_through_its_own_store_and_copy(two_nodes):
    head_node, other_node = two_nodes
    head = head_store()
    model = SPEC.build()
    publish(head, "p", flatten_policy(model), SPEC)
    near = Probe.options(scheduling_strategy=on(head_node)).remote(head)
    far = Probe.options(scheduling_strategy=on(other_node)).remote(head)
    ref = ray.get(head.latest.remote(["p"]))["p"][1][0]
    assert ray.experimental.get_object_locations([ref])[ref]["node_ids"] == [head_node]
    for version, out in ray.get([near.act.remote("p"), far.act.remote("p")]):
        assert version == 0
        np.testing.assert_allclose(out, reference_output(model), rtol=1e-6, atol=1e-6)
    # Two stores, one per node; the far runner's reads pulled one copy to its node.
    far_store = ray.get(head.store_for.remote(other_node))
    assert ray.get([head.node_id.remote(), far_store.node_id.remote()]) == [head_node, other_node]
    assert sorted(ray.experimental.get_object_locations([ref])[ref]["node_ids"]) == sorted(
        [head_node, other_node])
    assert ray.get(near.backing.remote("p"))[1] != ray.get(far.backing.remote("p"))[1]
    # A new version published on the head reaches the far node through its store.
    publish(head, "p", flatten_policy(SPEC.build()), SPEC)
    assert ray.get(far.refresh.remote(["p"])) == {"p": 1}


def test_weights_published_on_a_far_node_outlive_their_publisher(two_nodes):
    head_node, other_node = two_nodes
    head = head_store()
    publisher = Publisher.options(scheduling_strategy=on(other_node)).remote()
    version, expected = ray.get(publisher.publish.remote(head, "far", 5))
    kill(publisher)
    near = Probe.options(scheduling_strategy=on(head_node)).remote(head)
    got, out = ray.get(near.act.remote("far"))
    assert got == version
    np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6)


def test_lost_stores_are_made_again_on_their_nodes_and_readers_wait_for_them(two_nodes):
    """A RunStore's far follower that dies is dropped by the head (a publish goes on) and
    made again, filled from the head, when its reader asks; a head that dies (its
    follower with it) is rebuilt by the driver with the newest weights."""
    from distrl.runtime.supervisor import Restarts
    from distrl.store.remote import RunStore

    head_node, other_node = two_nodes
    store = RunStore(Restarts("policy_store", 3))
    try:
        store.publish("p", flatten_policy(SPEC.build()), SPEC, 0, block=True)
        far = Probe.options(scheduling_strategy=on(other_node)).remote(store.name)
        assert ray.get(far.act.remote("p"))[0] == 0
        follower = ray.get(store.head.store_for.remote(other_node))
        kill(follower)
        newer = SPEC.build()
        store.publish("p", flatten_policy(newer), SPEC, 1, block=True)
        assert ray.get(far.refresh.remote(["p"])) == {"p": 1}  # the cheap check, as runners do
        version, out = ray.get(far.act.remote("p"))
        assert version == 1
        np.testing.assert_allclose(out, reference_output(newer), rtol=1e-6, atol=1e-6)
        again = ray.get(store.head.store_for.remote(other_node))
        assert again != follower and ray.get(again.node_id.remote()) == other_node
        assert store.metrics() == {"faults/restarts/policy_store": 0}  # the head lived
        kill(store.head)
        store.ensure()
        assert ray.get(store.head.node_id.remote()) == head_node
        assert store.metrics() == {"faults/restarts/policy_store": 1}
        assert ray.get(far.refresh.remote(["p"])) == {"p": 1}
        version, out = ray.get(far.act.remote("p"))
        assert version == 1
        np.testing.assert_allclose(out, reference_output(newer), rtol=1e-6, atol=1e-6)
    finally:
        store.close()
