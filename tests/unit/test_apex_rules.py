"""The rules both Ape-X engines follow (apex/roles.py), without Ray."""

from collections import deque

from distrl import ApexConfig
from distrl.apex.roles import WeightSync, batches_to_request, next_shard, updates_due


def simulate_learner_bound(shards: int, limit: int, queue_size: int, batches: int) -> list[int]:
    """The driver's loop when the learner is the bottleneck: the shards answer at once,
    a free slot opens only when the learner takes a batch from its full queue."""
    in_flight, sampled, queue = [0] * shards, [0] * shards, deque()
    for _ in range(batches):
        free = queue_size - len(queue) - sum(in_flight)
        while free > 0 and (s := next_shard(in_flight, sampled, limit)) is not None:
            in_flight[s] += 1
            free -= 1
        for s in range(shards):  # every request answered: its batch is queued
            queue.extend([s] * in_flight[s])
            sampled[s] += in_flight[s]
            in_flight[s] = 0
        queue.popleft()  # the learner trains on one batch
    return sampled


def test_a_learner_bound_run_samples_every_shard_alike():
    for shards in (2, 4):
        sampled = simulate_learner_bound(shards, limit=2, queue_size=16, batches=1_000)
        assert min(sampled) / max(sampled) >= 0.95, sampled


def test_next_shard_fills_the_least_busy_and_respects_the_limit():
    assert next_shard([1, 0, 1], [0, 50, 0], limit=2) == 1
    assert next_shard([1, 1], [30, 10], limit=2) == 1  # tie: the one sampled least
    assert next_shard([2, 2], [0, 0], limit=2) is None


def test_batches_requested_never_run_ahead_of_training_intensity():
    cfg = ApexConfig(learning_starts=100, train_batch_size=10, training_intensity=2.0,
                     learner_queue_size=16)
    assert batches_to_request(cfg, stored=99, trained=0, pending=0) == 0
    # 100 transitions owe 20 batches; the queue holds 16, of which 3 are pending.
    assert batches_to_request(cfg, stored=100, trained=0, pending=3) == 13
    # 2 owed, 1 already requested: ask for one more, not for a full queue.
    assert batches_to_request(cfg, stored=100, trained=180, pending=1) == 1
    assert batches_to_request(cfg, stored=100, trained=180, pending=2) <= 0
    plain = ApexConfig(learning_starts=100, training_intensity=None, learner_queue_size=16)
    assert batches_to_request(plain, stored=99, trained=0, pending=0) == 0
    assert batches_to_request(plain, stored=100, trained=10**6, pending=5) == 11


def test_updates_due_follows_learning_starts_and_training_intensity():
    cfg = ApexConfig(learning_starts=100, train_batch_size=10, training_intensity=2.0)
    assert updates_due(cfg, stored=99, trained=0) == 0
    assert updates_due(cfg, stored=100, trained=0) == 20  # 2 x 100 transitions owed
    assert updates_due(cfg, stored=100, trained=195) == 1
    assert updates_due(cfg, stored=100, trained=200) == 0
    plain = ApexConfig(learning_starts=100, training_intensity=None)
    assert updates_due(plain, stored=100, trained=10**6) == 1


def test_weight_sync_first_then_every_delay_and_only_new_versions():
    sync = WeightSync(delay=100)
    assert sync.due(learner_version=0)  # a new actor gets weights at once
    sync.since += 60
    assert not sync.due(5)
    sync.since += 60
    assert sync.due(5) and sync.version == 5 and sync.since == 0
    sync.since += 100
    assert not sync.due(5)  # nothing newer to send
