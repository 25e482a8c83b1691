"""How many tiles a tile coder's layout takes: plain arithmetic, apart from the numba coder
(:mod:`gamma_net_core.tilecoding`), so that a configuration sizes its coder without loading numba."""

from __future__ import annotations

import math
from collections.abc import Sequence


def tiles_per_dimension(width: float) -> int:
    """Tile coordinates a tiling of this width takes over [0, 1] with offsets in [0, 1) tile."""
    return math.ceil(1.0 / width) + 1


def unhashed_features(n_dims: int, tilings: Sequence[int], widths: Sequence[float]) -> int:
    """Features of one feature per tile (the bias apart): each tiling's tiles over ``n_dims`` inputs."""
    return sum(int(n) * tiles_per_dimension(w) ** n_dims for n, w in zip(tilings, widths))
