"""Cuts in a recording (``learn_recording(..., cuts=...)``): a pause or a truncation, not a termination.

A cut after transition t means transition t + 1 does not start at S_{t+1}. Transition t is learned as
any other (TD(0) bootstraps on S_{t+1}), but no lambda-return or trace reaches past it: the forward
view's returns end there (bootstrapping on S_{t+1}), the backward view's traces are emptied after it.
"""

from __future__ import annotations

import numpy as np
import pytest

from gamma_net_core.linear import FixedTimescaleConfig, FixedTimescaleTD, GammaNetConfig, LinearGammaNet, uses_ladder
from gamma_net_core.reference import ReferenceLinearTD
from gamma_net_core.timescales import TimescaleSampler, TimescaleSampling

T = 400
SAMPLING = TimescaleSampling(n_gamma=1, n_tau=2)


def data(seed: int = 0):
    rng = np.random.default_rng(seed)
    x = np.cumsum(rng.normal(0.0, 0.05, T + 1)) % 1.0
    c = (rng.random(T) < 0.05) * 5.0
    cuts = np.zeros(T, dtype=bool)
    cuts[[57, 58, 200, T - 1]] = True
    return x[:-1, None], c, x[1:, None], cuts


def config(lam: float, view: str = "forward") -> GammaNetConfig:
    return GammaNetConfig(timescale_input="both", state_low=(0.0,), state_high=(1.0,), tilings=(4,),
                          tile_widths=(0.25,), memory_size=0, step_size=0.3, lam=lam, lambda_view=view)  # fmt: skip


@pytest.mark.parametrize("lam, view", [(0.0, "forward"), (0.8, "forward"), (0.8, "backward")])
def test_cuts_match_the_numpy_reference(lam, view):
    s_t, c, s_tp1, cuts = data()
    cfg = config(lam, view)
    fast = LinearGammaNet(cfg, rng=np.random.default_rng(1))
    ref = ReferenceLinearTD(cfg, rng=np.random.default_rng(1))
    g = TimescaleSampler(SAMPLING, np.random.default_rng(2), fixed=uses_ladder(cfg)).sample_many(T)
    fast.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, timescales=g, cuts=cuts)
    ref.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, timescales=g, cuts=cuts)
    assert np.abs(ref.w).max() > 0.01
    np.testing.assert_allclose(fast.weights, ref.w, rtol=0, atol=1e-12)


@pytest.mark.parametrize("lam, view", [(0.8, "forward"), (0.8, "backward")])
def test_no_lambda_return_or_trace_crosses_a_cut(lam, view):
    """With a cut, learning the recording is learning its two pieces apart, the traces reset between them;
    without one, the returns run across and the weights differ."""
    s_t, c, s_tp1, _ = data()
    cfg = config(lam, view)
    g = TimescaleSampler(SAMPLING, np.random.default_rng(2), fixed=uses_ladder(cfg)).sample_many(T)
    cuts = np.zeros(T, dtype=bool)
    cuts[199] = True
    whole, plain, pieces = (LinearGammaNet(cfg, rng=np.random.default_rng(1)) for _ in range(3))
    whole.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, timescales=g, cuts=cuts)
    plain.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, timescales=g)
    for a, b in ((0, 200), (200, T)):
        pieces.learn_recording(states_t=s_t[a:b], cumulants=c[a:b], states_tp1=s_tp1[a:b], timescales=g[a:b],
                               cuts=cuts[a:b])  # fmt: skip
    np.testing.assert_array_equal(whole.weights, pieces.weights)
    assert whole.window_size == 0 or view == "forward"
    assert not np.array_equal(whole.weights, plain.weights)


def test_td0_bootstraps_across_nothing_so_a_cut_changes_nothing():
    s_t, c, s_tp1, cuts = data()
    base = [FixedTimescaleTD(FixedTimescaleConfig(gamma=0.9, state_low=(0.0,), state_high=(1.0,)),
                             rng=np.random.default_rng(1)) for _ in range(2)]  # fmt: skip
    base[0].learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, cuts=cuts)
    base[1].learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1)
    np.testing.assert_array_equal(base[0].weights, base[1].weights)


def test_cuts_of_the_wrong_shape_are_refused_by_name():
    s_t, c, s_tp1, _ = data()
    net = LinearGammaNet(config(0.0), rng=np.random.default_rng(1))
    with pytest.raises(ValueError, match=r"cuts must be \[400\]"):
        net.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, timescales=np.full((T, 1), 0.5),
                            cuts=np.zeros(T - 1, dtype=bool))  # fmt: skip
