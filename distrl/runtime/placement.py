"""Placement groups: where a group of actors runs, as config.

One bundle per actor (its CPUs and GPUs), placed by Ray all at once with a strategy:
PACK (as few nodes as possible), SPREAD (as many as possible), STRICT_PACK (one node),
STRICT_SPREAD (one node per actor). A replaced actor goes back into its own bundle (Ray
moves a bundle only when its node is lost). A request the cluster cannot place is one line
naming the bundle, the strategy and what each node has, never an endless wait.
"""

from __future__ import annotations

from typing import Any

import ray
from ray.util.placement_group import placement_group, remove_placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
READY_TIMEOUT_S = 30.0  # placing is seconds when it can be done; longer means it cannot


def bundle_of(resources: dict[str, Any]) -> dict[str, float]:
    """An actor's ``ray.remote`` options as a bundle: {"num_cpus": 1} -> {"CPU": 1}; zero
    amounts dropped (Ray refuses them in bundles)."""
    bundle = {"CPU": resources.get("num_cpus", 1.0), "GPU": resources.get("num_gpus", 0.0),
              **resources.get("resources", {})}
    return {k: float(v) for k, v in bundle.items() if v}


class Placement:
    """A placement group of ``size`` equal bundles; ``options(i)`` pins actor i to bundle i."""

    def __init__(self, what: str, resources: dict[str, Any], size: int, strategy: str,
                 timeout_s: float = READY_TIMEOUT_S):
        if strategy not in STRATEGIES:
            raise ValueError(f"placement strategy {strategy!r} is not one of {STRATEGIES}.")
        bundle = bundle_of(resources)
        if not bundle:
            raise ValueError(f"{what} ask for no CPUs or GPUs, so a placement group cannot "
                             f"place them: give them CPUs, or drop --placement-strategy.")
        _check_fits(what, bundle, size, strategy)
        self.group = placement_group([bundle] * size, strategy=strategy)
        ready, _ = ray.wait([self.group.ready()], timeout=timeout_s)
        if not ready:
            self.remove()
            raise RuntimeError(
                f"Ray could not place {size} {what} ({bundle} each, {strategy}) within "
                f"{timeout_s:g} s; the nodes have {_node_resources()} (some may be in use). "
                "Ask for less, use another --placement-strategy, or add nodes.")

    def options(self, index: int) -> dict[str, Any]:
        return {"scheduling_strategy": PlacementGroupSchedulingStrategy(
            self.group, placement_group_bundle_index=index)}

    def remove(self) -> None:
        if self.group is not None:
            remove_placement_group(self.group)
            self.group = None


def _check_fits(what: str, bundle: dict[str, float], size: int, strategy: str) -> None:
    """At once, what no waiting can fix: a bundle bigger than every node, more nodes than
    the cluster has for STRICT_SPREAD, the whole group bigger than one node for
    STRICT_PACK."""
    nodes = _node_resources()
    fits = [n for n in nodes if holds(n, bundle)]
    need = {k: v * size for k, v in bundle.items()}
    problem = None
    if not fits:
        problem = "no node is that big"
    elif strategy == "STRICT_SPREAD" and len(fits) < size:
        problem = f"STRICT_SPREAD needs {size} such nodes, the cluster has {len(fits)}"
    elif strategy == "STRICT_PACK" and not any(holds(n, need) for n in nodes):
        problem = f"STRICT_PACK needs {need} on one node"
    if problem:
        raise ValueError(f"cannot place {size} {what} ({bundle} each, {strategy}): {problem}; "
                         f"the nodes have {nodes}. Ask for less, use another "
                         "--placement-strategy, or add nodes.")


def holds(node: dict[str, float], need: dict[str, float]) -> bool:
    """Whether a node's total resources cover ``need`` (Ray's own resource names)."""
    return all(node.get(k, 0.0) >= v - 1e-9 for k, v in need.items())


def _node_resources() -> list[dict[str, float]]:
    """CPUs and GPUs (and custom resources) of each live node."""
    skip = ("node:", "memory", "object_store_memory", "accelerator_type:")
    return [{k: v for k, v in n["Resources"].items() if not k.startswith(skip)}
            for n in ray.nodes() if n["Alive"]]
