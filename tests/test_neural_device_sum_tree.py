"""The device sum tree samples and updates exactly as the host SumTree (the oracle) does."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gamma_net_core.neural.device_sum_tree import DeviceSumTree
from gamma_net_core.neural.sum_tree import SumTree

pytestmark = pytest.mark.usefixtures("one_torch_thread")

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"))]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("capacity", [1, 5, 64, 1000])
def test_sampling_and_updates_match_the_host_tree_bit_for_bit(capacity, device):
    rng = np.random.default_rng(capacity)
    host = SumTree(capacity)
    host.set(np.arange(capacity), np.where(rng.random(capacity) < 0.2, 0.0, rng.random(capacity) * 3))
    host.set([capacity - 1], [0.5])  # never empty
    tree = DeviceSumTree.from_tree(host, device)
    for _ in range(30):
        u = rng.random(32)
        slots, probabilities = host.stratified_sample(32, np.random.default_rng(u.view(np.uint64)[:4]))
        draws = np.random.default_rng(u.view(np.uint64)[:4]).random(32)
        d_slots, d_probabilities = tree.stratified_sample(torch.as_tensor(draws, device=device))
        np.testing.assert_array_equal(d_slots.cpu().numpy(), slots)
        np.testing.assert_array_equal(d_probabilities.cpu().numpy(), probabilities)
        assert (host.get(slots) > 0).all()
        # Repeated slots (the last value wins) and a slot at 0 that must stay at 0.
        indices = np.concatenate([slots, slots[:5], np.flatnonzero(host.leaves == 0)[:2]])
        values = rng.random(indices.size) * 4 + 1e-3
        host.update_positive(indices, values)
        tree.update_positive(torch.as_tensor(indices, device=device), torch.as_tensor(values, device=device))
        np.testing.assert_array_equal(tree.nodes.cpu().numpy(), host.nodes)
        assert float(tree.max_recorded_priority) == host.max_recorded_priority
    np.testing.assert_array_equal(tree.to_tree().nodes, host.nodes)


def test_items_the_host_tree_refuses_are_skipped_on_the_device():
    host = SumTree(8)
    host.set(np.arange(8), np.arange(1.0, 9.0))
    tree = DeviceSumTree.from_tree(host)
    bad = torch.tensor([0, 1, 2, 9, -1, 3])
    tree.update_positive(bad, torch.tensor([float("nan"), float("inf"), -1.0, 5.0, 5.0, 0.0]))
    np.testing.assert_array_equal(tree.nodes.numpy(), host.nodes)  # nothing changed
    tree.update_positive(torch.tensor([4]), torch.tensor([7.0]))
    host.update_positive([4], [7.0])
    np.testing.assert_array_equal(tree.nodes.numpy(), host.nodes)
    with pytest.raises(ValueError, match="capacity must be a positive integer; got 0"):
        DeviceSumTree(0)
