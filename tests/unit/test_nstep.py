import numpy as np
import pytest

from distrl.core.returns import n_step


def naive_n_step(r, term, trunc, valid, gamma, n):
    """Per (t, env): sum rewards until n steps, an episode end (included) or the end."""
    T, N = r.shape
    out = []
    for t in range(T):
        for e in range(N):
            if not valid[t, e]:
                continue
            total, k, terminated = 0.0, 0, False
            while k < n and t + k < T:
                total += gamma**k * r[t + k, e]
                k += 1
                if term[t + k - 1, e]:
                    terminated = True
                    break
                if trunc[t + k - 1, e]:
                    break
            out.append((t, e, k, total, 0.0 if terminated else gamma**k))
    return sorted(out)


@pytest.mark.parametrize("n", [1, 3, 5])
def test_n_step_matches_a_naive_loop_with_terminals_truncations_and_resets(n):
    rng = np.random.default_rng(n)
    T, N = 40, 4
    r = rng.normal(size=(T, N)).astype(np.float32)
    term = rng.random((T, N)) < 0.1
    trunc = rng.random((T, N)) < 0.1  # may coincide with term: termination wins
    valid = np.ones((T, N), dtype=bool)
    valid[1:] = ~(term | trunc)[:-1]  # NEXT_STEP: the row after an episode end resets
    t, e, k, R, d = n_step(r, term, trunc, valid, 0.9, n)
    assert np.all(np.diff(t * N + e) > 0)  # time-major, one per valid row
    assert np.all(k[t + k == T] <= n) and np.all(k[t == T - 1] == 1)  # cut at the end
    got = sorted(zip(t.tolist(), e.tolist(), k.tolist(), R.tolist(), d.tolist(), strict=True))
    ref = naive_n_step(r, term, trunc, valid, 0.9, n)
    assert len(got) == valid.sum() == len(ref)
    for a, b in zip(got, ref, strict=True):
        assert a[:3] == b[:3]
        assert a[3] == pytest.approx(b[3], abs=1e-5)
        assert a[4] == pytest.approx(b[4], abs=1e-6)


def test_n_step_hand_computed():
    # One env: r = 1, 2, 3, 4; the episode terminates at step 1 (reset row 2), then
    # a new episode is truncated by the fragment end.
    r = np.array([[1.0], [2.0], [3.0], [4.0]], dtype=np.float32)
    term = np.array([[False], [True], [False], [False]])
    trunc = np.zeros_like(term)
    valid = np.array([[True], [True], [False], [True]])
    t, _, k, R, d = n_step(r, term, trunc, valid, 0.5, 3)
    assert t.tolist() == [0, 1, 3]
    assert k.tolist() == [2, 1, 1]  # stops at the terminal step; the fragment end
    assert R.tolist() == [1 + 0.5 * 2, 2, 4]
    assert d.tolist() == [0.0, 0.0, 0.5]  # terminated: no bootstrap; fragment end: gamma**1


def test_truncation_bootstraps_with_gamma_to_the_steps_taken():
    r = np.ones((3, 1), dtype=np.float32)
    trunc = np.array([[False], [True], [False]])
    valid = np.array([[True], [True], [False]])
    _, _, k, R, d = n_step(r, np.zeros_like(trunc), trunc, valid, 0.9, 3)
    assert k.tolist() == [2, 1]
    assert R.tolist() == pytest.approx([1.9, 1.0])
    assert d.tolist() == pytest.approx([0.81, 0.9])


def test_n_step_rejects_n_below_one():
    no = np.zeros((2, 1), dtype=bool)
    with pytest.raises(ValueError, match="n >= 1"):
        n_step(np.zeros((2, 1), np.float32), no, no, ~no, 0.9, 0)
