"""Readouts (hyperbolic, windowed) against exact returns of known signals; online error against hand-made returns."""

from __future__ import annotations

import numpy as np
import pytest

from gamma_net_core.horde.learner import HordeLearner
from gamma_net_core.horde.online_error import OnlineError
from gamma_net_core.horde.questions import Readout
from gamma_net_core.horde.readouts import (
    discount_function,
    exact_readout_returns,
    horizon,
    ideal_discount,
    readout_weights,
)
from gamma_net_core.linear import GammaNetConfig
from gamma_net_core.returns import discounted_returns
from gamma_net_core.timescales import TimescaleSampling

HYPERBOLIC = Readout(name="hyperbolic", kind="hyperbolic", k=0.5)
WINDOW = Readout(name="next_1s", kind="window", seconds=1.0)


def test_readouts_approximate_their_discount_functions():
    t = np.arange(60)
    g, c = readout_weights(HYPERBOLIC, rate_hz=10.0, tau_max=100.0)
    d = discount_function(g, c, t)
    # The midpoint rule leaves out the weight above gamma_max = 0.99: 1 - 0.99^2 = 0.02 at most.
    assert np.max(np.abs(d - ideal_discount(HYPERBOLIC, t, rate_hz=10.0))) < 0.021
    g, c = readout_weights(WINDOW, rate_hz=10.0, tau_max=100.0)
    d = discount_function(g, c, np.arange(700))
    assert abs(d.sum() - 10.0) < 0.5  # the sum over the next 10 steps, about
    # a box from decaying exponentials: about 1 early in the window, a soft edge, a small undershoot after
    assert np.all(d[:6] > 0.85) and np.mean(d[:10]) > 0.85 and np.max(np.abs(d[25:])) < 0.05


def test_exact_readout_returns_are_the_discount_function_applied_to_the_signal():
    rng = np.random.default_rng(0)
    c = rng.normal(size=300)
    cont = (rng.random(300) > 0.05).astype(float)
    g, a = readout_weights(WINDOW, rate_hz=10.0, tau_max=50.0)
    got = exact_readout_returns(c, g, a, continuations=cont)
    d = discount_function(g, a, np.arange(300))
    for s in (0, 17, 150, 299):
        weight, want = 1.0, 0.0
        for j in range(s, 300):
            want += d[j - s] * weight * c[j]
            weight *= cont[j]
        assert got[s] == pytest.approx(want, rel=1e-9, abs=1e-9)


def test_a_learned_readout_predicts_the_exact_readout_return_of_a_known_signal():
    """A periodic cumulant with the phase as state: every readout's return is a function of the phase."""
    period = 20
    phases = np.arange(6000) % period
    signal = (phases < 5).astype(float)  # on for 5 steps of every 20
    # one tile per (phase, gamma, tau): each readout gamma learns its own value, tabular
    config = GammaNetConfig(
        tilings=(1,),
        tile_widths=(0.01,),
        memory_size=0,
        bias=False,
        step_size=0.5,
        state_low=(0.0,),
        state_high=(float(period),),
        timescale_input="both",
        tau_scale=50.0,
    )
    # trained on every gamma the readouts read
    horde = HordeLearner(
        config,
        names=["pulse"],
        readouts=[HYPERBOLIC, WINDOW],
        rate_hz=10.0,
        timescales=TimescaleSampling(n_gamma=0, n_tau=1, tau_max=50),
        rng=np.random.default_rng(0),
    )
    train = np.unique(np.concatenate([horde.readout_weights(r.name)[0] for r in (HYPERBOLIC, WINDOW)]))
    for n in range(phases.shape[0] - 1):
        horde.learn([phases[n] + 0.5], [signal[n + 1]], [phases[n + 1] + 0.5], gammas=train)
    for r in (HYPERBOLIC, WINDOW):
        g, a = horde.readout_weights(r.name)
        exact = exact_readout_returns(signal[1:], g, a)[: period * 10]  # from steps far from the recording's end
        for p in range(period):
            learned = horde.readout([p + 0.5], r.name)[0]
            assert learned == pytest.approx(exact[p], abs=0.05 * np.max(np.abs(exact)))


def brute_returns(c, cont, d):
    """Complete returns by definition: sum_a d(a) (continuations before) C, only where all H cumulants arrived."""
    H, T = d.shape[0], c.shape[0]
    out = np.full(T, np.nan)
    for s in range(T):
        weight, ret = 1.0, 0.0
        for a in range(H):
            if s + a + 1 >= T:
                if weight != 0.0:
                    ret = np.nan
                break
            ret += d[a] * weight * c[s + a + 1]
            weight *= cont[s + a + 1]
            if weight == 0.0:
                break
        out[s] = ret
    return out


def test_online_error_matches_errors_against_returns_computed_by_definition():
    rng = np.random.default_rng(2)
    T = 400
    c = rng.normal(1.0, 1.0, (T, 2))
    cont = np.ones((T, 2))
    cont[:, 1] = (rng.random(T) > 0.1).astype(float)  # question 1 terminates now and then
    gammas = np.array([0.0, 0.5, 0.9])
    rg, rc = readout_weights(WINDOW, rate_hz=5.0, tau_max=10.0)
    errors = OnlineError(gammas=gammas, n_questions=2, readouts={"next_1s": (rg, rc)})
    assert errors.horizons[:3] == [1, horizon(0.5), horizon(0.9)] and errors.labels[-1] == "next_1s"
    predictions = rng.normal(size=(T, 2, 4))
    for n in range(T):
        errors.observe(c[n], cont[n], predictions[n])
    discounts = [g ** np.arange(horizon(g)) for g in gammas] + [discount_function(rg, rc, np.arange(horizon(rg.max())))]
    for q in range(2):
        for p, d in enumerate(discounts):
            ret = brute_returns(c[:, q], cont[:, q], d)
            done = ~np.isnan(ret)
            assert errors.counts[q, p] == done.sum()
            want = np.sqrt(np.mean((predictions[done, q, p] - ret[done]) ** 2))
            assert errors.rmse()[q, p] == pytest.approx(want, rel=1e-9)
    assert np.all(errors.baseline_rmse() > 0)


def test_online_error_of_exact_predictions_is_zero_and_beats_the_running_mean():
    T = 300
    c = (np.arange(T) % 10 < 3).astype(float)
    gammas = np.array([0.8])
    exact = discounted_returns(c[1:], gammas)  # the return from each state: its future cumulants
    errors = OnlineError(gammas=gammas, n_questions=1)
    for n in range(T - 1):
        errors.observe([c[n]], None, exact[n][None, :])
    assert errors.counts[0, 0] == T - 1 - horizon(0.8)
    # the exact return counts the whole future; the online one stops after H steps: gamma^H < 1e-3 of the rest
    assert errors.rmse()[0, 0] < 1e-3 * 5
    assert errors.baseline_rmse()[0, 0] > 0.5


def test_online_error_of_a_learner_tracks_its_taus_then_its_readouts():
    config = GammaNetConfig(tilings=(4,), memory_size=128, state_low=(0.0,), state_high=(1.0,))
    horde = HordeLearner(config, names=["a", "b"], readouts=[HYPERBOLIC, WINDOW], rng=np.random.default_rng(0))
    errors = OnlineError.for_learner(horde, taus=[1, 10])
    assert errors.labels == ["tau=1", "tau=10", "hyperbolic", "next_1s"]
    for n in range(50):
        s = [n % 10 / 10]
        horde.step(s, [1.0, 0.0], [1.0, 0.0])
        row = [horde.predict(s, taus=[1, 10])] + [horde.readout(s, r)[:, None] for r in horde.readout_names]
        errors.observe([1.0, 0.0], [1.0, 0.0], np.hstack(row))
    # question b terminates every step: each of its returns is complete after one cumulant
    assert np.all(errors.counts[1] == 49) and errors.counts[0, 0] == 49 and errors.counts[0, 1] < 49
