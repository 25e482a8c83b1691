"""Screen preprocessing as in Dopamine's Atari agents: grayscale, max of two frames, area resize.

The ALE screen is 210x160 grayscale. Dopamine (whose agents generated the paper's data)
takes the pixel-wise maximum of the last two emulated frames of a step (Atari games
flicker: a sprite may be drawn on alternate frames only) and resizes the result to 84x84
with OpenCV's ``INTER_AREA``: each output pixel is the average of the input area it covers.

OpenCV is not a dependency here. Area averaging is separable (the overlap of two
rectangles is the product of the overlaps of their sides), so the resize is a weighted
sum over a few input rows, then a few columns. The arithmetic is exact: measured in units
of 1/out_size, every overlap is an integer, so each output pixel is an integer sum divided
by in_h * in_w, rounded half up. :func:`resize_area` does this with precomputed taps;
:func:`resize_area_reference`, a plain loop over output pixels and the input pixels they
cover, is its oracle.
"""

from __future__ import annotations

import functools

import numpy as np


def _overlap(o: int, i: int, in_size: int, out_size: int) -> int:
    """Overlap of output cell o and input cell i, in units of 1/out_size input pixels.

    Output cell o spans [o * in_size, (o + 1) * in_size) and input cell i spans
    [i * out_size, (i + 1) * out_size) in those units.
    """
    return max(0, min((o + 1) * in_size, (i + 1) * out_size) - max(o * in_size, i * out_size))


def area_weights(in_size: int, out_size: int) -> np.ndarray:
    """Integer weights [out_size, in_size]; row o sums to in_size (divide by it for fractions)."""
    if not 0 < out_size <= in_size:
        raise ValueError(f"area resize shrinks only: out_size {out_size} must be in [1, {in_size}]")
    return np.array(
        [[_overlap(o, i, in_size, out_size) for i in range(in_size)] for o in range(out_size)], dtype=np.int64
    )


@functools.lru_cache(maxsize=16)
def _taps(in_size: int, out_size: int) -> tuple[np.ndarray, np.ndarray]:
    """The non-zero weights of :func:`area_weights` as (indices [out, taps], weights [out, taps])."""
    weights = area_weights(in_size, out_size)
    taps = int((weights > 0).sum(axis=1).max())
    index = np.zeros((out_size, taps), dtype=np.intp)
    value = np.zeros((out_size, taps), dtype=np.int64)
    for o in range(out_size):
        nz = np.flatnonzero(weights[o])
        index[o, : nz.size] = nz
        value[o, : nz.size] = weights[o, nz]
    return index, value


def resize_area(frame: np.ndarray, size: int) -> np.ndarray:
    """Area-average ``frame`` (uint8 [H, W]) down to uint8 [size, size], rounding half up."""
    h, w = frame.shape
    rows, row_w = _taps(h, size)
    cols, col_w = _taps(w, size)
    # Rows first: [size, taps, W] -> [size, W]; then columns: [size, size, taps] -> [size, size].
    vertical = np.einsum("otw,ot->ow", frame[rows].astype(np.int64), row_w)
    both = np.einsum("rot,ot->ro", vertical[:, cols], col_w)
    denominator = h * w
    return ((2 * both + denominator) // (2 * denominator)).astype(np.uint8)


def resize_area_reference(frame: np.ndarray, size: int) -> np.ndarray:
    """The oracle of :func:`resize_area`: each output pixel is the overlap-weighted mean of its area."""
    h, w = frame.shape
    out = np.zeros((size, size), dtype=np.uint8)
    for oy in range(size):
        for ox in range(size):
            total = 0
            # Input pixels that output cell (oy, ox) can touch; _overlap is 0 for the others.
            for y in range(oy * h // size, min(h, (oy + 1) * h // size + 1)):
                for x in range(ox * w // size, min(w, (ox + 1) * w // size + 1)):
                    total += _overlap(oy, y, h, size) * _overlap(ox, x, w, size) * int(frame[y, x])
            # total / (h * w) is the mean in pixel units; round half up in integers.
            out[oy, ox] = (2 * total + h * w) // (2 * h * w)
    return out


def pool_and_resize(previous: np.ndarray, last: np.ndarray, size: int) -> np.ndarray:
    """The observation of one step: max of the last two screens (against flicker), resized."""
    return resize_area(np.maximum(previous, last), size)
