"""DistributedLearners on two Ray nodes: shard placement, add/remove, training publishes."""

import gymnasium as gym
import numpy as np
import pytest
import ray
import torch

from distrl.league.config import LeagueConfig
from tests.fakes import random_rollout

pytestmark = [pytest.mark.ray, pytest.mark.slow]

OBS, ACT = gym.spaces.Box(-1, 1, (4,), np.float32), gym.spaces.Discrete(2)
CONFIG = LeagueConfig(minibatch_size=16, num_epochs=1)


def weights(learners, pid):
    return ray.get(learners.get(pid)[0].get_state.remote())["model"]


def test_shards_place_add_remove_and_train(two_nodes):
    from distrl.league.learners import DistributedLearners
    from distrl.store.remote import head_store

    learners = DistributedLearners(CONFIG, max_policies=4, num_shards=2, cpus_per_learner=0)
    try:
        assert {s.node_id for s in learners.shards} == set(two_nodes)  # one shard per node
        assert [s.capacity for s in learners.shards] == [2, 2]
        for pid in ("a", "b", "c", "d"):
            learners.add_policy(pid, OBS, ACT)
        # First shard with room: a, b on shard 0; c, d on shard 1; each learner on its
        # replay actor's node.
        assert [sorted(s.learners) for s in learners.shards] == [["a", "b"], ["c", "d"]]
        for _, learner, replay in learners:
            assert ray.get(learner.node_id.remote()) == ray.get(replay.node_id.remote())
        assert learners.policy_id_of(learners.get("c")[0]) == "c" and len(learners) == 4
        with pytest.raises(RuntimeError, match="full"):
            learners.add_policy("e", OBS, ACT)
        head = head_store()
        assert ray.get(head.versions.remote()) == dict.fromkeys("abcd", 0)  # published
        # Weights are seeded by (seed, policy id): "a" restarts as it was, unlike "b".
        first = weights(learners, "a")
        learners.remove_policy("a")
        learners.add_policy("a", OBS, ACT)
        again, other = weights(learners, "a"), weights(learners, "b")
        assert all(torch.equal(first[k], again[k]) for k in first)
        assert not all(torch.equal(first[k], other[k]) for k in first)
        # remove_policy works: learner stopped, slot freed, gone from the store.
        gone = learners.get("a")[0]
        learners.remove_policy("a")
        assert learners.get("a") is None and "a" not in ray.get(head.versions.remote())
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(gone.node_id.remote())
        learners.add_policy("e", OBS, ACT)
        assert sorted(learners.shards[0].learners) == ["b", "e"]
        with pytest.raises(KeyError):
            learners.remove_policy("a")
        # Training: samples go to the shard's replay; the learner trains once it has
        # enough and publishes a new version that readers see.
        learner, replay = learners.get("c")
        ray.get(replay.add.remote("c", random_rollout(24)))
        assert ray.get(learner.train.remote(32)) is None  # not enough yet
        ray.get(replay.add.remote("c", random_rollout(24, 1)))
        out = ray.get(learner.train.remote(32))
        assert out["samples"] == 48 and out["version"] == 1
        assert ray.get(head.versions.remote(["c"])) == {"c": 1}
        assert ray.get(replay.take.remote("c", 1)) is None  # consumed
    finally:
        learners.stop()
