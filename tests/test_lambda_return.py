"""TD(lambda) by truncated lambda-returns on the draws (lambda_horizon > 0): against the plain reference and TD(0)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gamma_net_core.checkpoint import CheckpointError
from gamma_net_core.horde.learner import HordeLearner
from gamma_net_core.linear import GammaNetConfig, LinearGammaNet, default_horizon, lambda_horizon, uses_ladder
from gamma_net_core.reference import ReferenceLinearTD
from gamma_net_core.timescales import TimescaleSampler, TimescaleSampling

SAMPLING = TimescaleSampling(n_gamma=2, n_tau=4)


def walk(T: int, seed: int = 0, *, n_state: int = 2):
    """A random walk in [0, 1]^n_state with cumulants in [0, 2) and about one terminal in 15 steps."""
    rng = np.random.default_rng(seed)
    x = np.clip(np.cumsum(rng.normal(0.0, 0.1, (T + 1, n_state)), axis=0) % 2.0, 0.0, 2.0)
    x = np.where(x > 1.0, 2.0 - x, x)
    return x[:-1], x[1:], rng.random(T) * 2.0, rng.random(T) < 1 / 15


def config(**overrides) -> GammaNetConfig:
    settings = dict(tilings=(4,), tile_widths=(0.5,), memory_size=64, step_size=0.3, lam=0.8, lambda_horizon=5)
    settings.update(overrides)
    return GammaNetConfig(timescale_input="both", **settings)


def draws(T: int, seed: int = 2) -> np.ndarray:
    return TimescaleSampler(SAMPLING, np.random.default_rng(seed)).sample_many(T)


@pytest.mark.slow
@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"loss_scaling": False},
        {"step_size_decay_steps": 300},
        {"memory_size": 0, "lambda_horizon": 1},
        {"lambda_step_power": 0.75, "step_size_decay_steps": 300},
    ],
    ids=["hashed", "unscaled", "decayed", "horizon-1", "alpha-per-gamma-decayed"],
)
def test_the_fast_learner_is_the_plain_reference(overrides):
    """Weights and each step's lambda-return errors as the plain reference computes them, with terminals and a gap."""
    cfg = config(**overrides)
    s_t, s_tp1, c, ends = walk(400)
    gammas = draws(400)
    fast = LinearGammaNet(cfg, rng=np.random.default_rng(0))
    ref = ReferenceLinearTD(cfg, rng=np.random.default_rng(0))
    held = set()
    for t in range(400):
        got = fast.learn(s_t[t], c[t], s_tp1[t], ends[t], gammas[t])
        want = ref.learn(s_t[t], c[t], s_tp1[t], ends[t], gammas[t])
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
        assert fast.window_size == len(ref.window)
        held.add(fast.window_size)
        if t == 200:  # the stream does not continue from here: no return reaches past it
            fast.reset_traces()
            ref.cut()
    np.testing.assert_allclose(fast.weights, ref.w, rtol=0, atol=1e-12)
    # A transition waits until its return is complete: H - 1 held at most, none after an end (or once lambda is 0).
    assert max(held) == (cfg.lambda_horizon - 1 if cfg.lambda_horizon > 1 else 0) and 0 in held
    assert np.abs(fast.weights).max() > 0.1  # it learned


def test_horizon_1_is_td0_bit_for_bit():
    s_t, s_tp1, c, ends = walk(2000)
    gammas = draws(2000)
    nets = []
    for lam, horizon in ((0.0, 0), (0.9, 1)):
        net = LinearGammaNet(config(lam=lam, lambda_horizon=horizon), rng=np.random.default_rng(0))
        net.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, terminals=ends, timescales=gammas)
        nets.append(net)
    np.testing.assert_array_equal(nets[0].weights, nets[1].weights)


def test_a_gap_stops_the_return_and_a_later_state_still_sees_the_cumulant():
    """A cumulant two steps ahead reaches S_0 through the lambda-return, and not across a gap (one gamma)."""
    cfg = config(lam=0.5, lambda_horizon=3, memory_size=0, tilings=(1,), tile_widths=(0.2,), bias=False,
                 loss_scaling=False, step_size=1.0)  # fmt: skip
    states = np.array([[0.05, 0.05], [0.45, 0.45], [0.85, 0.85], [0.85, 0.05]])
    gamma = np.array([0.5])
    for gap in (False, True):
        net = LinearGammaNet(cfg, rng=np.random.default_rng(0))
        net.learn(states[0], 0.0, states[1], False, gamma)
        if gap:
            net.reset_traces()
        net.learn(states[1], 4.0, states[2], False, gamma)
        net.learn(states[2], 0.0, states[3], False, gamma)  # the window is full: S_0's update
        # G_0 = 0 + gamma ((1 - lambda) f(S_1) + lambda G_1), G_1 = 4 + ...: 0.5 * 0.5 * 4 = 1 without the gap
        assert net.predict(states[0], gamma)[0] == pytest.approx(0.0 if gap else 1.0)


def test_learn_recording_in_pieces_is_learn_step_by_step():
    s_t, s_tp1, c, ends = walk(3000)
    whole = LinearGammaNet(config(), rng=np.random.default_rng(0))
    steps = LinearGammaNet(config(), rng=np.random.default_rng(0))
    sampler = TimescaleSampler(SAMPLING, np.random.default_rng(2))
    probes = None
    for a, b in ((0, 3), (3, 1700), (1700, 3000)):
        out = whole.learn_recording(states_t=s_t[a:b], cumulants=c[a:b], states_tp1=s_tp1[a:b], terminals=ends[a:b],
                                    timescales=sampler, probe_gammas=[0.9])  # fmt: skip
        probes = out if probes is None else np.concatenate([probes, out])
    stepper = TimescaleSampler(SAMPLING, np.random.default_rng(2))
    online = []
    for t in range(3000):
        online.append(steps.predict(s_t[t], [0.9])[0])
        steps.learn(s_t[t], c[t], s_tp1[t], ends[t], stepper.sample())
    np.testing.assert_array_equal(whole.weights, steps.weights)
    np.testing.assert_array_equal(probes[:, 0], online)


@pytest.mark.slow
def test_a_checkpoint_holds_the_window_and_resumes_bit_for_bit(tmp_path):
    s_t, s_tp1, c, ends = walk(1000)
    ends[490:503] = False  # the window is full at the save
    gammas = draws(1000)
    straight = LinearGammaNet(config(), rng=np.random.default_rng(0))
    straight.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, terminals=ends, timescales=gammas)
    first = LinearGammaNet(config(), rng=np.random.default_rng(0))
    first.learn_recording(states_t=s_t[:503], cumulants=c[:503], states_tp1=s_tp1[:503], terminals=ends[:503],
                          timescales=gammas[:503])  # fmt: skip
    first.reset_traces()  # a gap in the saved window
    straight_cut = LinearGammaNet(config(), rng=np.random.default_rng(0))
    straight_cut.learn_recording(states_t=s_t[:503], cumulants=c[:503], states_tp1=s_tp1[:503],
                                 terminals=ends[:503], timescales=gammas[:503])  # fmt: skip
    straight_cut.reset_traces()
    path = first.save(tmp_path / "net.npz")
    resumed = LinearGammaNet.load(path, config=config())
    assert resumed.window_size == 4
    for net in (resumed, straight_cut):
        net.learn_recording(states_t=s_t[503:], cumulants=c[503:], states_tp1=s_tp1[503:], terminals=ends[503:],
                            timescales=gammas[503:])  # fmt: skip
    np.testing.assert_array_equal(resumed.weights, straight_cut.weights)
    assert not np.array_equal(resumed.weights, straight.weights)  # the gap changed what was learned


@pytest.mark.parametrize(
    "name, value, message",
    [
        ("window_ends", np.array([0, 7, 0, 0], dtype=np.int8), "window_ends"),
        ("window_cumulants", np.zeros(5), "window_cumulants"),
        ("window_states_t", np.full((4, 2), np.nan), "non-finite"),
        ("window_states_tp1", None, "no window_states_tp1"),
        ("window_gammas", np.full((4, 8), 1.0), r"outside \[0, 1\)"),
        ("window_gammas", np.zeros((3, 8)), "window_gammas"),
    ],
)
def test_a_damaged_window_is_refused_by_name(tmp_path, name, value, message):
    s_t, s_tp1, c, ends = walk(100)
    ends[90:] = False  # the window is full at the save
    net = LinearGammaNet(config(), rng=np.random.default_rng(0))
    net.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, terminals=ends, timescales=draws(100))
    arrays = net.to_state_dict()
    if value is None:
        del arrays[name]
    else:
        arrays[name] = value
    with pytest.raises(CheckpointError, match=message):
        LinearGammaNet.from_arrays(config(), arrays, update_count=100)


def test_a_refused_update_changes_nothing():
    s_t, s_tp1, c, ends = walk(50)
    net = LinearGammaNet(config(), rng=np.random.default_rng(0))
    net.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, terminals=ends, timescales=draws(50))
    weights, window = net.weights.copy(), net.to_state_dict()
    with pytest.raises(FloatingPointError, match="learner unchanged"):
        net.learn(s_t[0], 1e307, s_tp1[0], False, draws(1)[0])
    np.testing.assert_array_equal(net.weights, weights)
    for name, array in net.to_state_dict().items():
        np.testing.assert_array_equal(array, window[name])


def test_settings_that_cannot_work_are_refused_by_name():
    with pytest.raises(ValueError, match="lambda_horizon 5 is the forward view's truncation: it needs lam > 0"):
        GammaNetConfig(timescale_input="both", lambda_horizon=5)
    with pytest.raises(ValueError, match="lambda_view 'backward'"):
        GammaNetConfig(timescale_input="both", lam=0.5, lambda_view="backward", lambda_horizon=5)
    with pytest.raises(ValueError, match="lambda_horizon"):
        GammaNetConfig(timescale_input="both", lam=0.5, lambda_horizon=-1)
    with pytest.raises(ValueError, match="lambda_view"):
        GammaNetConfig(timescale_input="both", lam=0.5, lambda_view="sideways")
    with pytest.raises(ValueError, match=r"lambda_view 'forward' .* a Horde learns TD\(lambda\) by traces"):
        HordeLearner(config(), names=("a",), rng=np.random.default_rng(0))


def test_the_forward_view_is_the_default_and_its_horizon_follows_lambda():
    assert lambda_horizon(GammaNetConfig(timescale_input="both", lam=0.9)) == 44
    assert lambda_horizon(GammaNetConfig(timescale_input="both", lam=0.5, lambda_horizon=3)) == 3
    assert lambda_horizon(GammaNetConfig(timescale_input="both", lam=0.9, lambda_view="backward")) == 0
    assert lambda_horizon(GammaNetConfig(timescale_input="both")) == 0
    assert uses_ladder(GammaNetConfig(timescale_input="both", lam=0.9, lambda_view="backward")) and not uses_ladder(
        GammaNetConfig(timescale_input="both", lam=0.9)
    )


def test_default_horizon_weighs_what_is_beyond_it_at_most_one_percent():
    for lam in (0.1, 0.5, 0.9, 0.99):
        H = default_horizon(lam)
        assert lam**H <= 0.01 * (1 + 1e-12) < lam ** (H - 1)
    assert (default_horizon(0.5), default_horizon(0.9)) == (7, 44)


def test_a_transition_waits_only_until_its_return_is_complete():
    """H - 1 held while the stream goes on; none after a terminal (every held return stops there); once lambda
    has faded to 0 none is held, and each step is TD(0)'s on its own draw, bit for bit."""
    s_t, s_tp1, c, ends = walk(600)
    ends[:] = False
    ends[100] = True
    gammas = draws(600)
    cfg = config(step_size_decay_steps=800)  # lambda fades to 0 over 400 updates
    net = LinearGammaNet(cfg, rng=np.random.default_rng(0))
    for t in range(420):
        net.learn(s_t[t], c[t], s_tp1[t], ends[t], gammas[t])
        if t in (50, 150):
            assert net.window_size == cfg.lambda_horizon - 1
        if t == 100:
            assert net.window_size == 0
    assert net.window_size == 0
    td0_config = dataclasses.replace(cfg, lam=0.0, lambda_horizon=0)
    arrays = {k: v for k, v in net.to_state_dict().items() if not k.startswith("window_")}
    td0 = LinearGammaNet.from_arrays(td0_config, arrays, update_count=net.update_count)
    for t in range(420, 600):
        np.testing.assert_array_equal(net.learn(s_t[t], c[t], s_tp1[t], ends[t], gammas[t]),
                                      td0.learn(s_t[t], c[t], s_tp1[t], ends[t], gammas[t]))  # fmt: skip
    np.testing.assert_array_equal(net.weights, td0.weights)


def test_gamma_t_of_another_size_is_refused_while_transitions_wait_on_their_own():
    s_t, s_tp1, c, _ = walk(10)
    net = LinearGammaNet(config(), rng=np.random.default_rng(0))
    for t in range(3):
        net.learn(s_t[t], c[t], s_tp1[t], False, np.array([0.5, 0.9]))
    weights = net.weights.copy()
    with pytest.raises(ValueError, match="Gamma_t has 3 timescales, but the 3 transitions held"):
        net.learn(s_t[3], c[3], s_tp1[3], False, np.array([0.5, 0.9, 0.99]))
    np.testing.assert_array_equal(net.weights, weights)
    assert net.window_size == 3
    with pytest.raises(ValueError, match="Gamma_t has 3 timescales, but the 3 transitions held"):
        net.learn_recording(states_t=s_t[3:6], cumulants=c[3:6], states_tp1=s_tp1[3:6], timescales=np.full((3, 3), 0.5))
    np.testing.assert_array_equal(net.weights, weights)
    assert net.window_size == 3 and net.update_count == 3
