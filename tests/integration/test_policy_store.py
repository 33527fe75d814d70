"""PolicyStore on one node: versions, newest weights, one shared copy, freeing."""

import gc
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import psutil
import pytest
import ray
import torch

from distrl.models.config import ModelConfig
from distrl.store.policy_cache import PolicySpec, flatten_policy
from distrl.store.remote import PolicyReader, head_store, publish
from tests.integration.conftest import kill

pytestmark = pytest.mark.ray

SPEC = PolicySpec(gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2))
BIG = PolicySpec(SPEC.obs_space, SPEC.act_space, ModelConfig(hiddens=(1024, 1024),
                                                             vf_share_layers=True))
OBS = torch.linspace(-1, 1, 8).reshape(2, 4)


def backing(addr: int) -> tuple[str, str, int]:
    """(device, inode, file offset) of the mapping holding ``addr`` in this process."""
    with open("/proc/self/maps") as maps:
        for line in maps:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if lo <= addr < hi:
                return parts[3], parts[4], int(parts[2], 16) + addr - lo
    raise LookupError(hex(addr))


@ray.remote(num_cpus=0)
class Probe:
    """A stand-in env runner: maps policies through its node's store."""

    def __init__(self, head):
        self.reader = PolicyReader(head)

    def act(self, policy_id):
        policy = self.reader.policy(policy_id)
        with torch.no_grad():
            return policy.version, policy(OBS)[0].numpy()

    def act_on(self, policy_id, obs):
        with torch.no_grad():
            return self.reader.policy(policy_id)(obs)[0].numpy()

    def shapes(self, ids):
        """(obs size, distribution-input size) of each policy, acting on its own space."""
        out = []
        for pid in ids:
            policy = self.reader.policy(pid)
            obs = torch.zeros(1, policy.skeleton.obs_dim)
            with torch.no_grad():
                out.append((policy.skeleton.obs_dim, policy(obs)[0].shape[-1]))
        return out

    def refresh(self, ids):
        return self.reader.refresh(ids)

    def backing(self, policy_id):
        return backing(self.reader.policy(policy_id).flat.ctypes.data)

    def uss(self):
        return psutil.Process().memory_full_info().uss

    def map_all(self, ids):
        for pid in ids:
            self.reader.policy(pid)
        return len(self.reader.cache)

    def write_through(self, policy_id):
        """Try in-place writes on a view, in and out of inference mode: what each raised."""
        view = self.reader.policy(policy_id).params["pi.0.weight"]
        raised = []
        for mode in (torch.inference_mode, torch.no_grad):
            for write in (lambda: view.add_(1.0), view.zero_, lambda: view.copy_(view + 1)):
                try:
                    with mode():
                        write()
                    raised.append(None)
                except RuntimeError as e:
                    raised.append(type(e).__name__)
        return raised


@ray.remote(num_cpus=0)
class Publisher:
    """A stand-in learner: publishes a fresh model, returns (version, reference output)."""

    def publish(self, head, policy_id, seed):
        torch.manual_seed(seed)
        model = SPEC.build()
        return publish(head, policy_id, flatten_policy(model), SPEC), reference_output(model)


def plasma_objects() -> int:
    from ray._private.internal_api import memory_summary  # no public API for this count

    return int(re.search(r"(\d+) objects", memory_summary(ray.get_runtime_context().gcs_address,
                                                          stats_only=True)).group(1))


def wait_for(condition, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def reference_output(model):
    with torch.no_grad():
        return model(OBS)[0].numpy()


@pytest.fixture(scope="module")
def head(ray_local):
    return head_store()


def test_publish_then_every_runner_acts_with_the_new_version(head):
    probes = [Probe.remote(head) for _ in range(2)]
    torch.manual_seed(1)
    m0, m1 = SPEC.build(), SPEC.build()
    assert publish(head, "p", flatten_policy(m0), SPEC) == 0
    for version, out in ray.get([p.act.remote("p") for p in probes]):
        assert version == 0
        np.testing.assert_allclose(out, reference_output(m0), rtol=1e-6, atol=1e-6)
    assert publish(head, "p", flatten_policy(m1), SPEC) == 1
    assert ray.get([p.refresh.remote(["p"]) for p in probes]) == [{"p": 1}] * 2
    for version, out in ray.get([p.act.remote("p") for p in probes]):
        assert version == 1
        np.testing.assert_allclose(out, reference_output(m1), rtol=1e-6, atol=1e-6)


def test_heterogeneous_policies_share_one_store(head):
    pendulum = PolicySpec(gym.spaces.Box(-8, 8, (3,), np.float32),
                          gym.spaces.Box(-2, 2, (1,), np.float32), ModelConfig(hiddens=(32,)))
    m = pendulum.build()
    publish(head, "pendulum", flatten_policy(m), pendulum)
    publish(head, "cartpole", flatten_policy(SPEC.build()), SPEC)
    probe = Probe.remote(head)
    # Each id acts with its own architecture: 3-dim obs -> (mean, log_std); 4-dim -> logits.
    assert ray.get(probe.shapes.remote(["pendulum", "cartpole"])) == [(3, 2), (4, 2)]
    obs = torch.ones(1, 3)
    with torch.no_grad():
        expected = m(obs)[0].numpy()
    np.testing.assert_allclose(ray.get(probe.act_on.remote("pendulum", obs)), expected,
                               rtol=1e-6, atol=1e-6)


def test_versions_only_rise(head):
    flat = flatten_policy(SPEC.build())
    assert [publish(head, "v", flat, SPEC) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(ValueError, match="versions only rise"):
        ray.get(head.publish.remote("v", flat, SPEC, 1))
    assert ray.get(head.versions.remote(["v", "unknown"])) == {"v": 2}


# alone: measures processes' memory
@pytest.mark.alone
def test_runners_on_one_node_map_one_shared_copy(head):
    ids = [f"big{i}" for i in range(16)]
    for pid in ids:  # 16 policies of 1.06M parameters: 4.2 MB each, 68 MB in all
        publish(head, pid, flatten_policy(BIG.build()), BIG)
    a, b = Probe.remote(head), Probe.remote(head)
    ray.get([a.act.remote(ids[0]), b.act.remote(ids[0])])  # skeletons built, caches warm
    before = ray.get([a.uss.remote(), b.uss.remote()])
    assert ray.get([a.map_all.remote(ids), b.map_all.remote(ids)]) == [16, 16]
    after = ray.get([a.uss.remote(), b.uss.remote()])
    # Both map the very same pages of the node's shared-memory file ...
    assert ray.get(a.backing.remote(ids[5])) == ray.get(b.backing.remote(ids[5]))
    # ... so mapping 68 MB of weights adds almost nothing private to either runner.
    for x, y in zip(before, after, strict=True):
        assert y - x < 8 * 2**20, f"USS grew by {(y - x) / 2**20:.1f} MiB"


def settled_plasma_objects() -> int:
    """The count once earlier tests' objects are freed (reference counts settle async)."""
    gc.collect()  # this process's references to earlier tests' objects and actors
    counts = [plasma_objects()]
    while len(counts) < 6 or len(set(counts[-6:])) > 1:
        time.sleep(0.4)
        counts.append(plasma_objects())
        assert len(counts) < 100, f"the object count never settles: {counts[-10:]}"
    return counts[-1]


def test_removing_a_policy_frees_its_object(head):
    baseline = settled_plasma_objects()
    probe = Probe.remote(head)
    publish(head, "gone", flatten_policy(SPEC.build()), SPEC)
    ray.get(probe.act.remote("gone"))
    assert wait_for(lambda: plasma_objects() == baseline + 1)
    ray.get(head.remove.remote("gone"))
    assert ray.get(probe.refresh.remote(["gone"])) == {}  # the runner drops its view
    assert wait_for(lambda: plasma_objects() == baseline)  # reference counts settle async
    with pytest.raises(ray.exceptions.RayTaskError, match="not in the policy store"):
        ray.get(probe.act.remote("gone"))


def test_a_removed_id_published_again_keeps_rising(head):
    probe = Probe.remote(head)
    torch.manual_seed(2)
    old, new = SPEC.build(), SPEC.build()
    assert [publish(head, "again", flatten_policy(old), SPEC) for _ in range(3)] == [0, 1, 2]
    assert ray.get(probe.act.remote("again"))[0] == 2  # the runner caches version 2
    ray.get(head.remove.remote("again"))  # ... and does not refresh before the re-publish
    assert publish(head, "again", flatten_policy(new), SPEC) == 3
    assert ray.get(probe.refresh.remote(["again"])) == {"again": 3}
    version, out = ray.get(probe.act.remote("again"))
    assert version == 3
    np.testing.assert_allclose(out, reference_output(new), rtol=1e-6, atol=1e-6)


def test_weights_outlive_their_publisher(head):
    publisher = Publisher.remote()
    version, expected = ray.get(publisher.publish.remote(head, "orphan", 3))
    kill(publisher)
    assert ray.get(Probe.remote(head).act.remote("orphan"))[0] == version
    np.testing.assert_allclose(ray.get(Probe.remote(head).act.remote("orphan"))[1], expected,
                               rtol=1e-6, atol=1e-6)


def test_a_runner_cannot_write_through_to_the_shared_copy(head):
    model = SPEC.build()
    publish(head, "readonly", flatten_policy(model), SPEC)
    vandal, victim = Probe.remote(head), Probe.remote(head)
    raised = ray.get(vandal.write_through.remote("readonly"))
    _, out = ray.get(victim.act.remote("readonly"))  # maps the very same pages
    assert ray.get(vandal.backing.remote("readonly")) == ray.get(victim.backing.remote("readonly"))
    np.testing.assert_allclose(out, reference_output(model), rtol=1e-6, atol=1e-6)
    assert raised == ["RuntimeError"] * 6


OTHER_RUN = """
import json, sys
import gymnasium as gym, numpy as np, ray
from distrl.store.policy_cache import PolicySpec, flatten_policy
from distrl.store.remote import head_store, publish
from tests.integration.conftest import kill
ray.init(address=sys.argv[1], namespace="distrl-other-run", log_to_driver=False)
spec = PolicySpec(gym.spaces.Box(-np.inf, np.inf, (4,), np.float32), gym.spaces.Discrete(2))
head = head_store()
publish(head, "theirs", flatten_policy(spec.build()), spec)
print(json.dumps(ray.get(head.versions.remote())))
"""


def test_each_namespace_has_its_own_head_store(head):
    publish(head, "ours", flatten_policy(SPEC.build()), SPEC)
    other = subprocess.run(  # another run's driver, joining this cluster
        [sys.executable, "-c", OTHER_RUN, ray.get_runtime_context().gcs_address],
        capture_output=True, text=True, timeout=180, cwd=Path(__file__).parents[2])
    assert other.returncode == 0, other.stderr[-3000:]
    assert json.loads(other.stdout.strip().splitlines()[-1]) == {"theirs": 0}
    assert "theirs" not in ray.get(head.versions.remote()) and head_store() == head
