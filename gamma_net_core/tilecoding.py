"""Tile coding: groups of tilings, each with its own tile width, optionally hashed into a fixed memory.

Sutton & Barto (2018, section 9.5.4) and Sutton's ``tiles3.py``, compiled with numba. An
input vector is first normalized to [0, 1] per dimension by given ranges (values outside
are clipped to the edge tile). Tiling ``t`` has tile width ``w_t`` (in normalized units)
and an offset per dimension ``o[t, d]`` in [0, 1) tile widths; its tile coordinate is

    c[t, d] = floor(u_d / w_t + o[t, d])        (u: the normalized input)

Offsets follow the asymmetric displacement of tiles3 (tiling ``j`` of a group of ``n`` is
displaced by ``j * (2d + 1) / n`` tile widths in dimension ``d``, the first odd numbers),
plus a random shift of up to ``1 / n`` tile width per tiling and dimension drawn from the
generator passed in: the paper's "tiling positions were randomly shifted by small
amounts at the time of initialization for each run".

A tile's key is linear in its coordinates, ``key = base[t] + sum_d mult[t, d] * c[t, d]``
(uint64, wrapping), so the state's part and the timescale's part of a key can be
computed apart and added (the learner codes one state with many gammas). Two layouts:

- ``memory_size == 0``, one feature per tile, no collisions: ``base`` is the tiling's first
  index and ``mult`` its strides, so the key is the index.
- ``memory_size > 0``, hashed: ``mult`` (odd) and ``base`` are random 64-bit constants
  (multiply-add-shift hashing), and the index is the key's top 32 bits mapped onto
  [0, memory_size) by a multiply and a shift (no division).

With ``copies`` K > 1 the coder keeps K copies of its features, one per knot of a Γ-net whose timescale
enters through knots (:mod:`gamma_net_core.linear.knots`): copy k's key is a tile's key plus
``k * copy_stride`` (unhashed: the copies lie one after another; hashed: they share the memory).
With ``bias``, one more feature (index ``n_features - 1``) is active for every input. A
coder returns active indices, one per tiling plus the bias, never dense vectors; an index
may repeat when two tilings hash to the same feature (its feature value is then 2).
Its whole state is ``offsets``, ``mult`` and ``base`` (:meth:`TileCoder.to_state_dict`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numba
import numpy as np

from gamma_net_core.tile_counts import tiles_per_dimension, unhashed_features

#: A layout of one feature per tile larger than this is refused: use hashing.
MAX_UNHASHED_FEATURES = 1 << 27


def draw_tilings(
    *,
    n_dims: int,
    tilings: Sequence[int],
    widths: Sequence[float],
    memory_size: int,
    rng: np.random.Generator,
) -> dict[str, np.ndarray]:
    """The random part of a coder: offsets and (hashed layout) hashing constants.

    Returns:
      ``offsets`` float64 [n_tilings, n_dims] in tile widths; ``mult`` uint64 [n_tilings,
      n_dims] and ``base`` uint64 [n_tilings] (strides and starts when unhashed).
    """
    _check_groups(n_dims, tilings, widths, memory_size)
    odd = 2 * np.arange(n_dims) + 1
    offsets = []
    for n in tilings:
        j = np.arange(n)[:, None]
        offsets.append(((j * odd[None, :]) % n + rng.random((n, n_dims))) / n)
    offsets = np.concatenate(offsets)
    n_tilings = offsets.shape[0]
    if memory_size > 0:
        top = np.iinfo(np.uint64).max
        mult = rng.integers(0, top, size=(n_tilings, n_dims), dtype=np.uint64, endpoint=True) | np.uint64(1)
        base = rng.integers(0, top, size=n_tilings, dtype=np.uint64, endpoint=True)
    else:
        mult, base = _unhashed_layout(n_dims, tilings, widths)
    return {"offsets": offsets, "mult": mult, "base": base}


def _unhashed_layout(n_dims: int, tilings: Sequence[int], widths: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    per_dim = np.repeat([tiles_per_dimension(w) for w in widths], tilings)
    mult = (per_dim[:, None] ** np.arange(n_dims)[None, :]).astype(np.uint64)
    size = per_dim.astype(np.int64) ** n_dims
    base = np.concatenate([[0], np.cumsum(size)[:-1]]).astype(np.uint64)
    return mult, base


def _check_groups(n_dims: int, tilings: Sequence[int], widths: Sequence[float], memory_size: int) -> None:
    if n_dims < 1:
        raise ValueError(f"a tile coder needs at least one input dimension; got {n_dims}")
    if len(tilings) == 0 or len(tilings) != len(widths):
        raise ValueError(f"tilings {tuple(tilings)} and widths {tuple(widths)} must be non-empty and of equal length")
    for n in tilings:
        if int(n) < 1:
            raise ValueError(f"each group needs at least one tiling; got {n!r}")
    for w in widths:
        if not (math.isfinite(w) and w > 0.0):
            raise ValueError(f"tile widths must be finite and > 0; got {w!r}")
    if memory_size < 0 or memory_size >= 1 << 32:
        raise ValueError(f"memory_size must be in [0, 2**32); got {memory_size!r}")
    if memory_size == 0:
        total = unhashed_features(n_dims, tilings, widths)
        if total > MAX_UNHASHED_FEATURES:
            raise ValueError(
                f"one feature per tile would need {total} features for {n_dims} inputs; set memory_size to hash them"
            )


class Tiles(NamedTuple):
    """A coder's arrays as the numba kernels take them (:attr:`TileCoder.kernel_args`).

    ``low``, ``span`` [n_dims] normalize an input; ``inv_width`` [n_tilings] is 1 / tile width;
    ``offsets`` [n_tilings, n_dims], ``mult`` [n_tilings, n_dims] and ``base`` [n_tilings] make the
    keys; ``per_dim`` [n_tilings] bounds the tile coordinates; ``memory_size`` (0: unhashed) maps a
    key to a feature; ``bias_index`` is the bias feature, -1 without one.
    """

    low: np.ndarray
    span: np.ndarray
    inv_width: np.ndarray
    offsets: np.ndarray
    mult: np.ndarray
    base: np.ndarray
    per_dim: np.ndarray
    memory_size: int
    bias_index: int
    copy_stride: int


#: A hashed coder's stride between copies: an odd 64-bit constant (2^64 / golden ratio), which spreads the
#: copies' keys over the memory as the hashing constants spread the tiles'.
HASHED_COPY_STRIDE = 0x9E3779B97F4A7C15


class TileCoder:
    """Maps input vectors to active feature indices (see the module docstring).

    Args:
      low, high: the range of each input dimension; inputs are normalized to [0, 1] by them.
      tilings: tilings per group, e.g. (20, 20, 30).
      widths: tile width per group in normalized units, e.g. (1.0, 0.5, 0.1).
      memory_size: features to hash into; 0 for one feature per tile (no hashing).
      bias: add one always-active feature.
      copies: copies of the tiles' features (knots of a Γ-net's timescale); a key of copy k is a tile's key
        plus k times :attr:`copy_stride`.
      rng: draws the offsets and hashing constants (one generator per run).
    """

    def __init__(
        self,
        *,
        low: Sequence[float],
        high: Sequence[float],
        tilings: Sequence[int],
        widths: Sequence[float],
        memory_size: int = 0,
        bias: bool = False,
        copies: int = 1,
        rng: np.random.Generator | None = None,
        state: dict[str, np.ndarray] | None = None,
    ) -> None:
        self.low = np.asarray(low, dtype=np.float64)
        high = np.asarray(high, dtype=np.float64)
        if self.low.ndim != 1 or self.low.shape != high.shape:
            raise ValueError(f"low {self.low.shape} and high {high.shape} must be 1-D and of equal length")
        bad = ~np.isfinite(self.low) | ~np.isfinite(high) | ~(high > self.low)
        if bad.any():
            d = int(np.flatnonzero(bad)[0])
            raise ValueError(f"input range {d} must be finite with low < high; got [{self.low[d]!r}, {high[d]!r}]")
        self.high = high
        self.span = high - self.low
        self.tilings = tuple(int(n) for n in tilings)
        self.widths = tuple(float(w) for w in widths)
        self.memory_size = int(memory_size)
        self.bias = bool(bias)
        self.copies = int(copies)
        if self.copies < 1:
            raise ValueError(f"copies must be >= 1; got {copies!r}")
        n_dims = self.low.shape[0]
        _check_groups(n_dims, self.tilings, self.widths, self.memory_size)
        if (rng is None) == (state is None):
            raise ValueError("give exactly one of rng (a new coder) or state (a saved one)")
        if state is None:
            state = draw_tilings(
                n_dims=n_dims, tilings=self.tilings, widths=self.widths, memory_size=self.memory_size, rng=rng
            )
        self._set_state(state)
        self.inv_width = np.repeat(1.0 / np.asarray(self.widths), self.tilings)
        self.per_dim = np.repeat([tiles_per_dimension(w) for w in self.widths], self.tilings).astype(np.int64)
        if self.memory_size > 0:
            n_tiles = self.memory_size
            self.copy_stride = HASHED_COPY_STRIDE if self.copies > 1 else 0
        else:
            one_copy = int(np.sum(self.per_dim.astype(np.int64) ** n_dims))
            n_tiles = one_copy * self.copies
            if n_tiles > MAX_UNHASHED_FEATURES:
                raise ValueError(f"{self.copies} copies of {one_copy} tiles need {n_tiles} features; set memory_size")
            self.copy_stride = one_copy if self.copies > 1 else 0
        self.n_features = n_tiles + (1 if self.bias else 0)
        self.bias_index = n_tiles if self.bias else -1

    def _set_state(self, state: dict[str, np.ndarray]) -> None:
        n_tilings, n_dims = sum(self.tilings), self.low.shape[0]
        expected = {"offsets": (np.float64, (n_tilings, n_dims)), "mult": (np.uint64, (n_tilings, n_dims))}
        expected["base"] = (np.uint64, (n_tilings,))
        for name, (dtype, shape) in expected.items():
            if name not in state:
                raise ValueError(f"tile coder state lacks {name!r}")
            value = np.asarray(state[name])
            if value.dtype != dtype or value.shape != shape:
                raise ValueError(
                    f"tile coder state {name!r} is {value.dtype}{list(value.shape)}; expected "
                    f"{np.dtype(dtype)}{list(shape)} for {n_tilings} tilings of {n_dims} inputs"
                )
        offsets = np.array(state["offsets"], dtype=np.float64)
        if not np.all((offsets >= 0.0) & (offsets < 1.0)):
            raise ValueError("tile coder offsets must lie in [0, 1) tile widths")
        if self.memory_size == 0:
            mult, base = _unhashed_layout(n_dims, self.tilings, self.widths)
            if not (np.array_equal(mult, state["mult"]) and np.array_equal(base, state["base"])):
                raise ValueError("tile coder state does not match the unhashed layout of its tilings")
        self.offsets = offsets
        self.mult = np.array(state["mult"], dtype=np.uint64)
        self.base = np.array(state["base"], dtype=np.uint64)

    @classmethod
    def from_state_dict(cls, state: dict[str, np.ndarray], **spec) -> TileCoder:
        """A coder with saved offsets and hashing constants; ``spec`` as for the constructor."""
        return cls(**spec, state=state)

    def to_state_dict(self) -> dict[str, np.ndarray]:
        """Everything random about this coder (copies): offsets, mult, base."""
        return {"offsets": self.offsets.copy(), "mult": self.mult.copy(), "base": self.base.copy()}

    @property
    def n_dims(self) -> int:
        return int(self.low.shape[0])

    @property
    def n_tilings(self) -> int:
        return int(self.offsets.shape[0])

    @property
    def n_active(self) -> int:
        """Active features per input: one per tiling, plus the bias."""
        return self.n_tilings + (1 if self.bias else 0)

    @property
    def kernel_args(self) -> Tiles:
        """The coder as numba kernels take it (see :func:`add_keys`, :func:`finalize`)."""
        return Tiles(
            low=self.low,
            span=self.span,
            inv_width=self.inv_width,
            offsets=self.offsets,
            mult=self.mult,
            base=self.base,
            per_dim=self.per_dim,
            memory_size=self.memory_size,
            bias_index=self.bias_index,
            copy_stride=np.uint64(self.copy_stride),
        )

    def _inputs(self, x) -> np.ndarray:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim not in (1, 2) or x.shape[-1] != self.n_dims:
            raise ValueError(f"inputs must be [{self.n_dims}] or [N, {self.n_dims}]; got shape {x.shape}")
        if not np.all(np.isfinite(x)):
            bad = np.argwhere(~np.isfinite(x))[0]
            raise ValueError(f"inputs must be finite; got {float(x[tuple(bad)])!r} at index {tuple(bad.tolist())}")
        return np.ascontiguousarray(x)

    def active(self, x) -> np.ndarray:
        """Active feature indices: int64 [n_active] for one input [n_dims], [N, n_active] for [N, n_dims]."""
        x = self._inputs(x)
        out = _active_many(np.atleast_2d(x), self.kernel_args)
        return out[0] if x.ndim == 1 else out


@numba.njit(cache=True, inline="always")
def normalize(x, low, span, out):  # pragma: no cover - compiled
    """out[d] = x[d] normalized by its range and clipped to [0, 1]."""
    for d in range(x.shape[0]):
        u = (x[d] - low[d]) / span[d]
        out[d] = min(max(u, 0.0), 1.0)


@numba.njit(cache=True, inline="always")
def add_keys(u, d_first, inv_width, offsets, mult, per_dim, keys):  # pragma: no cover - compiled
    """keys[t] += sum_d mult[t, d_first + d] * c[t, d_first + d] over the normalized inputs ``u``."""
    for t in range(keys.shape[0]):
        key = keys[t]
        for i in range(u.shape[0]):
            d = d_first + i
            c = np.int64(np.floor(u[i] * inv_width[t] + offsets[t, d]))
            if c < 0:
                c = 0
            elif c >= per_dim[t]:
                c = per_dim[t] - 1
            key += mult[t, d] * np.uint64(c)
        keys[t] = key


@numba.njit(cache=True, inline="always")
def finalize(key, memory_size):  # pragma: no cover - compiled
    """A key's feature index: the key itself when unhashed, else its top 32 bits mapped onto the memory."""
    if memory_size == 0:
        return np.int64(key)
    return np.int64(((key >> np.uint64(32)) * np.uint64(memory_size)) >> np.uint64(32))


@numba.njit(cache=True)
def _active_many(x, tiles):  # pragma: no cover - compiled
    n_tilings = tiles.base.shape[0]
    n_active = n_tilings + (1 if tiles.bias_index >= 0 else 0)
    out = np.empty((x.shape[0], n_active), dtype=np.int64)
    u = np.empty(x.shape[1])
    keys = np.empty(n_tilings, dtype=np.uint64)
    for n in range(x.shape[0]):
        normalize(x[n], tiles.low, tiles.span, u)
        keys[:] = tiles.base
        add_keys(u, 0, tiles.inv_width, tiles.offsets, tiles.mult, tiles.per_dim, keys)
        for t in range(n_tilings):
            out[n, t] = finalize(keys[t], tiles.memory_size)
        if tiles.bias_index >= 0:
            out[n, n_tilings] = tiles.bias_index
    return out
