"""The timescale inputs' own tile width (``timescale_tile_width``): the compiled learner against the numpy
reference, what the width does to the tiles two timescales share, and checkpoints from before the setting."""

from __future__ import annotations

import numpy as np
import pytest
from test_linear import arm_data, net_and_sampler

from gamma_net_core.linear import GammaNetConfig, LinearGammaNet
from gamma_net_core.linear.coding import coder_layout
from gamma_net_core.reference import ReferenceLinearTD
from gamma_net_core.timescales import TimescaleSampler, TimescaleSampling

SMALL = dict(tilings=(8,), tile_widths=(0.25,), memory_size=0, step_size=0.1)


@pytest.mark.parametrize("width", [1 / 16, 1.0])
def test_the_compiled_learner_matches_the_reference_with_a_timescale_tile_width(width):
    # 1/16 narrower than the state's 1/4 (every tile narrowed, the state's range stretched), 1.0 wider.
    config = GammaNetConfig(timescale_input="both", **SMALL, timescale_tile_width=width)
    sampling = TimescaleSampling(n_gamma=1, n_tau=29)
    s_t, c, s_tp1, terminals = arm_data(1000)
    net, sampler = net_and_sampler(config, sampling)
    ref = ReferenceLinearTD(config, rng=np.random.default_rng(0))
    ref_sampler = TimescaleSampler(sampling, np.random.default_rng(1))
    net.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, timescales=sampler, terminals=terminals)
    ref.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, timescales=ref_sampler, terminals=terminals)
    assert np.abs(ref.w).max() > 0.01
    np.testing.assert_allclose(net.weights, ref.w, rtol=0, atol=1e-12)
    gammas = np.array([0.0, 0.5, 0.9, 0.99])
    np.testing.assert_allclose(net.predict(s_t[0], gammas), ref.predict(s_t[0], gammas), rtol=1e-12)


def shared_tiles(config: GammaNetConfig, state, gamma_a: float, gamma_b: float) -> int:
    """How many of the active tiles two timescales share at one state."""
    net = LinearGammaNet(config, rng=np.random.default_rng(0))
    tau = 1.0 / (1.0 - np.array([gamma_a, gamma_b]))
    coder = net.coder
    a = coder.active(np.concatenate([state, [gamma_a, tau[0] / config.tau_scale]]))
    b = coder.active(np.concatenate([state, [gamma_b, tau[1] / config.tau_scale]]))
    return len(set(a[:-1].tolist()) & set(b[:-1].tolist()))


def test_narrow_timescale_tiles_share_fewer_tiles_between_timescales_and_keep_the_states():
    """tau 50 and 60 share most tiles at the state's width 1/4 and few at a timescale width of 1/16; the state's
    own tiles are as wide as before: two states 0.1 apart share as many tiles either way."""
    same = GammaNetConfig(timescale_input="both", **SMALL)
    narrow = GammaNetConfig(timescale_input="both", **SMALL, timescale_tile_width=1 / 16)
    state = np.array([0.3, 0.6])
    g50, g60 = 1 - 1 / 50, 1 - 1 / 60
    assert shared_tiles(same, state, g50, g60) >= 4
    assert shared_tiles(narrow, state, g50, g60) <= 1

    def state_overlap(config):
        net = LinearGammaNet(config, rng=np.random.default_rng(0))
        a = net.coder.active(np.array([0.3, 0.6, g50, 50 / 100]))
        b = net.coder.active(np.array([0.4, 0.6, g50, 50 / 100]))
        return len(set(a[:-1].tolist()) & set(b[:-1].tolist()))

    assert abs(state_overlap(same) - state_overlap(narrow)) <= 2, (state_overlap(same), state_overlap(narrow))


def test_the_layout_is_unchanged_without_a_timescale_tile_width():
    config = GammaNetConfig(timescale_input="both", **SMALL)
    assert coder_layout(config, "both") == ((0.0, 0.0, 0.0, 0.0), (1.0, 1.0, 1.0, 1.0), (0.25,))
    assert coder_layout(
        GammaNetConfig(timescale_input="both", **SMALL, timescale_tile_width=0.25), "both"
    ) == coder_layout(config, "both")
    _, high, widths = coder_layout(GammaNetConfig(timescale_input="both", **SMALL, timescale_tile_width=1 / 16), "both")
    assert high == (4.0, 4.0, 1.0, 1.0) and widths == (1 / 16,)


def test_a_checkpoint_from_before_the_setting_loads_and_predicts_the_same(tmp_path):
    """A checkpoint saved before ``timescale_tile_width`` existed has no such key: it codes as it did."""
    from gamma_net_core.checkpoint import load_npz, save_npz
    from gamma_net_core.linear.checkpoints import VERSION

    config = GammaNetConfig(timescale_input="both", **SMALL)
    net, sampler = net_and_sampler(config, TimescaleSampling())
    s_t, c, s_tp1, terminals = arm_data(300)
    net.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, timescales=sampler, terminals=terminals)
    path = net.save(tmp_path / "net.npz")
    saved, arrays, meta = load_npz(path, kind=net.kind, version=VERSION)
    assert saved.pop("timescale_tile_width") == 0.0
    save_npz(path, kind=net.kind, version=VERSION, config=saved, arrays=arrays, meta=meta)
    again = LinearGammaNet.load(path)
    assert again.config == config
    gammas = np.array([0.0, 0.9, 0.99])
    np.testing.assert_array_equal(again.predict(s_t[:50], gammas), net.predict(s_t[:50], gammas))
