"""A sum tree held in a torch tensor, sampled and updated without leaving the learner's device.

The same 1-based float64 heap as :class:`~gamma_net_core.neural.sum_tree.SumTree` (the
oracle: same leaves and draws give the same slots, probabilities and sums, bit for bit),
walked one level at a time for the whole batch at once, so a batch of B costs about
log₂(capacity) small kernels and never a copy to the host: neither sampling (the root's
total stays a tensor) nor updating (bad values are skipped, not reported, since reporting
would need the host to look at them) waits for the device.

Whether this pays depends on the device: on a CPU the numba tree does the same work in a
microsecond or two with no kernel launches (``gamma-net bench neural``, docs/benchmarks.md).
"""

from __future__ import annotations

import numpy as np
import torch

from gamma_net_core.neural.sum_tree import SumTree


class DeviceSumTree:
    """Non-negative priorities over ``capacity`` slots on ``device``; samples slot i with probability p_i / sum(p).

    Args:
      capacity: number of leaves (the replay capacity).
      device: where the tree lives (a torch device or its name).
    """

    def __init__(self, capacity: int, device: str | torch.device = "cpu") -> None:
        if not isinstance(capacity, (int, np.integer)) or capacity <= 0:
            raise ValueError(f"sum tree capacity must be a positive integer; got {capacity!r}")
        self.capacity = int(capacity)
        self.leaf_offset = 1 << max(0, (self.capacity - 1).bit_length())
        self.depth = self.leaf_offset.bit_length() - 1
        self.device = torch.device(device)
        self.nodes = torch.zeros(2 * self.leaf_offset, dtype=torch.float64, device=self.device)
        #: The largest priority ever set, a 0-d tensor (Dopamine starts it at 1.0): new transitions get it.
        self.max_recorded_priority = torch.ones((), dtype=torch.float64, device=self.device)

    @classmethod
    def from_tree(cls, tree: SumTree, device: str | torch.device = "cpu") -> DeviceSumTree:
        """A copy of a host :class:`SumTree` on ``device``."""
        out = cls(tree.capacity, device)
        out.nodes.copy_(torch.from_numpy(tree.nodes))
        out.max_recorded_priority.fill_(tree.max_recorded_priority)
        return out

    @property
    def leaves(self) -> torch.Tensor:
        """The priorities, float64 [capacity] (a view on the device)."""
        return self.nodes[self.leaf_offset : self.leaf_offset + self.capacity]

    @property
    def total(self) -> torch.Tensor:
        """The sum of all priorities, a 0-d tensor on the device."""
        return self.nodes[1]

    def stratified_sample(self, uniforms: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One slot from each of B equal strata of the total mass, as :meth:`SumTree.stratified_sample`.

        Args:
          uniforms: float64 [B] in [0, 1): the draw within each stratum (from the caller's generator).

        Returns:
          (slots int64 [B], probabilities float64 [B]) on the device. An empty tree (total 0)
          gives slot 0 with probability NaN (the caller checks emptiness before sampling).
        """
        u = uniforms.to(device=self.device, dtype=torch.float64)
        B = u.shape[0]
        total = self.nodes[1]
        below_total = torch.nextafter(total, torch.zeros_like(total))  # (i + u) * total / B can round up to total
        strata = torch.arange(B, device=self.device, dtype=torch.float64)
        target = torch.minimum((strata + u) * (total / B), below_total)
        node = torch.ones(B, dtype=torch.int64, device=self.device)
        for _ in range(self.depth):
            left = self.nodes[2 * node]
            # Step right only into a subtree with mass, as the host tree does.
            right = (target >= left) & (self.nodes[2 * node + 1] > 0.0)
            target = torch.where(right, target - left, target)
            node = 2 * node + right.long()
        return node - self.leaf_offset, self.nodes[node] / total

    def update_positive(self, indices: torch.Tensor, priorities: torch.Tensor) -> None:
        """Set the priorities of leaves now above 0, as :meth:`SumTree.update_positive` (the last value wins).

        Items that the host tree would refuse (an index outside [0, capacity), a priority not
        finite and > 0) are skipped here instead: checking them would wait for the device.
        """
        idx = indices.to(device=self.device, dtype=torch.int64)
        values = priorities.to(device=self.device, dtype=torch.float64)
        n = idx.shape[0]
        position = torch.arange(n, device=self.device)
        # Every copy of a repeated index writes the last copy's value, so the scatter's order cannot matter.
        same = idx[:, None] == idx[None, :]
        last = torch.where(same, position[None, :], -1).amax(dim=1)
        given, values = values, values[last]
        inside = (idx >= 0) & (idx < self.capacity)
        node = self.leaf_offset + idx.clamp(0, self.capacity - 1)
        alive = inside & (self.nodes[node] > 0.0)
        ok = alive & torch.isfinite(values) & (values > 0.0)
        self.nodes[node] = torch.where(ok, values, self.nodes[node])
        # As the host tree: every value set counts, an overwritten repeat's too.
        counted = alive & torch.isfinite(given) & (given > 0.0)
        largest = torch.where(counted, given, torch.zeros_like(given)).amax() if n else given.new_zeros(())
        self.max_recorded_priority = torch.maximum(self.max_recorded_priority, largest)
        for _ in range(self.depth):
            node = node // 2
            self.nodes[node] = self.nodes[2 * node] + self.nodes[2 * node + 1]

    def to_tree(self) -> SumTree:
        """A host :class:`SumTree` with the same nodes (one copy to the host: for checkpoints and tests)."""
        tree = SumTree(self.capacity)
        tree.nodes[:] = self.nodes.cpu().numpy()
        tree.max_recorded_priority = float(self.max_recorded_priority)
        return tree
