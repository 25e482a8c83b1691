"""The sum tree: hand-drawn sums, the plain reference as oracle, sampling in proportion to priority, bad input."""

from __future__ import annotations

import numpy as np
import pytest

from gamma_net_core.neural.reference import ReferenceSumTree
from gamma_net_core.neural.sum_tree import SumTree


def test_hand_drawn_tree():
    # Dopamine's docstring example: leaves 0.5, 1.0, 0.5, 0.5 -> 1.5 | 1.0 -> 2.5.
    tree = SumTree(4)
    tree.set([0, 1, 2, 3], [0.5, 1.0, 0.5, 0.5])
    assert tree.total == 2.5
    np.testing.assert_array_equal(tree.nodes[1:], [2.5, 1.5, 1.0, 0.5, 1.0, 0.5, 0.5])
    np.testing.assert_array_equal(tree.query([0.0, 0.49, 0.5, 1.49, 1.5, 2.0, 2.49]), [0, 0, 1, 1, 2, 3, 3])
    assert tree.max_recorded_priority == 1.0


def test_matches_the_plain_reference():
    rng = np.random.default_rng(1)
    tree, plain = SumTree(37), ReferenceSumTree(37)
    for _ in range(50):
        idx = rng.integers(0, 37, size=5)
        values = np.where(rng.random(5) < 0.3, 0.0, rng.random(5) * 10)
        tree.set(idx, values)
        for i, v in zip(idx, values):
            plain.set(int(i), float(v))
        assert tree.total == pytest.approx(plain.total, rel=1e-12)
        targets = rng.random(20) * tree.total
        expected = [plain.query(float(t)) for t in targets]
        np.testing.assert_array_equal(tree.query(targets), expected)
        assert (tree.get(tree.query(targets)) > 0).all()


def test_samples_in_proportion_to_priority():
    """Frequencies within 5 binomial standard deviations of p_i / sum(p) over 320,000 draws."""
    priorities = np.array([0.0, 1.0, 2.0, 0.5, 0.0, 4.0, 0.25, 3.0, 1.0, 0.0, 6.0])
    tree = SumTree(priorities.size)
    tree.set(np.arange(priorities.size), priorities)
    rng = np.random.default_rng(7)
    draws = np.concatenate([tree.stratified_sample(32, rng)[0] for _ in range(10_000)])
    expected = priorities / priorities.sum()
    freq = np.bincount(draws, minlength=priorities.size) / draws.size
    sigma = np.sqrt(expected * (1 - expected) / draws.size)
    assert freq[priorities == 0].sum() == 0.0
    assert np.all(np.abs(freq - expected) <= 5 * sigma + 1e-12), (freq, expected)
    # Independent uniform targets through query follow the same distribution.
    draws = tree.query(rng.random(320_000) * tree.total)
    freq = np.bincount(draws, minlength=priorities.size) / draws.size
    assert np.all(np.abs(freq - expected) <= 5 * sigma + 1e-12), (freq, expected)


def test_stratified_sample_returns_probabilities():
    tree = SumTree(5)
    tree.set([0, 1, 2, 3, 4], [1.0, 0.0, 3.0, 2.0, 4.0])
    leaves, probabilities = tree.stratified_sample(10, np.random.default_rng(0))
    np.testing.assert_allclose(probabilities, tree.get(leaves) / 10.0)
    # One draw per slice of [0, 10): the slices' leaves in cumulative order.
    np.testing.assert_array_equal(leaves, [0, 2, 2, 2, 3, 3, 4, 4, 4, 4])


def test_duplicates_last_wins_and_positive_updates_keep_zeros():
    tree = SumTree(8)
    tree.set([3, 3, 5], [1.0, 2.0, 4.0])
    assert tree.get([3])[0] == 2.0 and tree.total == 6.0
    tree.update_positive([3, 4, 5], [7.0, 9.0, 1.0])  # slot 4 is empty: it stays empty
    np.testing.assert_array_equal(tree.get([3, 4, 5]), [7.0, 0.0, 1.0])
    assert tree.total == 8.0
    assert tree.max_recorded_priority == 7.0


def test_state_round_trip_is_bit_exact():
    rng = np.random.default_rng(3)
    tree = SumTree(1000)
    for _ in range(200):
        tree.set(rng.integers(0, 1000, 32), rng.random(32) ** 3)
    copy = SumTree(1000)
    copy.from_state_dict(tree.to_state_dict())
    np.testing.assert_array_equal(copy.nodes, tree.nodes)
    assert copy.max_recorded_priority == tree.max_recorded_priority
    with pytest.raises(ValueError, match="holds"):
        SumTree(999).from_state_dict(tree.to_state_dict())


def test_bad_input_changes_nothing():
    tree = SumTree(6)
    tree.set([0, 1], [1.0, 2.0])
    before = tree.nodes.copy()
    with pytest.raises(IndexError, match="index 6 at position 1"):
        tree.set([2, 6], [1.0, 1.0])
    with pytest.raises(IndexError, match="index -1"):
        tree.set([-1], [1.0])
    with pytest.raises(ValueError, match="got nan for index 3"):
        tree.set([2, 3], [1.0, np.nan])
    with pytest.raises(ValueError, match=r"got -0\.5"):
        tree.set([2], [-0.5])
    with pytest.raises(ValueError, match="got inf"):
        tree.set([2], [np.inf])
    with pytest.raises(ValueError, match=r"must be finite and > 0; got 0\.0"):
        tree.update_positive([0], [0.0])
    with pytest.raises(ValueError, match="2 indices but priorities of shape"):
        tree.set([2, 3], [1.0])
    with pytest.raises(ValueError, match="integers"):
        tree.set([1.5], [1.0])
    np.testing.assert_array_equal(tree.nodes, before)
    with pytest.raises(ValueError, match="outside"):
        tree.query([3.0])
    with pytest.raises(ValueError, match="all 0"):
        SumTree(4).stratified_sample(2, np.random.default_rng(0))
    with pytest.raises(ValueError, match="capacity"):
        SumTree(0)
