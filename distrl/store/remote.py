"""PolicyStore: one actor per node holding, per policy id, the newest version, the
ObjectRef of its weights (one flat float32 buffer, put once) and its PolicySpec.

Ray keeps one shared-memory copy of an object per node that reads it, and runners map
it without copying (distrl.store.policy_cache), so a league of P policies costs each node P
buffers, not P x runners (RLlib issue #21459). The store on the publisher's node is the
head: publishes go to it, and it forwards them to the other nodes' stores, which it
creates on demand, pinned to their node, when a runner there first asks. The head owns
every weight object (they outlive their publisher) and there is one head per Ray
namespace, so runs sharing a cluster do not see each other's policies.
Model: Sample Factory's ParameterServer and its "is it newer?" check.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from distrl.store.policy_cache import CachedPolicy, PolicyCache, PolicySpec

HEAD_NAME = "distrl_policy_store_head"
STORE_TIMEOUT_S = 120.0
"""The longest a store call may take; stores answer in milliseconds."""
Entry = tuple[int, list[ray.ObjectRef], PolicySpec]  # (version, [weights ref], spec)


@ray.remote(num_cpus=0)
class PolicyStore:
    """Versions and weight refs of every policy; a ref is boxed in a list so that Ray
    passes the reference itself instead of fetching the weights into this actor."""

    def __init__(self, entries: dict[str, Entry] | None = None,
                 removed: dict[str, int] | None = None):
        self._entries: dict[str, Entry] = dict(entries or {})
        # Tombstones: the last version of each removed id, so that an id published again
        # goes on rising and a runner still holding an old version sees the new one as newer.
        self._removed: dict[str, int] = dict(removed or {})
        self._followers: dict[str, Any] = {}  # node id -> store, for the head only

    def publish(self, policy_id: str, flat: np.ndarray, spec: PolicySpec,
                version: int | None = None) -> int:
        """Own a copy of new weights; returns their version (the last one + 1 by default).

        The store puts the weights itself because Ray frees an object when its owner dies,
        and a publisher (a learner) may die while its frozen snapshots still play in the
        league; Ray >= 2.56 cannot hand an object to another owner (ray.put's ``_owner``
        is gone). A large ``flat`` reaches this call through shared memory and is freed
        when it returns, leaving one copy, the store's; its publisher keeps none.
        """
        version = self._next_version(policy_id, version)  # refuse before putting
        return self.replicate(policy_id, [ray.put(flat)], spec, version)

    def replicate(self, policy_id: str, weights: list[ray.ObjectRef], spec: PolicySpec,
                  version: int | None = None) -> int:
        """Record weights that someone owns: the head (its own publishes, and its
        followers') or the driver (league snapshots, which outlive the store)."""
        version = self._next_version(policy_id, version)
        self._entries[policy_id] = (version, weights, spec)
        self._removed.pop(policy_id, None)
        # Wait for the other nodes' stores, so that a returned version is visible on every
        # node (they never call back into the head, so this cannot deadlock).
        wait([s.replicate.remote(policy_id, weights, spec, version)
              for s in self._followers.values()], "replicate a publish")
        return version

    def remove(self, policy_id: str) -> None:
        """Forget a policy but not its version; its weights are freed once no runner holds a
        view of them."""
        entry = self._entries.pop(policy_id, None)
        if entry is not None:
            self._removed[policy_id] = entry[0]
        wait([s.remove.remote(policy_id) for s in self._followers.values()],
             "replicate a removal")

    def versions(self, policy_ids: list[str] | None = None) -> dict[str, int]:
        """The cheap check: newest version per known id (unknown ids are left out)."""
        ids = self._entries if policy_ids is None else policy_ids
        return {pid: self._entries[pid][0] for pid in ids if pid in self._entries}

    def latest(self, policy_ids: list[str]) -> dict[str, Entry]:
        return {pid: self._entries[pid] for pid in policy_ids if pid in self._entries}

    def _next_version(self, policy_id: str, version: int | None) -> int:
        """``version``, or the last one + 1, checked to be above every earlier version of
        the id, removed ones included."""
        last = self._entries[policy_id][0] if policy_id in self._entries else (
            self._removed.get(policy_id, -1))
        version = last + 1 if version is None else version
        if version <= last:
            raise ValueError(f"version {version} of policy {policy_id!r} is not newer than "
                             f"{last}: versions only rise.")
        return version

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()

    def store_for(self, node_id: str) -> Any:
        """The store of ``node_id``, created (pinned to that node) on first use."""
        if node_id == ray.get_runtime_context().get_node_id():
            return ray.get_runtime_context().current_actor
        if node_id not in self._followers:
            self._followers[node_id] = PolicyStore.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            ).remote(self._entries, self._removed)
        return self._followers[node_id]


def wait(refs: Any, what: str) -> Any:
    """ray.get with STORE_TIMEOUT_S: a store that does not answer is named, not waited
    for forever."""
    try:
        return ray.get(refs, timeout=STORE_TIMEOUT_S)
    except ray.exceptions.GetTimeoutError:
        raise RuntimeError(f"the policy store did not {what} within {STORE_TIMEOUT_S:g} s: "
                           "its node may be lost or out of resources (ray status).") from None


def head_store() -> Any:
    """The head store of the current Ray namespace, made on this process's node if needed.

    One head per namespace, not per cluster: a driver and the actors it creates share its
    job's namespace (init_ray gives each run its own; a bare ray.init() an anonymous one),
    so two runs on one cluster never see or overwrite each other's policies. Drivers that
    should share a league pass the same ``ray.init(namespace=...)``.
    """
    context = ray.get_runtime_context()
    return PolicyStore.options(
        name=HEAD_NAME, namespace=context.namespace, get_if_exists=True,
        scheduling_strategy=NodeAffinitySchedulingStrategy(context.get_node_id(), soft=False),
    ).remote()


def own_store() -> Any:
    """A head store of the caller's own, on this node: unnamed, so no other run sees it,
    even one in the same namespace (Ray Tune's trials share their driver's). Its followers
    and weights go with it when the caller kills it or ends."""
    node_id = ray.get_runtime_context().get_node_id()
    return PolicyStore.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)).remote()


def stop_head_store(head: Any, timeout_s: float = 30.0) -> None:
    """Kill the head store (its followers share its fate) and wait until its name is
    free, so that the next head_store() of this namespace starts a fresh one instead of
    finding the dying one."""
    ray.kill(head)
    namespace = ray.get_runtime_context().namespace
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get_actor(HEAD_NAME, namespace=namespace)
        except ValueError:
            return
        time.sleep(0.05)
    raise RuntimeError(f"the policy store {HEAD_NAME!r} did not stop within {timeout_s} s.")


def publish(head: Any, policy_id: str, flat: np.ndarray, spec: PolicySpec,
            version: int | None = None) -> int:
    """Hand the weights to the head store, which owns them from then on (they outlive
    this process); returns the version (``version``, or the last one + 1)."""
    return wait(head.publish.remote(policy_id, flat, spec, version), f"publish {policy_id!r}")


class PolicyReader:
    """Runner side: this node's store plus a PolicyCache of zero-copy views."""

    def __init__(self, head: Any, max_cached_policies: int = 64):
        node_id = ray.get_runtime_context().get_node_id()
        self.store = wait(head.store_for.remote(node_id), "find this node's store")
        self.cache = PolicyCache(max_cached_policies)

    def refresh(self, policy_ids: list[str]) -> dict[str, int]:
        """One round trip to compare versions; a second, and the mapping of new buffers,
        only for policies that changed. Removed policies are dropped from the cache."""
        versions = wait(self.store.versions.remote(policy_ids), "list versions")
        for pid in policy_ids:
            if pid not in versions:
                self.cache.drop(pid)
        stale = self.cache.stale(versions)
        if stale:
            entries = wait(self.store.latest.remote(stale), "hand out new weights")
            flats = wait([box[0] for _, box, _ in entries.values()], "map new weights")
            for (pid, (version, _, spec)), flat in zip(entries.items(), flats, strict=True):
                self.cache.put(pid, version, spec, flat)
        return versions

    def newer(self, policy_id: str, version: int) -> tuple[int, np.ndarray] | None:
        """The newest version of one policy and its buffer when newer than ``version``,
        else None: one round trip when nothing changed. Not cached, for a runner that
        copies the weights into a module of its own."""
        latest = wait(self.store.versions.remote([policy_id]), "list versions")
        if latest.get(policy_id, -1) <= version:
            return None
        entry = wait(self.store.latest.remote([policy_id]), "hand out new weights")[policy_id]
        return entry[0], wait(entry[1][0], "map new weights")

    def policy(self, policy_id: str) -> CachedPolicy:
        """A policy to act with, mapped first if this runner has not seen it yet."""
        if policy_id not in self.cache:
            self.refresh([policy_id])
        if policy_id not in self.cache:
            raise KeyError(f"policy {policy_id!r} is not in the policy store; publish it first.")
        return self.cache.get(policy_id)
