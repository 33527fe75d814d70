import numpy as np
import pytest

from distrl.apex.replay import MinTree, PrioritizedReplay, SumTree
from distrl.core.types import NStepFragment

CHI2_DF9_P001 = 27.877  # chi-square critical value, 9 degrees of freedom, p = 0.001


def flat_fragment(values: np.ndarray) -> NStepFragment:
    """Transitions i -> i+1 over observations [v, v, v, v] (one env, no frame stack)."""
    n = len(values)
    obs = np.repeat(np.append(values, values[-1] + 1)[:, None], 4, axis=1).astype(np.float32)
    return NStepFragment(frames=obs, obs_idx=np.arange(n)[:, None],
                         next_idx=np.arange(1, n + 1)[:, None], actions=np.arange(n) % 2,
                         rewards=values.astype(np.float32),
                         discounts=np.full(n, 0.9, np.float32))


def filled(capacity: int, n: int, alpha: float = 1.0, **kw) -> PrioritizedReplay:
    replay = PrioritizedReplay(capacity, (4,), np.float32, alpha=alpha, eps=0.0, **kw)
    for start in range(0, n, 10):
        replay.add(flat_fragment(np.arange(start, min(n, start + 10), dtype=np.float64)))
    return replay


def test_sum_tree_find_matches_searchsorted_on_cumsum():
    rng = np.random.default_rng(0)
    p = rng.random(1000)
    p[rng.random(1000) < 0.3] = 0.0
    tree = SumTree(1000)
    tree.update(np.arange(1000), p)
    prefix = rng.random(20_000) * p.sum()
    prefix[-1] = np.nextafter(p.sum(), 0)  # the right edge, where round-off bites
    expected = np.searchsorted(np.cumsum(p), prefix, side="right")
    found = tree.find(prefix)
    assert (p[found] > 0).all()
    agree = found == np.minimum(expected, 999)
    assert agree[:-1].all()
    assert tree.total() == pytest.approx(p.sum())


def test_sum_tree_never_returns_an_empty_leaf_at_the_right_edge():
    tree = SumTree(8)
    tree.update(np.arange(3), np.array([1.0, 2.0, 3.0]))  # leaves 3..7 empty
    # (n - 1 + u) * total / n can round up to total itself.
    assert tree.find(np.array([6.0, np.nextafter(6.0, 7.0)])).tolist() == [2, 2]


def test_tree_batch_updates_with_repeated_indices():
    rng = np.random.default_rng(1)
    s, m = SumTree(100), MinTree(100)
    ref = np.zeros(100)
    for _ in range(50):
        idx = rng.integers(0, 100, 64)  # repeats: the last write wins
        val = rng.random(64)
        s.update(idx, val)
        m.update(idx, val)
        for i, v in zip(idx, val, strict=True):
            ref[i] = v
    assert s.total() == pytest.approx(ref.sum())
    touched = np.flatnonzero(ref)
    assert m.min() == pytest.approx(ref[touched].min())
    assert np.allclose(s.values(np.arange(100)), ref)


def test_sampling_frequencies_proportional_to_priority_power_alpha():
    replay = filled(10, 10, alpha=0.5)
    td = np.arange(1, 11, dtype=np.float64)
    replay.update_priorities(np.arange(10), td)
    rng = np.random.default_rng(2)
    counts = np.zeros(10)
    for _ in range(400):
        _, ids, _ = replay.sample(50, 0.4, rng)
        counts += np.bincount(ids, minlength=10)
    expected = td**0.5 / (td**0.5).sum() * counts.sum()
    chi2 = ((counts - expected) ** 2 / expected).sum()
    assert chi2 < CHI2_DF9_P001
    # alpha = 1 would be far off: the test can tell the exponents apart.
    wrong = td / td.sum() * counts.sum()
    assert ((counts - wrong) ** 2 / wrong).sum() > 10 * CHI2_DF9_P001


def test_importance_weights_normalized_by_the_buffer_max_weight():
    replay = filled(8, 8, alpha=1.0)
    p = np.array([0.001, 2, 3, 4, 5, 6, 7, 8])  # id 0: the largest weight, rarely drawn
    replay.update_priorities(np.arange(8), p)
    _, ids, weights = replay.sample(4, 0.5, np.random.default_rng(3))
    assert 0 not in ids
    probs = p / p.sum()
    naive = (8 * probs[ids]) ** -0.5 / (8 * probs.min()) ** -0.5
    assert np.allclose(weights, naive, rtol=1e-6)
    assert weights.max() < 0.1  # normalized by the batch's own max it would be 1


def test_sampled_transitions_are_rebuilt_from_their_frames():
    replay = filled(100, 40)
    batch, ids, _ = replay.sample(64, 0.4, np.random.default_rng(4))
    assert np.array_equal(batch.obs[:, 0], ids.astype(np.float32))
    assert np.array_equal(batch.next_obs[:, 0], ids + 1.0)  # next obs: the next frame
    assert np.array_equal(batch.rewards, ids.astype(np.float32))
    assert np.array_equal(batch.actions, ids % 10 % 2)


def test_ring_overwrites_the_oldest_first():
    replay = filled(25, 40)
    assert len(replay) == 25
    stored = sorted(set(replay.sample(2000, 0.4, np.random.default_rng(5))[1].tolist()))
    assert stored == list(range(15, 40))


def test_stale_priority_updates_are_ignored():
    replay = filled(20, 20)
    _, ids, _ = replay.sample(20, 0.4, np.random.default_rng(6))
    for start in range(20, 30, 10):  # overwrite ids 0..9
        replay.add(flat_fragment(np.arange(start, start + 10, dtype=np.float64)))
    before = replay.sum_tree.total()
    replay.update_priorities(ids, np.full(len(ids), 100.0))
    fresh = np.unique(ids[ids >= 10])
    assert replay.sum_tree.total() == pytest.approx(before - len(fresh) + 100.0 * len(fresh))
    assert (replay.priorities(np.arange(20, 30)) == 1.0).all()  # the new ones untouched


def test_new_transitions_enter_with_the_max_priority_seen():
    replay = filled(50, 10)
    replay.update_priorities(np.array([3]), np.array([7.0]))
    replay.add(flat_fragment(np.arange(10, 20, dtype=np.float64)))
    assert np.allclose(replay.priorities(np.arange(10, 20)), 7.0)
    replay.add(flat_fragment(np.arange(20, 30, dtype=np.float64)), np.full(10, 2.0))
    assert np.allclose(replay.priorities(np.arange(20, 30)), 2.0)


def stacked_fragment(rng: np.random.Generator, start_frame: int, n: int):
    """A stack-4 sequence over 3x3 frames numbered from start_frame, with episode starts
    (stack = the reset frame repeated), compacted: each distinct frame once."""
    frames, stacks, counter, current = [], [], start_frame, None
    for _ in range(n + 1):
        if current is None or rng.random() < 0.15:
            frames.append(np.full((3, 3), counter % 256, np.uint8))
            current = [len(frames) - 1] * 4
        else:
            frames.append(np.full((3, 3), counter % 256, np.uint8))
            current = [*current[1:], len(frames) - 1]
        counter += 1
        stacks.append(current)
    idx = np.array(stacks)
    frag = NStepFragment(frames=np.stack(frames), obs_idx=idx[:-1], next_idx=idx[1:],
                         actions=np.zeros(n, np.int64), rewards=np.zeros(n, np.float32),
                         discounts=np.ones(n, np.float32))
    return frag, np.stack(frames)[idx]  # [n + 1, 4, 3, 3] the stacked observations


def test_frame_stacks_rebuilt_across_episode_starts_and_frame_overwrites():
    rng = np.random.default_rng(7)
    replay = PrioritizedReplay(60, (4, 3, 3), np.uint8, frame_stack=4)
    reference = {}
    for k in range(12):  # 5x the capacity: both rings wrap several times
        frag, stacks = stacked_fragment(rng, 50 * k, 25)
        first = replay.added
        replay.add(frag)
        for i in range(25):
            reference[first + i] = (stacks[i], stacks[i + 1])
        batch, ids, _ = replay.sample(128, 0.4, rng)
        for j, i in enumerate(ids):
            assert np.array_equal(batch.obs[j], reference[i][0])
            assert np.array_equal(batch.next_obs[j], reference[i][1])
    assert replay.frames_written / replay.added < 1.5  # two stored stacks would be 8


def test_a_fragment_that_overwrites_frames_drops_the_transitions_using_them():
    replay = PrioritizedReplay(100, (4,), np.float32)
    many_frames = flat_fragment(np.arange(10, dtype=np.float64))
    extra = np.zeros((replay.frame_capacity - 11, 4), np.float32)
    many_frames.frames = np.concatenate([many_frames.frames, extra])
    replay.add(flat_fragment(np.arange(10, dtype=np.float64)))
    replay.add(many_frames)  # overwrites one of the first fragment's 11 frames
    assert replay.evicted_by_frames == 10
    assert len(replay) == 10
    _, ids, _ = replay.sample(200, 0.4, np.random.default_rng(8))
    assert ids.min() >= 10


def test_state_dict_round_trip_samples_identically():
    replay = filled(30, 45)
    replay.update_priorities(np.arange(15, 45), np.linspace(0.1, 3.0, 30))
    copy = PrioritizedReplay(30, (4,), np.float32, alpha=1.0, eps=0.0)
    copy.load_state_dict(replay.state_dict())
    a = replay.sample(16, 0.4, np.random.default_rng(9))
    b = copy.sample(16, 0.4, np.random.default_rng(9))
    assert np.array_equal(a[1], b[1]) and np.array_equal(a[2], b[2])
    assert np.array_equal(a[0].obs, b[0].obs)


def test_errors_say_what_to_change():
    with pytest.raises(ValueError, match="capacity"):
        PrioritizedReplay(0, (4,), np.float32)
    with pytest.raises(ValueError, match="empty replay"):
        PrioritizedReplay(10, (4,), np.float32).sample(4, 0.4, np.random.default_rng(0))


def test_a_replaced_shards_ids_start_past_its_predecessors():
    """A priority update in flight for a dead shard must not land on the transitions of
    the shard that replaced it, although both fill the same slots."""
    old = filled(20, 20)
    _, old_ids, _ = old.sample(20, 0.4, np.random.default_rng(7))
    new = filled(20, 20, first_id=1 << 48)
    _, new_ids, _ = new.sample(20, 0.4, np.random.default_rng(7))
    assert new_ids.min() >= 1 << 48 and len(new) == 20
    before = new.priorities(np.arange(1 << 48, (1 << 48) + 20))
    new.update_priorities(old_ids, np.full(len(old_ids), 100.0))
    np.testing.assert_array_equal(new.priorities(np.arange(1 << 48, (1 << 48) + 20)), before)
    new.update_priorities(new_ids, np.full(len(new_ids), 100.0))  # its own ids still work
    assert (new.priorities(np.unique(new_ids)) == 100.0).all()


def test_a_restored_replay_goes_on_as_the_original():
    """Every counter comes back, not only the arrays: new transitions enter at the same
    max priority, into the same slots and frames."""
    replay = filled(30, 45)
    replay.update_priorities(np.arange(15, 45), np.linspace(0.1, 3.0, 30))
    copy = PrioritizedReplay(30, (4,), np.float32, alpha=1.0, eps=0.0)
    copy.load_state_dict(replay.state_dict())
    for r in (replay, copy):
        r.add(flat_fragment(np.arange(45, 55, dtype=np.float64)))
    assert copy.stats() == replay.stats()
    ids = np.arange(25, 55)
    np.testing.assert_array_equal(copy.priorities(ids), replay.priorities(ids))
    assert (replay.priorities(np.arange(45, 55)) == 3.0).all()  # the max seen before
    a = replay.sample(16, 0.4, np.random.default_rng(10))
    b = copy.sample(16, 0.4, np.random.default_rng(10))
    assert np.array_equal(a[1], b[1]) and np.array_equal(a[2], b[2])
    assert np.array_equal(a[0].obs, b[0].obs) and np.array_equal(a[0].next_obs, b[0].next_obs)
