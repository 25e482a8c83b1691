"""The tile coder: active counts, ranges, generalization, seeding, hashing bounds, the NumPy oracle."""

from __future__ import annotations

import numpy as np
import pytest

from gamma_net_core.reference import ReferenceTileCoder
from gamma_net_core.tilecoding import TileCoder, tiles_per_dimension

SQUARE = {"tilings": (20, 20, 30), "widths": (1.0, 0.5, 0.1)}
ARM = {"tilings": (100,), "widths": (1.0,), "memory_size": 2048, "bias": True}


def coder(dims=3, seed=0, low=0.0, high=1.0, **spec):
    spec = {**SQUARE, **spec}
    return TileCoder(low=[low] * dims, high=[high] * dims, rng=np.random.default_rng(seed), **spec)


def test_one_index_per_tiling_plus_bias():
    c = coder(dims=3)
    assert c.n_active == 70 and c.active([0.2, 0.4, 0.6]).shape == (70,)
    assert c.active(np.full((5, 3), 0.5)).shape == (5, 70)
    arm = coder(dims=4, **ARM)
    assert (arm.n_active, arm.n_features, arm.bias_index) == (101, 2049, 2048)
    idx = arm.active(np.random.default_rng(0).random((50, 4)))
    assert idx.dtype == np.int64 and np.all(idx[:, -1] == 2048)


def test_unhashed_layout_gives_each_tiling_its_own_block():
    c = coder(dims=2)
    sizes = np.repeat([tiles_per_dimension(w) ** 2 for w in SQUARE["widths"]], SQUARE["tilings"])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    assert c.n_features == sizes.sum()
    idx = c.active(np.random.default_rng(1).random((500, 2)))
    assert np.all((idx >= starts) & (idx < starts + sizes))
    # Distinct tiles of one tiling map to distinct indices: no collisions without hashing.
    assert len(np.unique(coder(dims=1, tilings=(1,), widths=(0.1,)).active(np.linspace(0, 1, 101)[:, None]))) == 11


def test_inputs_are_normalized_by_their_ranges_and_clipped():
    a = TileCoder(low=[0.0, -5.0], high=[100.0, 5.0], rng=np.random.default_rng(3), **SQUARE)
    b = TileCoder(low=[0.0, 0.0], high=[1.0, 1.0], rng=np.random.default_rng(3), **SQUARE)
    np.testing.assert_array_equal(a.active([25.0, 0.0]), b.active([0.25, 0.5]))
    # Outside the range: the edge tiles.
    np.testing.assert_array_equal(a.active([-40.0, 99.0]), a.active([0.0, 5.0]))


def test_generalization_follows_the_tile_width():
    c = coder(dims=1, tilings=(30,), widths=(0.1,))
    base = c.active([0.5])
    shared = [np.mean(c.active([0.5 + d]) == base) for d in (0.0, 0.02, 0.05, 0.08, 0.11)]
    assert shared[0] == 1.0 and shared[-1] == 0.0  # beyond one tile width nothing is shared
    assert shared[1] > shared[2] > shared[3] > 0  # overlap shrinks with distance
    assert abs(shared[2] - 0.5) < 0.15  # half a tile away: about half the tilings agree


def test_offsets_are_asymmetric_and_spread_over_the_tile():
    c = coder(dims=2)
    for d in (0, 1):  # displacement 1 and 3 are coprime with 20: one offset per 1/20 of a tile
        first = np.sort(c.offsets[:20, d])
        assert np.all(np.floor(first * 20) == np.arange(20))
    assert np.all((c.offsets >= 0) & (c.offsets < 1))
    assert not np.allclose(c.offsets[:20, 0], c.offsets[:20, 1])


def test_same_seed_same_coder_other_seed_other_offsets():
    x = np.random.default_rng(4).random((200, 3))
    np.testing.assert_array_equal(coder(seed=9).active(x), coder(seed=9).active(x))
    assert not np.array_equal(coder(seed=9).offsets, coder(seed=10).offsets)
    assert not np.array_equal(coder(seed=9).active(x), coder(seed=10).active(x))


@pytest.mark.parametrize(
    "spec, dims",
    [
        (SQUARE, 3),
        (ARM, 4),
        ({"tilings": (7, 5), "widths": (0.3, 0.07), "memory_size": 0, "bias": True}, 2),
        ({"tilings": (9,), "widths": (0.25,), "memory_size": 97, "bias": False}, 1),
    ],
)
def test_numba_coder_equals_the_numpy_coder(spec, dims):
    spec = {"memory_size": 0, "bias": False, **spec}
    c = TileCoder(low=[-1.0] * dims, high=[2.0] * dims, rng=np.random.default_rng(5), **spec)
    ref = ReferenceTileCoder(low=[-1.0] * dims, high=[2.0] * dims, state=c.to_state_dict(), **spec)
    x = np.random.default_rng(6).uniform(-2.0, 3.0, size=(1000, dims))  # some outside the range
    np.testing.assert_array_equal(c.active(x), np.stack([ref.active(v) for v in x]))


def test_hashing_stays_in_memory_and_spreads():
    c = coder(dims=4, **ARM)
    x = np.random.default_rng(7).uniform(-1, 2, size=(5000, 4))
    idx = c.active(x)[:, :-1]
    assert idx.min() >= 0 and idx.max() < 2048
    # 100 tilings x 2**4 tiles = 1600 tiles hashed into 2048 cells: a good hash fills about
    # 2048 * (1 - exp(-1600 / 2048)) ~ 1108 of them.
    assert 1000 < len(np.unique(idx)) < 1250
    tiny = coder(dims=2, tilings=(50,), widths=(0.05,), memory_size=13)
    assert set(np.unique(tiny.active(np.random.default_rng(8).random((3000, 2))))) == set(range(13))


def test_state_round_trip_and_refusals():
    c = coder(dims=4, **ARM)
    spec = {"low": [0.0] * 4, "high": [1.0] * 4, **ARM}
    again = TileCoder.from_state_dict(c.to_state_dict(), **spec)
    x = np.random.default_rng(9).random((100, 4))
    np.testing.assert_array_equal(again.active(x), c.active(x))
    state = c.to_state_dict()
    with pytest.raises(ValueError, match="offsets"):
        TileCoder.from_state_dict({**state, "offsets": state["offsets"][:, :3]}, **spec)
    with pytest.raises(ValueError, match="lacks 'base'"):
        TileCoder.from_state_dict({k: v for k, v in state.items() if k != "base"}, **spec)
    unhashed = coder(dims=2).to_state_dict()
    unhashed["base"] = unhashed["base"] + np.uint64(1)
    with pytest.raises(ValueError, match="unhashed layout"):
        TileCoder.from_state_dict(unhashed, low=[0, 0], high=[1, 1], **SQUARE)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"low": [0.0], "high": [0.0]}, "low < high"),
        ({"low": [0.0], "high": [np.inf]}, "finite"),
        ({"widths": (1.0, 0.5)}, "equal length"),
        ({"widths": (1.0, 0.0, 0.1)}, "widths must be finite and > 0"),
        ({"tilings": (20, 0, 30)}, "at least one tiling"),
        ({"memory_size": -1}, "memory_size"),
    ],
)
def test_bad_settings_are_refused(kwargs, message):
    args = {"low": [0.0], "high": [1.0], **SQUARE, "rng": np.random.default_rng(0), **kwargs}
    with pytest.raises(ValueError, match=message):
        TileCoder(**args)


def test_bad_inputs_name_the_value():
    c = coder(dims=3)
    with pytest.raises(ValueError, match="got nan at index \\(1,\\)"):
        c.active([0.1, np.nan, 0.3])
    with pytest.raises(ValueError, match="got inf at index \\(1, 2\\)"):
        c.active([[0.1, 0.2, 0.3], [0.1, 0.2, np.inf]])
    with pytest.raises(ValueError, match="must be \\[3\\]"):
        c.active([0.1, 0.2])
    with pytest.raises(ValueError, match="one feature per tile would need"):
        TileCoder(low=[0] * 8, high=[1] * 8, tilings=(30,), widths=(0.1,), rng=np.random.default_rng(0))
