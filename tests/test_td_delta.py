"""TD(Delta), the ladder of value differences: a hand-computed step, the exact values of a Markov chain, and
what per-component settings (Romoff et al. 2019) change against fixed-timescale TD(0)."""

from __future__ import annotations

import numpy as np
import pytest
from test_lambda import CHAIN_STEPS, N_STATES, chain, chain_config, exact

from gamma_net_core.linear import FixedTimescaleTD, GammaNetConfig, fixed_timescale_config
from gamma_net_core.linear.td_delta import TDDelta

LADDER = (0.0, 0.5, 0.8, 0.9)


def one_tile_per_state():
    return GammaNetConfig(state_low=(0.0,), state_high=(1.0,), tilings=(1,), tile_widths=(0.5,), memory_size=0,
                          bias=False, step_size=0.5)  # fmt: skip


def test_one_step_by_hand():
    """From zero weights, C = 2 into another state: delta_0 = 2, delta_1 = (0.5 - 0) V_0(S') + 0.5 D_1(S') - 0 = 0."""
    net = TDDelta(one_tile_per_state(), (0.0, 0.5), rng=np.random.default_rng(0))
    net.learn_recording(states_t=[[0.1]], cumulants=[2.0], states_tp1=[[0.9]])
    np.testing.assert_allclose(net.predict([[0.1], [0.9]]), [[1.0, 1.0], [0.0, 0.0]])  # alpha 0.5 x delta 2
    # Back to the first state: V_0(S') = 1 now feeds the second rung: delta_1 = 0.5 * 1 = 0.5, step 0.25.
    net.learn_recording(states_t=[[0.9]], cumulants=[0.0], states_tp1=[[0.1]])
    np.testing.assert_allclose(net.predict([[0.9]]), [[0.0, 0.25]])
    assert net.update_count == 2


def test_td_delta_reaches_the_exact_values_on_a_markov_chain():
    P, c, _, x_t, cumulants, x_tp1 = chain(CHAIN_STEPS)
    net = TDDelta(chain_config(0.0, CHAIN_STEPS), LADDER, rng=np.random.default_rng(0))
    net.learn_recording(states_t=x_t, cumulants=cumulants, states_tp1=x_tp1)
    got = net.predict(((np.arange(N_STATES) + 0.5) / N_STATES)[:, None])
    for rung, gamma in enumerate(LADDER):
        want = exact(P, c, gamma)
        assert np.abs(got[:, rung] - want).max() < 0.05 * np.abs(want).max(), (gamma, got[:, rung], want)


def test_one_setting_for_every_component_is_fixed_timescale_td0_and_per_component_settings_are_not():
    """lambda_l = 0 and one alpha: the components' TD errors sum to each V_gamma's own, so the predictions are
    fixed-timescale TD(0)'s to rounding. Per-component lambdas and step sizes learn something else."""
    steps = 3000
    _, _, _, x_t, cumulants, x_tp1 = chain(steps)
    config = chain_config(0.0, 0)
    states = ((np.arange(N_STATES) + 0.5) / N_STATES)[:, None]
    fixed = []
    for gamma in LADDER:
        base = FixedTimescaleTD(fixed_timescale_config(config, gamma), rng=np.random.default_rng(0))
        base.learn_recording(states_t=x_t, cumulants=cumulants, states_tp1=x_tp1)
        fixed.append(base.predict(states))
    fixed = np.stack(fixed, axis=1)
    same = TDDelta(config, LADDER, rng=np.random.default_rng(0))
    same.learn_recording(states_t=x_t, cumulants=cumulants, states_tp1=x_tp1)
    np.testing.assert_allclose(same.predict(states), fixed, rtol=0, atol=1e-12)
    own = TDDelta(config, LADDER, rng=np.random.default_rng(0), lams=(0.0, 0.5, 0.8, 0.9),
                  step_sizes=(0.1, 0.1, 0.05, 0.02))  # fmt: skip
    own.learn_recording(states_t=x_t, cumulants=cumulants, states_tp1=x_tp1)
    assert np.abs(own.predict(states) - fixed)[:, 1:].max() > 1e-3  # far beyond rounding
    np.testing.assert_allclose(own.predict(states)[:, 0], fixed[:, 0], rtol=0, atol=1e-12)  # D_0 is V_0: the same


@pytest.mark.parametrize("lams", [(0.0, 0.5, 0.8, 0.9), 0.9])
def test_td_delta_with_per_component_lambdas_reaches_the_exact_values(lams):
    P, c, _, x_t, cumulants, x_tp1 = chain(CHAIN_STEPS)
    net = TDDelta(chain_config(0.0, CHAIN_STEPS), LADDER, rng=np.random.default_rng(0), lams=lams,
                  step_sizes=(0.1, 0.1, 0.05, 0.05))  # fmt: skip
    net.learn_recording(states_t=x_t, cumulants=cumulants, states_tp1=x_tp1)
    got = net.predict(((np.arange(N_STATES) + 0.5) / N_STATES)[:, None])
    for rung, gamma in enumerate(LADDER):
        want = exact(P, c, gamma)
        assert np.abs(got[:, rung] - want).max() < 0.05 * np.abs(want).max(), (gamma, got[:, rung], want)


def test_a_termination_cuts_the_component_traces():
    net = TDDelta(one_tile_per_state(), (0.0, 0.9), rng=np.random.default_rng(0), lams=(0.0, 0.9))
    net.learn_recording(states_t=[[0.1], [0.9]], cumulants=[1.0, 1.0], states_tp1=[[0.9], [0.1]],
                        terminals=[False, True])  # fmt: skip
    assert not np.any(net._Z)


@pytest.mark.parametrize(
    "gammas, settings, message",
    [((0.9, 0.5), {}, "strictly increasing"), ((0.5, 1.0), {}, r"must be in \[0, 1\)"),
     ((0.5, 0.9), {"lams": (0.5, 1.0)}, r"lams must each be \[0, 1\); got 1.0 for component 1"),
     ((0.5, 0.9), {"step_sizes": (0.1,) * 3}, "one per component"),
     ((0.5, 0.9), {"step_sizes": (0.1, float("nan"))}, "step_sizes must each be >= 0; got nan")],
)  # fmt: skip
def test_bad_ladders_and_settings_are_refused(gammas, settings, message):
    with pytest.raises(ValueError, match=message):
        TDDelta(one_tile_per_state(), gammas, rng=np.random.default_rng(0), **settings)
