"""Prioritized replay of raw steps: n-step windows at episode ends and cuts, priorities, state, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from gamma_net_core.neural.reference import reference_window
from gamma_net_core.neural.replay import PrioritizedReplay, importance_weights, priorities_from_losses


def replay(capacity=50, n=3, feature_size=2, seed=0):
    return PrioritizedReplay(capacity=capacity, feature_size=feature_size, n=n, rng=np.random.default_rng(seed))


def records(count, feature_size=2):
    """Features that name their record: φ_t = [t, -t]."""
    t = np.arange(count, dtype=np.float32)
    return np.stack([t, -t], axis=1)[:, :feature_size]


def test_windows_at_a_terminal_and_a_cut():
    # Records 0..6, cumulants 1..7; S_3 is terminal (after record 2); the episode is cut after record 5.
    buf = replay(n=3)
    c = np.arange(1.0, 8.0)
    term = np.array([0, 0, 1, 0, 0, 0, 0], bool)
    trunc = np.array([0, 0, 0, 0, 0, 1, 0], bool)
    buf.add(records(7), c, term, trunc)
    sampleable = np.flatnonzero(buf.tree.leaves > 0)
    # Record 5 was cut at its own step (no S_6 recorded): never sampled; record 6's window is still open.
    np.testing.assert_array_equal(sampleable, [0, 1, 2, 3, 4])
    batch = buf.assemble(sampleable)
    np.testing.assert_array_equal(batch.lengths, [3, 2, 1, 2, 1])
    np.testing.assert_array_equal(batch.bootstrap, [False, False, False, True, True])
    np.testing.assert_array_equal(batch.cumulants, [[1, 2, 3], [2, 3, 0], [3, 0, 0], [4, 5, 0], [5, 0, 0]])
    # The cut episode bootstraps from S_5, the last state it recorded.
    np.testing.assert_array_equal(batch.bootstrap_features[3:, 0], [5, 5])
    np.testing.assert_array_equal(batch.features[:, 0], [0, 1, 2, 3, 4])
    gammas = [0.0, 0.5]
    np.testing.assert_allclose(
        batch.nstep_returns(gammas), [[1, 1 + 1 + 0.75], [2, 2 + 1.5], [3, 3], [4, 4 + 2.5], [5, 5]]
    )
    np.testing.assert_allclose(batch.bootstrap_discounts(gammas), [[0, 0], [0, 0], [0, 0], [0, 0.25], [0, 0.5]])
    # Three more records close record 6's window (no end inside): bootstrap from S_9.
    buf.add(records(10)[7:], [8.0, 9.0, 10.0], [False] * 3, [False] * 3)
    batch = buf.assemble([6])
    np.testing.assert_array_equal(batch.cumulants, [[7, 8, 9]])
    assert batch.lengths[0] == 3 and batch.bootstrap[0] and batch.bootstrap_features[0, 0] == 9
    with pytest.raises(ValueError, match="slot 5 holds no sampleable window"):
        buf.assemble([5])


@pytest.mark.parametrize("batched", [True, False])
def test_random_stream_matches_walking_the_recording(batched):
    """A small buffer that wraps many times: every sampleable window equals the walk over the full recording."""
    rng = np.random.default_rng(11)
    T, n, capacity = 400, 4, 23
    c = rng.normal(size=T)
    term = rng.random(T) < 0.08
    trunc = rng.random(T) < 0.08
    buf = replay(capacity=capacity, n=n)
    phi = records(T)
    if batched:
        for start in range(0, T, 37):
            buf.add(phi[start : start + 37], c[start : start + 37], term[start : start + 37], trunc[start : start + 37])
    else:
        for t in range(T):
            buf.add(phi[t], c[t], term[t], trunc[t])
    held = np.arange(T - capacity, T)  # record numbers still in the buffer
    expected = {int(t): reference_window(c, term, trunc, int(t), n) for t in held}
    # A window is sampleable once the recording so far closes it.
    live = {int(t) for t in held if buf.tree.get([t % capacity])[0] > 0}
    assert live == {t for t, w in expected.items() if w is not None}
    assert len(live) > 5
    batch = buf.assemble(np.array(sorted(t % capacity for t in live)))
    by_slot = {int(s): i for i, s in enumerate(batch.indices)}
    for t in live:
        window, boot = expected[t]
        i = by_slot[t % capacity]
        assert batch.lengths[i] == len(window)
        np.testing.assert_allclose(batch.cumulants[i, : len(window)], window)
        assert not batch.cumulants[i, len(window) :].any()
        assert batch.bootstrap[i] == (boot is not None)
        if boot is not None:
            assert batch.bootstrap_features[i, 0] == boot
        assert batch.features[i, 0] == t


def test_new_windows_get_the_highest_priority_seen():
    buf = replay(n=2)
    buf.add(records(4), np.ones(4), np.zeros(4, bool), np.zeros(4, bool))
    np.testing.assert_array_equal(buf.tree.leaves[:4], [1, 1, 0, 0])  # Dopamine's initial max: 1
    buf.update_priorities(np.array([0, 1]), [5.0, 0.5])
    buf.add(records(5)[4:], [1.0], [False], [False])
    assert buf.tree.get([2])[0] == 5.0
    np.testing.assert_array_equal(buf.tree.leaves[:3], [5.0, 0.5, 5.0])


def test_overwritten_windows_leave_and_stale_updates_cannot_revive_them():
    buf = replay(capacity=6, n=2)
    buf.add(records(6), np.ones(6), np.zeros(6, bool), np.zeros(6, bool))
    assert buf.tree.get([0])[0] > 0
    buf.add(records(7)[6:], [1.0], [False], [False])  # record 6 takes slot 0; its window is open
    assert buf.tree.get([0])[0] == 0
    buf.update_priorities(np.array([0, 1]), [3.0, 3.0])  # slot 0 is stale
    np.testing.assert_array_equal(buf.tree.get([0, 1]), [0.0, 3.0])


def test_sampling_follows_priorities_and_weights_follow_dopamine():
    buf = replay(capacity=10, n=1, seed=5)
    buf.add(records(10), np.ones(10), np.zeros(10, bool), np.zeros(10, bool))
    buf.update_priorities(np.arange(9), np.arange(1.0, 10.0))
    batch = buf.sample(9)
    total = 45.0
    np.testing.assert_allclose(batch.probabilities, (batch.indices + 1) / total)
    # 1 / sqrt(p), normalized by the largest.
    np.testing.assert_allclose(importance_weights([0.25, 0.04]), [0.4, 1.0])
    np.testing.assert_allclose(priorities_from_losses([[1.0, 4.0], [9.0, 0.0]]), np.sqrt(np.array([4.0, 9.0]) + 1e-10))


def test_state_round_trip_samples_the_same():
    rng = np.random.default_rng(2)
    T = 130
    buf = replay(capacity=40, n=3, seed=9)
    buf.add(rng.normal(size=(T, 2)), rng.normal(size=T), rng.random(T) < 0.1, rng.random(T) < 0.05)
    batch = buf.sample(8)
    buf.update_priorities(batch.indices, rng.random(8) + 0.1)
    copy = replay(capacity=40, n=3, seed=123)
    copy.from_state_dict(buf.to_state_dict())
    a, b = buf.sample(16), copy.sample(16)
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    with pytest.raises(ValueError, match="capacity, feature_size, n"):
        replay(capacity=41, n=3).from_state_dict(buf.to_state_dict())


def test_bad_records_change_nothing():
    buf = replay(n=2)
    buf.add(records(3), [1.0, 2.0, 3.0], [False] * 3, [False] * 3)
    before = buf.to_state_dict()
    with pytest.raises(ValueError, match=r"features must be \[T, 2\] numbers; got shape \(3,\)"):
        buf.add(np.zeros(3), [1.0], [False], [False])
    with pytest.raises(ValueError, match="got nan at record 1, feature 0"):
        buf.add([[0.0, 0.0], [np.nan, 0.0]], [1.0, 1.0], [False] * 2, [False] * 2)
    with pytest.raises(ValueError, match="cumulants must be finite; got inf at record 0"):
        buf.add([[0.0, 0.0]], [np.inf], [False], [False])
    with pytest.raises(ValueError, match=r"got 1e\+39 at record 0, feature 1"):
        buf.add([[0.0, 1e39]], [1.0], [False], [False])  # overflows float32
    with pytest.raises(ValueError, match="terminals must be booleans; got 2"):
        buf.add([[0.0, 0.0]], [1.0], [2], [False])
    with pytest.raises(ValueError, match="one value per record"):
        buf.add([[0.0, 0.0]], [1.0, 2.0], [False], [False])
    with pytest.raises(ValueError, match=r"must be finite and > 0; got -1\.0"):
        buf.update_priorities(np.array([0]), [-1.0])
    after = buf.to_state_dict()
    for key in before:
        np.testing.assert_array_equal(before[key], after[key])
    with pytest.raises(ValueError, match="no complete 2-step window"):
        replay(n=2).sample(4)
