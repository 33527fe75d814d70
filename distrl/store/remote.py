"""PolicyStore: one actor per node holding, per policy id, the newest version, the
ObjectRef of its weights (one flat float32 buffer, put once) and its PolicySpec.

Ray keeps one shared-memory copy of an object per node that reads it, and runners map
it without copying (distrl.store.policy_cache), so a league of P policies costs each node P
buffers, not P x runners (RLlib issue #21459). The store on the publisher's node is the
head: publishes go to it, and it forwards them to the other nodes' stores, which it
creates on demand, pinned to their node, when a runner there first asks. The head owns
every weight object (they outlive their publisher) and there is one head per Ray
namespace, so runs sharing a cluster do not see each other's policies.

A store that dies is rebuilt on its node by its driver: the league's (DistributedLearners.
heal) is refilled by its learners and the driver's frozen snapshots; a RunStore (APPO's)
from the newest weights its driver published, while its readers wait for it by name.
Model: Sample Factory's ParameterServer and its "is it newer?" check.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import numpy as np
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from distrl.store.policy_cache import CachedPolicy, PolicyCache, PolicySpec

HEAD_NAME = "distrl_policy_store_head"
STORE_TIMEOUT_S = 120.0
"""The longest a store call may take; stores answer in milliseconds."""
REBUILD_WAIT_S = 60.0
"""How long a reader of a rebuildable store (RunStore) waits for a dead one's successor."""
Entry = tuple[int, list[ray.ObjectRef], PolicySpec]  # (version, [weights ref], spec)
Served = tuple[int, np.ndarray, PolicySpec]  # (version, flat weights, spec): a refill
STORE_LOST = (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError)
"""What a call to a dead store raises: the actor's death, or the loss of the weights it
owned (freed with it)."""


@ray.remote(num_cpus=0)
class PolicyStore:
    """Versions and weight refs of every policy; a ref is boxed in a list so that Ray
    passes the reference itself instead of fetching the weights into this actor."""

    def __init__(self, entries: dict[str, Entry] | None = None,
                 removed: dict[str, int] | None = None,
                 refill: dict[str, Served] | None = None):
        self._entries: dict[str, Entry] = dict(entries or {})
        # A rebuilt store owns copies of what its predecessor served before anyone can
        # find it by name, so no reader ever sees it empty.
        for pid, (version, flat, spec) in (refill or {}).items():
            self._entries[pid] = (version, [ray.put(flat)], spec)
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
        self._to_followers("replicate a publish", "replicate", policy_id, weights, spec,
                           version)
        return version

    def remove(self, policy_id: str) -> None:
        """Forget a policy but not its version; its weights are freed once no runner holds a
        view of them."""
        entry = self._entries.pop(policy_id, None)
        if entry is not None:
            self._removed[policy_id] = entry[0]
        self._to_followers("replicate a removal", "remove", policy_id)

    def _to_followers(self, what: str, method: str, *args: Any) -> None:
        """Call every other node's store; one that died is forgotten (store_for makes
        its node a new one, filled from this store, when a runner there asks again)."""
        calls = {node: getattr(s, method).remote(*args) for node, s in self._followers.items()}
        for node, ref in calls.items():
            try:
                wait(ref, what)
            except ray.exceptions.RayActorError:
                del self._followers[node]

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
        if node_id in self._followers and not alive(self._followers[node_id]):
            del self._followers[node_id]  # rebuilt below, filled from this store
        if node_id not in self._followers:
            self._followers[node_id] = PolicyStore.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            ).remote(self._entries, self._removed)
        return self._followers[node_id]


def alive(store: Any) -> bool:
    """Whether a store answers (a dead one answers at once, with its death)."""
    try:
        ray.get(store.node_id.remote(), timeout=STORE_TIMEOUT_S)
        return True
    except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
        return False


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


def stop_head_store(head: Any, timeout_s: float = 30.0, name: str = HEAD_NAME) -> None:
    """Kill a head store (its followers share its fate) and wait until its name is
    free, so that the next store of that name in this namespace starts fresh instead
    of finding the dying one."""
    ray.kill(head)
    namespace = ray.get_runtime_context().namespace
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            ray.get_actor(name, namespace=namespace)
        except ValueError:
            return
        time.sleep(0.05)
    raise RuntimeError(f"the policy store {name!r} did not stop within {timeout_s} s.")


class RunStore:
    """Driver side of a run's own head store, rebuilt when it dies (APPO's).

    The store lives on the driver's node under a name no other run uses (two runs in one
    namespace, as Ray Tune's trials are, never meet), so that readers find its successor
    by that name (PolicyReader waits for it). The driver keeps the newest weights it
    published of every policy, one flat array each, and a rebuilt store starts with them.
    ``restarts`` counts the rebuilds: a runtime.supervisor.Restarts (count, report and
    metrics, under the key "policy_store"), given by the caller (this floor is below it).
    """

    PING_EVERY_S = 1.0

    def __init__(self, restarts: Any):
        self.name = f"distrl_policy_store_{uuid.uuid4().hex[:12]}"
        self.restarts = restarts
        self.served: dict[str, Served] = {}
        self.head = self._start()
        self._publishing: ray.ObjectRef | None = None
        self._ping: tuple[ray.ObjectRef, float] | None = None
        self._answered = time.monotonic()

    def _start(self) -> Any:
        node_id = ray.get_runtime_context().get_node_id()
        return PolicyStore.options(
            name=self.name,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        ).remote(refill=self.served)

    def publish(self, policy_id: str, flat: np.ndarray, spec: PolicySpec, version: int,
                block: bool = False) -> None:
        """Hand ``version`` to the store without waiting for it (``block``: and wait);
        the previous publish is waited for first (one driver's calls arrive in order).
        A store found dead is rebuilt, holding these weights."""
        self.served[policy_id] = (version, flat, spec)
        if self._publishing is not None and not self._settle(self._publishing, "publish"):
            return  # rebuilt: the new store holds this version already
        self._publishing = self.head.publish.remote(policy_id, flat, spec, version)
        if block:
            self._settle(self._publishing, "publish")

    def check(self) -> None:
        """Rebuild the store if it died or hangs, without blocking: a ping at most every
        PING_EVERY_S, whose answer (or death) a later check reads."""
        now = time.monotonic()
        if self._ping is None:
            if now - self._answered >= self.PING_EVERY_S:
                self._ping = (self.head.node_id.remote(), now)
            return
        ref, sent = self._ping
        if ray.wait([ref], timeout=0)[0]:
            self._ping = None
            self._settle(ref, "answer")
        elif now - sent > STORE_TIMEOUT_S:
            self._ping = None
            self.rebuild(f"hung: no answer within {STORE_TIMEOUT_S:g} s")

    def ensure(self) -> None:
        """Rebuild the store now if it is dead (before starting a runner that reads it)."""
        if not alive(self.head):
            self.rebuild("died")

    def _settle(self, ref: ray.ObjectRef, what: str) -> bool:
        """Wait for a store call; False when the store had died or hung and was rebuilt."""
        try:
            wait(ref, what)
        except ray.exceptions.RayTaskError:
            raise  # the store raised (a version that does not rise): a bug, not a fault
        except ray.exceptions.RayActorError:
            self.rebuild("died")
            return False
        except RuntimeError:  # wait's: no answer within STORE_TIMEOUT_S
            self.rebuild(f"hung: no answer within {STORE_TIMEOUT_S:g} s")
            return False
        self._answered = time.monotonic()
        return True

    def rebuild(self, why: str) -> None:
        """A new store on this node, under the same name, holding the newest weights of
        every policy served; counted as a restart (once max_restarts are spent, the run
        stops with one line)."""
        what = f"the policy store {why}"
        self.restarts.count("policy_store", what, "rebuilt")
        self._publishing = self._ping = None
        try:
            stop_head_store(self.head, name=self.name)
            self.head = self._start()
            wait(self.head.node_id.remote(), "start")
        except (RuntimeError, ray.exceptions.RayActorError) as err:
            lines = str(err).strip().splitlines() or [type(err).__name__]
            raise RuntimeError(f"{what} and no new one started on this node ({lines[-1]}); "
                               "check `ray status`, then continue with --resume.") from None
        self._answered = time.monotonic()
        self.restarts.report("policy_store", what, "rebuilt with the newest weights")

    def metrics(self) -> dict[str, int]:
        return self.restarts.metrics()

    def close(self) -> None:
        ray.kill(self.head)  # its followers and the weights go with it


def publish(head: Any, policy_id: str, flat: np.ndarray, spec: PolicySpec,
            version: int | None = None) -> int:
    """Hand the weights to the head store, which owns them from then on (they outlive
    this process); returns the version (``version``, or the last one + 1)."""
    return wait(head.publish.remote(policy_id, flat, spec, version), f"publish {policy_id!r}")


class PolicyReader:
    """Runner side: this node's store plus a PolicyCache of zero-copy views.

    ``head`` is the head store, or the name of a RunStore's: then a store that died is
    waited for, up to ``rebuild_wait_s``, while its driver rebuilds it (a runner spends
    no restart on it), and the reader goes on with the new one. Past that wait, or with
    a head given as a handle (the league's driver rebuilds and rehomes its runners), the
    death is raised.
    """

    def __init__(self, head: Any, max_cached_policies: int = 64,
                 rebuild_wait_s: float = REBUILD_WAIT_S):
        self.node_id = ray.get_runtime_context().get_node_id()
        self.cache = PolicyCache(max_cached_policies)
        self.head_name = head if isinstance(head, str) else None
        self.rebuild_wait_s = rebuild_wait_s if self.head_name else 0.0
        if self.head_name is None:
            self.store = wait(head.store_for.remote(self.node_id), "find this node's store")
        else:
            self._reconnect(time.monotonic() + self.rebuild_wait_s)

    def _ask(self, call: Callable[[Any], Any]) -> Any:
        """``call(store)``, again with a rebuilt store if this one is lost (see the
        class)."""
        deadline = time.monotonic() + self.rebuild_wait_s
        while True:
            try:
                return call(self.store)
            except STORE_LOST:
                if not self.rebuild_wait_s:
                    raise
                self._reconnect(deadline)

    def _reconnect(self, deadline: float) -> None:
        """This node's store under the head's name, once it answers; the views of the
        lost store's weights are dropped."""
        for pid in self.cache.ids():
            self.cache.drop(pid)
        while True:
            try:
                head = ray.get_actor(self.head_name)
                self.store = ray.get(head.store_for.remote(self.node_id), timeout=10.0)
                ray.get(self.store.node_id.remote(), timeout=10.0)
                return
            except (ValueError, ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"the policy store {self.head_name!r} died and no new one answered "
                        f"within {self.rebuild_wait_s:g} s: its driver may be gone or "
                        "stuck; check `ray status`, then continue with --resume.") from None
                time.sleep(0.2)

    def refresh(self, policy_ids: list[str]) -> dict[str, int]:
        """One round trip to compare versions; a second, and the mapping of new buffers,
        only for policies that changed. Removed policies are dropped from the cache."""
        versions = self._ask(lambda s: wait(s.versions.remote(policy_ids), "list versions"))
        for pid in policy_ids:
            if pid not in versions:
                self.cache.drop(pid)
        stale = self.cache.stale(versions)
        if stale:
            for pid, (version, spec, flat) in self._fetch(stale).items():
                self.cache.put(pid, version, spec, flat)
        return versions

    def newer(self, policy_id: str, version: int) -> tuple[int, np.ndarray] | None:
        """The newest version of one policy and its buffer when newer than ``version``,
        else None: one round trip when nothing changed. Not cached, for a runner that
        copies the weights into a module of its own."""
        latest = self._ask(lambda s: wait(s.versions.remote([policy_id]), "list versions"))
        if latest.get(policy_id, -1) <= version:
            return None
        found = self._fetch([policy_id]).get(policy_id)
        return None if found is None else (found[0], found[2])

    def _fetch(self, policy_ids: list[str]) -> dict[str, tuple[int, PolicySpec, np.ndarray]]:
        """(version, spec, buffer) of each id the store holds, mapped from its object;
        both round trips again from a rebuilt store when the store is lost between them."""
        def both(store: Any) -> dict[str, tuple[int, PolicySpec, np.ndarray]]:
            entries = wait(store.latest.remote(policy_ids), "hand out new weights")
            flats = wait([box[0] for _, box, _ in entries.values()], "map new weights")
            return {pid: (version, spec, flat) for (pid, (version, _, spec)), flat
                    in zip(entries.items(), flats, strict=True)}
        return self._ask(both)

    def policy(self, policy_id: str) -> CachedPolicy:
        """A policy to act with, mapped first if this runner has not seen it yet."""
        if policy_id not in self.cache:
            self.refresh([policy_id])
        if policy_id not in self.cache:
            raise KeyError(f"policy {policy_id!r} is not in the policy store; publish it first.")
        return self.cache.get(policy_id)
