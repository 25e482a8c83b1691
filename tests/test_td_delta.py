"""TD(Delta), the ladder of value differences: a hand-computed step and the exact values of a Markov chain."""

from __future__ import annotations

import numpy as np
import pytest
from test_lambda import CHAIN_STEPS, N_STATES, chain, chain_config, exact

from gamma_net_core.linear import GammaNetConfig
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


@pytest.mark.parametrize(
    "gammas, lam, message",
    [((0.9, 0.5), 0.0, "strictly increasing"), ((0.5, 1.0), 0.0, r"must be in \[0, 1\)"), ((0.5, 0.9), 0.5, "lam")],
)
def test_bad_ladders_are_refused(gammas, lam, message):
    import dataclasses

    with pytest.raises(ValueError, match=message):
        TDDelta(dataclasses.replace(one_tile_per_state(), lam=lam), gammas, rng=np.random.default_rng(0))
