"""The linear Γ-net: Algorithm 1 against its NumPy oracle, hand-computed updates, convergence, checkpoints.

Bad input must raise naming the value and change nothing.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gamma_net_core.checkpoint import CheckpointError, load_npz, save_npz
from gamma_net_core.config import from_mapping
from gamma_net_core.linear import (
    FixedTimescaleConfig,
    FixedTimescaleTD,
    GammaNetConfig,
    LinearGammaNet,
)
from gamma_net_core.reference import ReferenceLinearTD
from gamma_net_core.signals.square_wave import SquareWave
from gamma_net_core.timescales import TimescaleSampler, TimescaleSampling, gamma_from_tau
from gamma_net_studies.square_wave import SERIES, learner_config

SQUARE = learner_config(SERIES[0], 0.5)  # the paper's square-wave learner, the study's alpha = 0.5 / 70
PROBE_TAUS = np.array([1, 2, 5, 10, 20, 40, 60, 80, 100.0])
SQUARE_SAMPLING = TimescaleSampling(n_gamma=2, n_tau=2)  # the square wave's Gamma_t: tau 1 and 100 + 2 + 2
#: the paper's arm (config/arm.yaml)
# the paper's arm coder: tiles over the state, gamma and tau, and a bias unit
ARM_CODER = {"tilings": (100,), "tile_widths": (1.0,), "memory_size": 2048, "hashing": "always", "bias": True,
             "timescale_input": "both"}  # fmt: skip


def square_wave_data(steps):
    phases_t, cumulants, phases_tp1 = SquareWave().transitions(steps)
    return phases_t.astype(float), cumulants, phases_tp1.astype(float)


def arm_data(steps, seed=3):
    """Two joint positions walking in [0, 1], the cumulant the shoulder's speed, two episode ends."""
    rng = np.random.default_rng(seed)
    walk = np.clip(0.5 + np.cumsum(rng.normal(0, 0.02, (steps + 1, 2)), axis=0), 0, 1)
    terminals = np.zeros(steps, dtype=bool)
    terminals[[steps // 3, 2 * steps // 3]] = True
    return walk[:-1], np.abs(np.diff(walk[:, 0])) * 30, walk[1:], terminals


def net_and_sampler(config, sampling=None, seed=0):
    sampling = sampling or SQUARE_SAMPLING
    return LinearGammaNet(config, rng=np.random.default_rng(seed)), TimescaleSampler(
        sampling, np.random.default_rng(seed + 1)
    )


# -------------------------------------------------------------------- the oracle and the two doors


def test_square_wave_matches_the_numpy_reference_after_1000_steps():
    s_t, c, s_tp1 = square_wave_data(1000)
    net, sampler = net_and_sampler(SQUARE)
    ref = ReferenceLinearTD(SQUARE, rng=np.random.default_rng(0))
    ref_sampler = TimescaleSampler(SQUARE_SAMPLING, np.random.default_rng(1))
    probes = gamma_from_tau(PROBE_TAUS)
    kw = {"probe_gammas": probes, "record_from": 900}
    fast = net.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, timescales=sampler, **kw)
    slow = ref.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, timescales=ref_sampler, **kw)
    assert np.abs(ref.w).max() > 0.1  # it learned something
    np.testing.assert_allclose(net.weights, ref.w, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-11)
    np.testing.assert_allclose(net.predict(s_t[:100], probes), [ref.predict(s, probes) for s in s_t[:100]], atol=1e-11)


@pytest.mark.slow
@pytest.mark.parametrize("bias_unit", ["value", "scaled"])
def test_robot_arm_matches_the_numpy_reference_after_1000_steps(bias_unit):
    # The arm's coder: 100 tilings, 2049 features; the bias of V (the default) or the paper's, of f.
    config = GammaNetConfig(**ARM_CODER, step_size=0.1, step_size_decay_steps=1500, bias_unit=bias_unit)
    sampling = TimescaleSampling(n_gamma=1, n_tau=29)
    s_t, c, s_tp1, terminals = arm_data(1000)
    net, sampler = net_and_sampler(config, sampling)
    ref = ReferenceLinearTD(config, rng=np.random.default_rng(0))
    ref_sampler = TimescaleSampler(sampling, np.random.default_rng(1))
    net.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, timescales=sampler, terminals=terminals)
    ref.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, timescales=ref_sampler, terminals=terminals)
    assert net.n_features == 2049 and net.n_active == 101 and net.update_count == 1000
    assert np.abs(ref.w).max() > 0.01
    np.testing.assert_allclose(net.weights, ref.w, rtol=0, atol=1e-12)
    # One more step: the same TD errors, delta_V in the cumulant's units, and the same predictions V.
    gammas = sampler.sample()
    np.testing.assert_allclose(net.learn(s_t[0], c[0], s_tp1[0], False, gammas),
                               ref.learn(s_t[0], c[0], s_tp1[0], False, gammas), rtol=0, atol=1e-12)  # fmt: skip
    np.testing.assert_allclose(net.predict(s_t[0], gammas), ref.predict(s_t[0], gammas), rtol=1e-12)


def test_baseline_matches_the_numpy_reference():
    config = FixedTimescaleConfig(gamma=0.9, step_size_decay_steps=800)
    s_t, c, s_tp1, terminals = arm_data(500)
    base = FixedTimescaleTD(config, rng=np.random.default_rng(0))
    ref = ReferenceLinearTD(config, rng=np.random.default_rng(0))
    online = base.learn_recording(
        states_t=s_t, cumulants=c, states_tp1=s_tp1, terminals=terminals, record_predictions=True
    )
    ref.learn_recording(
        states_t=s_t, cumulants=c, states_tp1=s_tp1, timescales=np.full((500, 1), 0.9), terminals=terminals
    )
    np.testing.assert_allclose(base.weights, ref.w, atol=1e-12)
    assert online.shape == (500,) and online[0] == 0.0
    assert base.predict(s_t[0]) == pytest.approx(ref.value(s_t[0], 0.9), abs=1e-12)
    assert base.predict(s_t[:7]).shape == (7,)


def test_per_step_learn_equals_the_recording_path_exactly():
    """A node (one learn() per message, sampler.sample() each step) and the offline trainer agree bit for bit."""
    config = dataclasses.replace(SQUARE, step_size_decay_steps=700)
    s_t, c, s_tp1 = square_wave_data(600)
    terminals = np.zeros(600, dtype=bool)
    terminals[[99, 450]] = True
    a, sampler_a = net_and_sampler(config)
    b, sampler_b = net_and_sampler(config)
    a.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, timescales=sampler_a, terminals=terminals)
    for t in range(600):
        b.learn(s_t[t], c[t], s_tp1[t], terminals[t], sampler_b.sample())
    np.testing.assert_array_equal(a.weights, b.weights)
    assert a.update_count == b.update_count == 600
    # Both samplers consumed the same stream.
    np.testing.assert_array_equal(sampler_a.sample(), sampler_b.sample())


def test_sampler_and_explicit_gamma_t_agree():
    s_t, c, s_tp1 = square_wave_data(300)
    a, sampler = net_and_sampler(SQUARE)
    drawn = TimescaleSampler(SQUARE_SAMPLING, np.random.default_rng(1))
    gammas = np.stack([drawn.sample() for _ in range(300)])
    b = LinearGammaNet(SQUARE, rng=np.random.default_rng(0))
    a.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, timescales=sampler)
    b.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, timescales=gammas)
    np.testing.assert_array_equal(a.weights, b.weights)
    np.testing.assert_allclose(gammas[:, :2], np.tile([0.0, 0.99], (300, 1)))  # the bounds are always in Gamma_t


@pytest.mark.parametrize(
    "sampling",
    [
        TimescaleSampling(n_gamma=2, n_tau=2),
        TimescaleSampling(n_gamma=1, n_tau=29),
        TimescaleSampling(n_gamma=0, n_tau=4, include_bounds=False),
        TimescaleSampling(n_gamma=3, n_tau=3, integer_tau=True),
    ],
)
def test_sample_many_is_the_sequence_of_sample_calls(sampling):
    a = TimescaleSampler(sampling, np.random.default_rng(11))
    b = TimescaleSampler(sampling, np.random.default_rng(11))
    one_by_one = np.stack([a.sample() for _ in range(700)])
    np.testing.assert_array_equal(
        np.concatenate([b.sample_many(300), b.sample_many(0), b.sample_many(400)]), one_by_one
    )
    np.testing.assert_array_equal(a.sample(), b.sample())


# -------------------------------------------------------------------- hand-computed updates


def tiny(**kw):
    """One tiling so wide that every input falls in its first tile, plus the bias: 2 active features.

    The bias is the paper's, a feature of the scaled output f (``bias_unit`` "scaled"), unless ``kw`` says.
    """
    base = {"state_low": (0.0,), "state_high": (1.0,), "tilings": (1,), "tile_widths": (1e6,), "memory_size": 0}
    return {**base, "bias": True, "bias_unit": "scaled", "step_size": 0.5, **kw}


@pytest.mark.parametrize("scaling, f1, f_terminal, f_non_terminal", [(True, 0.5, 0.5, 0.625), (False, 1.0, 1.0, 1.25)])
def test_terminal_and_loss_scaling_by_hand(scaling, f1, f_terminal, f_non_terminal):
    """gamma = 0.5, alpha = 0.5 / 2 active features; the output f is the sum of the two active weights.

    With loss scaling f = (1 - gamma) V = 0.5 V and s = 0.5; without, f = V and s = 1.
    Step 1 (C = 2, f = 0): delta_f = 2 s; each weight moves 0.25 delta_f: f1 = 1.0 s, V1 = 1.
    Step 2 from f1 with C = 1: terminal delta_f = s - f1 = 0 (V1 = C already);
    otherwise delta_f = s + 0.5 f1 - f1 = 0.5 s, each weight moves 0.125 s: f2 = 1.25 s, V2 = 1.25.
    For one gamma, scaled TD is unscaled TD on the cumulant s C: the same V, weights s times as large.
    The returned TD errors are delta_V = delta_f / s: 2, then 0 (terminal) or 0.5.
    """
    config = FixedTimescaleConfig(**tiny(loss_scaling=scaling), gamma=0.5)
    for is_terminal, f2 in ((True, f_terminal), (False, f_non_terminal)):
        net = FixedTimescaleTD(config, rng=np.random.default_rng(0))
        assert net.learn(0.3, 2.0, 0.3) == 2.0
        assert net.weights.sum() == pytest.approx(f1)
        assert net.predict(0.3) == pytest.approx(1.0)
        delta = net.learn(0.3, 1.0, None if is_terminal else 0.3, is_terminal)
        assert delta == pytest.approx(0.0 if is_terminal else 0.5)
        assert net.weights.sum() == pytest.approx(f2)
        assert net.predict(0.3) == pytest.approx(1.0 if is_terminal else 1.25)
        assert net.predict(0.9) == pytest.approx(1.0 if is_terminal else 1.25)  # same tile


def test_the_value_bias_adds_the_same_to_every_timescale_by_hand():
    """The default bias (``bias_unit`` "value") has feature value s = 1 - gamma in f, so its weight adds itself to V.

    Gamma_t = {0}, C = 2, alpha 0.5 / 2: delta_f = 2, the tile's weight moves 0.25 x 2 = 0.5 and the bias's
    0.25 x 2 x s = 0.5. V(gamma) = 0.5 / (1 - gamma) + 0.5: the tile's part grows with tau, the bias's does not
    (the paper's bias adds 0.5 / (1 - gamma) too: 5 at gamma 0.9 from one update at gamma 0).
    """
    net = LinearGammaNet(
        GammaNetConfig(**tiny(bias_unit="value"), timescale_input="both"), rng=np.random.default_rng(0)
    )
    assert GammaNetConfig().bias_unit == "value"
    np.testing.assert_array_equal(net.learn(0.5, 2.0, 0.5, True, [0.0]), [2.0])
    np.testing.assert_array_equal(net.weights[net.weights != 0.0], [0.5, 0.5])  # the tile's, the bias's
    np.testing.assert_allclose(net.predict(0.5, [0.0, 0.5, 0.9]), [1.0, 1.5, 5.5])
    old = LinearGammaNet(GammaNetConfig(**tiny(), timescale_input="both"), rng=np.random.default_rng(0))
    old.learn(0.5, 2.0, 0.5, True, [0.0])
    np.testing.assert_allclose(old.predict(0.5, [0.0, 0.5, 0.9]), [1.0, 2.0, 10.0])


@pytest.mark.parametrize("scaling, after", [(True, [0.75, 1.5, 7.5]), (False, [1.0, 1.0, 1.0])])
def test_summed_update_uses_the_weights_before_the_step(scaling, after):
    """Gamma_t = {0, 0.5}, every (state, gamma) on the same two features, C = 1, f = 0.

    Both TD errors are computed before any change: delta_f = s C = 1 and 0.5 scaled (1 and 1
    unscaled); each weight moves 0.25 (1 + 0.5) or 0.25 (1 + 1), so f = 0.75 or 1.0 at every
    gamma. Scaled, V = f / (1 - gamma) = 0.75, 1.5, 7.5 at gamma = 0, 0.5, 0.9; unscaled V = f.
    The returned delta_V are 1 and 1 either way. A sequential update would have seen f > 0
    for the second gamma.
    """
    config = GammaNetConfig(**tiny(loss_scaling=scaling), timescale_input="both")
    net = LinearGammaNet(config, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(net.learn(0.5, 1.0, 0.5, False, [0.0, 0.5]), [1.0, 1.0])
    np.testing.assert_allclose(net.predict(0.5, [0.0, 0.5, 0.9]), after)


@pytest.mark.parametrize("gamma", [0.5, 0.9, 0.99])
def test_scaled_fixed_timescale_is_unscaled_td_on_the_scaled_cumulant(gamma):
    """Eq. scaled_v for one gamma: the weights learn f, the value of (1 - gamma) C, and V = f / (1 - gamma).

    So a loss-scaled learner must equal, bit for bit, an unscaled one fed (1 - gamma) C, with
    its predictions and TD errors divided by (1 - gamma) — and the same holds for a Γ-net whose
    Gamma_t is that one gamma.
    """
    s_t, c, s_tp1, terminals = arm_data(800)
    scaled_c = (1.0 - gamma) * c
    kw = {"states_t": s_t, "states_tp1": s_tp1, "terminals": terminals}
    # The paper's bias, of f: a bias of V (the default) has feature value 1 - gamma, so the weights differ.
    scaled = FixedTimescaleTD(FixedTimescaleConfig(gamma=gamma, bias_unit="scaled"), rng=np.random.default_rng(2))
    plain = FixedTimescaleTD(FixedTimescaleConfig(gamma=gamma, loss_scaling=False), rng=np.random.default_rng(2))
    online_scaled = scaled.learn_recording(cumulants=c, record_predictions=True, **kw)
    online_plain = plain.learn_recording(cumulants=scaled_c, record_predictions=True, **kw)
    np.testing.assert_array_equal(scaled.weights, plain.weights)
    assert np.abs(scaled.predict(s_t)).max() > 0.1  # it learned something (the cumulant averages about 0.4)
    np.testing.assert_array_equal(online_scaled, online_plain / (1.0 - gamma))
    np.testing.assert_array_equal(scaled.predict(s_t), plain.predict(s_t) / (1.0 - gamma))
    assert scaled.learn(s_t[0], c[0], s_tp1[0]) == plain.learn(s_t[0], scaled_c[0], s_tp1[0]) / (1.0 - gamma)

    arm = {**ARM_CODER, "bias_unit": "scaled"}
    nets = [LinearGammaNet(GammaNetConfig(**arm, loss_scaling=flag), rng=np.random.default_rng(3))
            for flag in (True, False)]  # fmt: skip
    fixed = np.full((800, 1), gamma)
    probes = [0.0, gamma]
    seen = [net.learn_recording(cumulants=cs, timescales=fixed, probe_gammas=probes, **kw)
            for net, cs in zip(nets, (c, scaled_c))]  # fmt: skip
    np.testing.assert_array_equal(nets[0].weights, nets[1].weights)
    np.testing.assert_array_equal(seen[0], seen[1] / (1.0 - np.array(probes)))
    np.testing.assert_array_equal(nets[0].predict(s_t, [gamma]), nets[1].predict(s_t, [gamma]) / (1.0 - gamma))


def test_step_size_decays_linearly_to_zero():
    config = FixedTimescaleConfig(**tiny(step_size=0.4, step_size_decay_steps=4), gamma=0.0)
    net = FixedTimescaleTD(config, rng=np.random.default_rng(0))
    rates = []
    for _ in range(6):
        rates.append(net.step_size())
        net.learn(0.5, 1.0, 0.5)
    np.testing.assert_allclose(rates, [0.2, 0.15, 0.1, 0.05, 0.0, 0.0])  # 0.4 / 2 active features, x (1 - n/4)
    frozen = net.weights.copy()
    net.learn(0.5, 100.0, 0.5)
    np.testing.assert_array_equal(net.weights, frozen)


# -------------------------------------------------------------------- learning the returns


def relative_mse(config, steps, *, seed=0):
    """MSE of online predictions over the last 5k steps at each probe tau, over the return's mean square."""
    s_t, c, s_tp1 = square_wave_data(steps)
    net, sampler = net_and_sampler(config, seed=seed)
    probes = gamma_from_tau(PROBE_TAUS)
    online = net.learn_recording(
        states_t=s_t, cumulants=c, states_tp1=s_tp1, timescales=sampler, probe_gammas=probes, record_from=steps - 5000
    )
    returns = SquareWave().returns(probes)
    targets = returns[s_t[-5000:].astype(int)]
    return np.mean((online - targets) ** 2, axis=0) / np.mean(returns**2, axis=0)


def test_predictions_approach_the_exact_returns_at_every_probe_tau():
    """Tolerances, on the MSE over the return's mean square after 50k steps (the paper's budget):

    - unscaled: under 2% at every probe tau (R^2 > 0.98); the worst of 20 seeds was 0.8%.
    - loss scaling: under 2% at tau <= 10 and under 20% at tau >= 20; the worst of 20 seeds was
      0.8% and 7.4%, the worst of the square-wave study's 100 runs 1.3% and 13.9% (tau = 40).
      The weights learn f = (1 - gamma) V and an error in f is multiplied by tau in V: with
      every timescale weighted alike, the long ones end less accurate (the paper's finding);
      more steps halve it (200k) rather than remove it.

    Any real fault (a wrong index, sign, gamma or scale) gives errors of order 1.
    """
    np.testing.assert_array_less(relative_mse(dataclasses.replace(SQUARE, loss_scaling=False), 50_000), 0.02)
    scaled = relative_mse(SQUARE, 50_000)
    np.testing.assert_array_less(scaled, np.where(PROBE_TAUS <= 10, 0.02, 0.20))


def test_baseline_learns_its_one_timescale():
    config = FixedTimescaleConfig(
        state_low=(0.0,), state_high=(100.0,), tilings=(20, 20, 30), tile_widths=(1.0, 0.5, 0.1), memory_size=0,
        bias=False, step_size=0.5, loss_scaling=False, gamma=0.9,
    )  # fmt: skip
    s_t, c, s_tp1 = square_wave_data(20_000)
    base = FixedTimescaleTD(config, rng=np.random.default_rng(0))
    base.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1)
    returns = SquareWave().returns([0.9])[:, 0]
    assert np.mean((base.predict(np.arange(100.0)) - returns) ** 2) < 0.02 * np.mean(returns**2)


# -------------------------------------------------------------------- checkpoints


def trained(config=SQUARE, steps=500):
    s_t, c, s_tp1 = square_wave_data(steps)
    net, sampler = net_and_sampler(config)
    net.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, timescales=sampler)
    return net


def test_save_load_round_trip(tmp_path):
    net = trained()
    path = net.save(tmp_path / "net.npz")
    again = LinearGammaNet.load(path, config=SQUARE)
    assert again.update_count == 500 and again.config == SQUARE
    states = np.arange(100.0)
    np.testing.assert_array_equal(again.predict(states, taus=PROBE_TAUS), net.predict(states, taus=PROBE_TAUS))
    # Learning goes on identically from the restored state.
    for learner in (net, again):
        learner.learn(3.0, 1.0, 4.0, False, [0.0, 0.5, 0.99])
    np.testing.assert_array_equal(again.weights, net.weights)
    assert LinearGammaNet.load(path).config == SQUARE  # without an expected config: the file's own

    arm = GammaNetConfig(**ARM_CODER)
    base = FixedTimescaleTD(FixedTimescaleConfig(gamma=0.99), rng=np.random.default_rng(0))
    base.learn([0.1, 0.2], 1.0, [0.15, 0.2], False)
    restored = FixedTimescaleTD.load(base.save(tmp_path / "base.npz"))
    assert restored.predict([0.1, 0.2]) == base.predict([0.1, 0.2]) != 0.0
    assert (
        LinearGammaNet.load(LinearGammaNet(arm, rng=np.random.default_rng(1)).save(tmp_path / "arm.npz")).n_features
        == 2049
    )


def test_mismatched_checkpoints_are_refused(tmp_path):
    net = trained()
    path = net.save(tmp_path / "net.npz")
    with pytest.raises(CheckpointError, match="another configuration: loss_scaling"):
        LinearGammaNet.load(path, config=dataclasses.replace(SQUARE, loss_scaling=False))
    with pytest.raises(CheckpointError, match="holds a 'linear_gamma_net', not a 'linear_fixed_timescale'"):
        FixedTimescaleTD.load(path)
    config, arrays, meta = load_npz(path, kind="linear_gamma_net", version=2)
    # Version 1 held V itself in loss-scaled weights (now f = (1 - gamma) V): refused, never misread.
    save_npz(tmp_path / "v1.npz", kind="linear_gamma_net", version=1, config=config, arrays=arrays, meta=meta)
    with pytest.raises(CheckpointError, match="version 1; this code reads 2"):
        LinearGammaNet.load(tmp_path / "v1.npz")
    short = {**arrays, "weights": arrays["weights"][:-1]}
    save_npz(tmp_path / "short.npz", kind="linear_gamma_net", version=2, config=config, arrays=short, meta=meta)
    with pytest.raises(CheckpointError, match="weights are float64\\[40629\\]; expected float64\\[40630\\]"):
        LinearGammaNet.load(tmp_path / "short.npz")
    narrow = {**arrays, "offsets": arrays["offsets"][:, :2]}
    save_npz(tmp_path / "narrow.npz", kind="linear_gamma_net", version=2, config=config, arrays=narrow, meta=meta)
    with pytest.raises(CheckpointError, match="tile coder state"):
        LinearGammaNet.load(tmp_path / "narrow.npz")
    bad = {**arrays, "weights": np.full_like(arrays["weights"], np.nan)}
    save_npz(tmp_path / "nan.npz", kind="linear_gamma_net", version=2, config=config, arrays=bad, meta=meta)
    with pytest.raises(CheckpointError, match="non-finite"):
        LinearGammaNet.load(tmp_path / "nan.npz")
    with pytest.raises(CheckpointError, match="unusable configuration"):
        save_npz(tmp_path / "cfg.npz", kind="linear_gamma_net", version=2, config={**config, "tilings": [0]},
                 arrays=arrays, meta=meta)  # fmt: skip
        LinearGammaNet.load(tmp_path / "cfg.npz")


# -------------------------------------------------------------------- bad input changes nothing


@pytest.fixture
def learned():
    return trained(steps=200)


@pytest.mark.parametrize(
    "args, message",
    [
        ((np.nan, 1.0, 2.0, False, [0.5]), "state_t must be finite; got nan"),
        ((1.0, 1.0, np.inf, False, [0.5]), "state_tp1 must be finite; got inf"),
        ((1.0, np.nan, 2.0, False, [0.5]), "cumulant must be finite; got nan"),
        ((1.0, -np.inf, 2.0, False, [0.5]), "cumulant must be finite; got -inf"),
        ((1.0, "a", 2.0, False, [0.5]), "cumulant must be a number; got 'a'"),
        ((1.0, 1.0, 2.0, False, [0.5, 1.0]), "Gamma_t must be in \\[0, 1\\); got 1.0 at index 1"),
        ((1.0, 1.0, 2.0, False, [-0.1]), "got -0.1 at index 0"),
        ((1.0, 1.0, 2.0, False, [0.5, np.nan]), "got nan at index 1"),
        ((1.0, 1.0, 2.0, False, []), "Gamma_t must not be empty"),
        (([1.0, 2.0], 1.0, 2.0, False, [0.5]), "state_t must have 1 state inputs; got shape \\(2,\\)"),
        ((1.0, 1.0, [[2.0]], False, [0.5]), "state_tp1 must have 1 state inputs"),
    ],
)
def test_bad_learn_input_raises_and_changes_nothing(learned, args, message):
    before, count = learned.weights.copy(), learned.update_count
    with pytest.raises(ValueError, match=message):
        learned.learn(*args)
    np.testing.assert_array_equal(learned.weights, before)
    assert learned.update_count == count


def test_bad_recordings_raise_and_change_nothing(learned):
    before = learned.weights.copy()
    s_t, c, s_tp1 = square_wave_data(100)
    sampler = TimescaleSampler(SQUARE_SAMPLING, np.random.default_rng(0))
    cases = [
        ({"cumulants": np.where(np.arange(100) == 42, np.nan, c)}, "cumulants must be finite; got nan at step 42"),
        ({"states_t": np.where(np.arange(100) == 7, np.inf, s_t)}, "states_t must be finite; got inf at step 7"),
        ({"states_tp1": s_tp1[:99]}, "states_tp1 must be \\[100, 1\\]"),
        ({"timescales": np.full((100, 3), 1.5)}, "Gamma_t must be in \\[0, 1\\); got 1.5"),
        ({"timescales": np.zeros((100, 0))}, "gammas \\[T=100, K >= 1\\]"),
        ({"timescales": np.zeros((99, 2))}, "gammas \\[T=100, K >= 1\\]"),
        ({"terminals": np.zeros(50, dtype=bool)}, "terminals must be \\[100\\]"),
        ({"probe_gammas": [0.5, 2.0]}, "probe_gammas must be in \\[0, 1\\); got 2.0"),
        ({"record_from": 101}, "record_from must be in \\[0, 100\\]"),
    ]
    for override, message in cases:
        kw = {"states_t": s_t, "cumulants": c, "states_tp1": s_tp1, "timescales": sampler, **override}
        with pytest.raises(ValueError, match=message):
            learned.learn_recording(**kw)
        np.testing.assert_array_equal(learned.weights, before)
        assert learned.update_count == 200


def test_bad_predict_input(learned):
    with pytest.raises(ValueError, match=r"taus must be finite and >= 1; got 0\.5 at index 1"):
        learned.predict(3.0, taus=[2.0, 0.5])
    with pytest.raises(ValueError, match=r"gammas must be in \[0, 1\); got 1\.0"):
        learned.predict(3.0, [1.0])
    with pytest.raises(ValueError, match="exactly one of gammas or taus"):
        learned.predict(3.0)
    with pytest.raises(ValueError, match="states must be finite; got nan at step 1, input 0"):
        learned.predict([[1.0], [np.nan]], [0.5])
    assert learned.predict(3.0, [0.5, 0.9]).shape == (2,)
    assert learned.predict([[3.0], [4.0], [5.0]], [0.5, 0.9]).shape == (3, 2)
    np.testing.assert_allclose(learned.predict(3.0, taus=[2.0, 10.0]), learned.predict(3.0, [0.5, 0.9]), atol=1e-12)


def test_an_update_that_would_overflow_is_refused_with_the_learner_unchanged(learned):
    before = learned.weights.copy()
    with pytest.raises(FloatingPointError, match=r"non-finite.*learner unchanged"):
        learned.learn(3.0, 1e308, 4.0, False, [0.0, 0.0, 0.5])
    np.testing.assert_array_equal(learned.weights, before)
    assert learned.update_count == 200
    s_t, c, s_tp1 = square_wave_data(300)
    c = c.copy()
    c[250] = 1e308
    with pytest.raises(FloatingPointError, match="step 250"):
        learned.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, timescales=np.zeros((300, 3)))
    np.testing.assert_array_equal(learned.weights, before)
    assert learned.update_count == 200
    assert np.all(np.isfinite(learned.weights))


def test_unstable_step_size_is_caught_not_silent():
    """alpha = 3 / 70 diverges on the square wave: the learner stops before a weight turns inf or NaN."""
    s_t, c, s_tp1 = square_wave_data(20_000)
    net, sampler = net_and_sampler(dataclasses.replace(SQUARE, step_size=3.0))
    with pytest.raises(FloatingPointError, match="lower step_size"):
        net.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, timescales=sampler)
    assert net.update_count == 0 and not net.weights.any()


@pytest.mark.parametrize(
    "cls, kwargs, message",
    [
        (GammaNetConfig, {"tilings": (20, 20), "tile_widths": (1.0,)}, "equal length"),
        (GammaNetConfig, {"state_low": (0.0, 1.0)}, "state_low .* must be below state_high"),
        (GammaNetConfig, {"state_low": (0.0,)}, "equal length"),
        (GammaNetConfig, {"timescale_input": "seconds"}, "must be one of"),
        (GammaNetConfig, {"step_size": -1.0}, "step_size must be in"),
        (GammaNetConfig, {"tau_scale": 0.5}, "tau_scale must be in"),
        (FixedTimescaleConfig, {"gamma": 1.0}, "gamma must be in \\[0, 1\\); got 1.0"),
        (FixedTimescaleConfig, {"gamma": float("nan")}, "gamma must be finite"),
    ],
)
def test_bad_configurations_are_refused(cls, kwargs, message):
    with pytest.raises(ValueError, match=message):
        cls(**kwargs)


def test_configuration_loads_from_a_parameter_mapping():
    config = from_mapping(GammaNetConfig, {"tilings": [20, 20, 30], "tile_widths": [1, 0.5, 0.1], "memory_size": 0})
    assert config.tile_widths == (1.0, 0.5, 0.1) and config.timescale_input == "knots" and not config.bias
    assert LinearGammaNet(config, rng=np.random.default_rng(0)).n_active == 70
    with pytest.raises(TypeError, match="needs a GammaNetConfig"):
        LinearGammaNet(FixedTimescaleConfig(), rng=np.random.default_rng(0))
