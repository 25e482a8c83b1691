"""The off-policy linear Γ-net: its kernels against the NumPy oracle, checkpoints, refusals, and exact v_pi.

The oracle of the values is the linear system (I - gamma P_pi) v = r_pi of two small MDPs, for two (pi, b)
pairs each, read at timescales between the trained ladder's rungs.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gamma_net_core.checkpoint import CheckpointError, load_npz, save_npz
from gamma_net_core.linear import GammaNetConfig, LinearGammaNet, OffPolicyConfig, OffPolicyGammaNet
from gamma_net_core.reference import ReferenceOffPolicyTD

SMALL = OffPolicyConfig(
    state_low=(0.0,), state_high=(1.0,), tilings=(4,), tile_widths=(0.5,), memory_size=64, step_size=0.1,
    secondary_step_size=0.2, rho_max=3.0, step_size_decay_steps=100, timescale_input="both", bias=True,
)  # fmt: skip


def _stream(steps, seed=0):
    rng = np.random.default_rng(seed)
    s_t, s_tp1 = rng.random((steps, 1)), rng.random((steps, 1))
    return s_t, rng.normal(size=steps), s_tp1, rng.choice([0.0, 0.5, 2.0, 5.0], size=steps), rng.random(steps) < 0.1


@pytest.mark.parametrize("method,kappa", [("gtd", 1.0), ("gtd", 0.0), ("td", 0.0)])
@pytest.mark.parametrize("lam", [0.0, 0.7])
def test_kernels_equal_the_numpy_oracle(method, kappa, lam):
    """kappa 1: the default ridge of h (TDRC's); 0: GTD(lambda) / TDC."""
    config = dataclasses.replace(SMALL, method=method, lam=lam, secondary_regularization=kappa)
    net = OffPolicyGammaNet(config, rng=np.random.default_rng(3))
    ref = ReferenceOffPolicyTD(config, rng=np.random.default_rng(3))
    rng = np.random.default_rng(1)
    s_t, c, s_tp1, rho, ends = _stream(60)
    for t in range(60):
        # TDC (lam 0) takes a new draw every step; GTD(lambda)'s traces follow a fixed ladder.
        gammas = np.array([0.0, 0.5, 0.9]) if lam else rng.random(3) * 0.95
        fast = net.learn(s_t[t], c[t], s_tp1[t], ends[t], gammas, rho=rho[t])
        np.testing.assert_allclose(fast, ref.learn(s_t[t], c[t], s_tp1[t], ends[t], gammas, rho=rho[t]), 1e-12, 1e-12)
    np.testing.assert_allclose(net.weights, ref.w, rtol=0, atol=1e-12)
    np.testing.assert_allclose(net.secondary_weights, ref.h, rtol=0, atol=1e-12)
    if lam:
        np.testing.assert_allclose(net.traces, ref.traces, rtol=0, atol=1e-12)
    assert np.any(net.weights != 0) and (method == "td" or np.any(net.secondary_weights != 0))
    # The recording door: the same updates in one call.
    again = OffPolicyGammaNet(config, rng=np.random.default_rng(3))
    ladder = np.tile([0.0, 0.5, 0.9], (60, 1))
    twin = ReferenceOffPolicyTD(config, rng=np.random.default_rng(3))
    again.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, rhos=rho, timescales=ladder, terminals=ends)
    for t in range(60):
        twin.learn(s_t[t], c[t], s_tp1[t], ends[t], ladder[t], rho=rho[t])
    np.testing.assert_allclose(again.weights, twin.w, rtol=0, atol=1e-12)
    np.testing.assert_allclose(again.secondary_weights, twin.h, rtol=0, atol=1e-12)


def test_on_policy_td_is_algorithm_1():
    """method td with rho = 1 and lam 0 is the on-policy Γ-net, weight for weight."""
    on = {f.name: getattr(SMALL, f.name) for f in dataclasses.fields(GammaNetConfig)}
    on.update(lambda_view="forward")
    net = OffPolicyGammaNet(dataclasses.replace(SMALL, method="td"), rng=np.random.default_rng(5))
    plain = LinearGammaNet(GammaNetConfig(**on), rng=np.random.default_rng(5))
    s_t, c, s_tp1, _, ends = _stream(50)
    gammas = np.random.default_rng(2).random((50, 4)) * 0.99
    net.learn_recording(
        states_t=s_t, cumulants=c, states_tp1=s_tp1, rhos=np.ones(50), timescales=gammas, terminals=ends
    )
    plain.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, timescales=gammas, terminals=ends)
    np.testing.assert_allclose(net.weights, plain.weights, rtol=0, atol=1e-12)


def test_rho_is_clipped_and_bad_input_refused():
    net = OffPolicyGammaNet(SMALL, rng=np.random.default_rng(0))
    twin = OffPolicyGammaNet(SMALL, rng=np.random.default_rng(0))
    net.learn([0.3], 1.0, [0.6], False, [0.5], rho=100.0)
    twin.learn([0.3], 1.0, [0.6], False, [0.5], rho=SMALL.rho_max)
    np.testing.assert_array_equal(net.weights, twin.weights)
    before = net.weights.copy()
    for rho, match in ((-1.0, "rho must be a finite ratio pi / b >= 0; got -1.0"), (np.nan, "rho must be finite")):
        with pytest.raises(ValueError, match=match):
            net.learn([0.3], 1.0, [0.6], False, [0.5], rho=rho)
    with pytest.raises(ValueError, match="rhos must be \\[3\\]"):
        net.learn_recording(states_t=np.zeros(3), cumulants=np.zeros(3), states_tp1=np.zeros(3), rhos=np.ones(2),
                            timescales=np.zeros((3, 1)))  # fmt: skip
    np.testing.assert_array_equal(net.weights, before)
    traced = OffPolicyGammaNet(dataclasses.replace(SMALL, lam=0.5), rng=np.random.default_rng(0))
    traced.learn([0.3], 1.0, [0.6], False, [0.0, 0.9], rho=1.0)
    with pytest.raises(ValueError, match="same ladder every step"):
        traced.learn([0.3], 1.0, [0.6], False, [0.0, 0.8], rho=1.0)
    with pytest.raises(ValueError, match=r"step_size x secondary_regularization must be at most 1 .*0.5 x 3"):
        OffPolicyGammaNet(dataclasses.replace(SMALL, secondary_step_size=0.5, secondary_regularization=3.0))
    with pytest.raises(TypeError, match="needs an OffPolicyConfig"):
        OffPolicyGammaNet(GammaNetConfig(), rng=np.random.default_rng(0))


def test_divergence_is_refused_and_the_learner_left_as_it_was():
    wild = dataclasses.replace(SMALL, method="td", step_size=50.0, rho_max=1e6, step_size_decay_steps=0)
    net = OffPolicyGammaNet(wild, rng=np.random.default_rng(0))
    with pytest.raises(FloatingPointError, match="learner unchanged"):
        for _ in range(10_000):
            net.learn([0.2], 1e300, [0.21], False, [0.99], rho=1e6)
    assert np.all(np.isfinite(net.weights))


def test_checkpoints_carry_secondary_weights_and_traces(tmp_path):
    config = dataclasses.replace(SMALL, lam=0.5)
    net = OffPolicyGammaNet(config, rng=np.random.default_rng(3))
    s_t, c, s_tp1, rho, _ = _stream(40)
    net.learn_recording(states_t=s_t, cumulants=c, states_tp1=s_tp1, rhos=rho, timescales=np.tile([0.0, 0.9], (40, 1)))
    path = net.save(tmp_path / "net.npz")
    back = OffPolicyGammaNet.load(path, config=config)
    for name in ("weights", "secondary_weights", "traces", "trace_gammas"):
        np.testing.assert_array_equal(getattr(back, name), getattr(net, name))
    assert back.update_count == 40
    # Resumed, it learns exactly as the original goes on.
    for learner in (net, back):
        learner.learn(s_t[0], 1.0, s_tp1[0], False, [0.0, 0.9], rho=2.0)
    np.testing.assert_array_equal(back.weights, net.weights)
    np.testing.assert_array_equal(back.secondary_weights, net.secondary_weights)
    with pytest.raises(CheckpointError, match="another configuration: method"):
        OffPolicyGammaNet.load(path, config=dataclasses.replace(config, method="td"))
    with pytest.raises(CheckpointError, match="not a 'linear_off_policy_gamma_net'"):
        OffPolicyGammaNet.load(LinearGammaNet(GammaNetConfig(), rng=np.random.default_rng(0)).save(tmp_path / "o.npz"))
    saved, arrays, meta = load_npz(path, kind=OffPolicyGammaNet.kind, version=1)
    cases = {
        "secondary_weights are float64\\[64\\]; expected float64\\[65\\]": {"secondary_weights": np.zeros(64)},
        "secondary_weights hold non-finite": {"secondary_weights": np.full(65, np.inf)},
        "traces are float64\\[2, 3\\]": {"traces": np.zeros((2, 3))},
        "out-of-range": {"trace_gammas": np.array([0.0, 1.0])},
    }
    # A file from before h's ridge learned without one, and resumes so.
    older = {k: v for k, v in saved.items() if k != "secondary_regularization"}
    save_npz(tmp_path / "older.npz", kind=OffPolicyGammaNet.kind, version=1, config=older, arrays=arrays, meta=meta)
    assert OffPolicyGammaNet.load(tmp_path / "older.npz").config.secondary_regularization == 0.0
    for match, change in cases.items():
        save_npz(tmp_path / "bad.npz", kind=OffPolicyGammaNet.kind, version=1, config=saved,
                 arrays={**arrays, **change}, meta=meta)  # fmt: skip
        with pytest.raises(CheckpointError, match=match):
            OffPolicyGammaNet.load(tmp_path / "bad.npz")


# -- exact v_pi on small MDPs


def _random_mdp(n=5, seed=1):
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.full(n, 0.5), size=(2, n)), rng.normal(size=n)


def _ring(n=6):
    """Left or right round a ring (10 % stay put); the cumulant is 1 on reaching state 0."""
    P = np.zeros((2, n, n))
    for s in range(n):
        P[0, s, (s - 1) % n], P[1, s, (s + 1) % n] = 0.9, 0.9
        P[0, s, s] = P[1, s, s] = 0.1
    return P, np.eye(n)[0]


def _v_pi(P, c, pi, gamma):
    """The exact values: v = (I - gamma P_pi)^-1 r_pi, r_pi(s) = E_pi[C_{t+1} | S_t = s] (C a function of S_{t+1})."""
    P_pi = np.einsum("sa,ast->st", pi, P)
    return np.linalg.solve(np.eye(c.shape[0]) - gamma * P_pi, P_pi @ c)


def _walk(P, policy, steps, rng):
    """(S_t, A_t, S_{t+1}) [3, steps] of ``policy`` from state 0 (inverse-CDF draws, one uniform each)."""
    n = P.shape[1]
    u = rng.random((steps, 2))
    pi_cdf, p_cdf = np.cumsum(policy, axis=1), np.cumsum(P, axis=2)
    s, out = 0, np.empty((3, steps), dtype=np.int64)
    for t in range(steps):
        a = min(int(np.searchsorted(pi_cdf[s], u[t, 0], side="right")), 1)
        s_next = min(int(np.searchsorted(p_cdf[a, s], u[t, 1], side="right")), n - 1)
        out[:, t] = s, a, s_next
        s = s_next
    return out


TRAINED = np.round(np.arange(0.0, 0.91, 0.1), 2)  # Gamma_t: the ladder, every step
BETWEEN = np.array([0.15, 0.45, 0.75, 0.85])  # read between its rungs
STEPS = 20_000


def _config(n: int, **kw) -> dict:
    """One feature per (state, tile of gamma): widths narrower than the states' spacing, 8 tilings."""
    return dict(state_low=(0.0,), state_high=(float(n - 1),), tilings=(8,), tile_widths=(1.0 / n,), memory_size=0,
                bias=False, timescale_input="gamma", step_size=0.1, step_size_decay_steps=STEPS, **kw)  # fmt: skip


def _errors(net, n, v):
    predicted = net.predict(np.arange(n, dtype=np.float64)[:, None], BETWEEN)
    return np.sqrt(np.mean((predicted - v) ** 2, axis=0))


@pytest.mark.parametrize("mdp", ["random", "ring"])
def test_gtd_off_policy_matches_on_policy_td_against_exact_values(mdp):
    P, c = _random_mdp() if mdp == "random" else _ring()
    n = c.shape[0]
    pairs = [
        (np.tile([0.9, 0.1], (n, 1)), np.tile([0.5, 0.5], (n, 1))),  # pi mostly one action, b uniform
        (np.tile([0.2, 0.8], (n, 1)), np.tile([0.6, 0.4], (n, 1))),  # pi prefers what b does less
    ]
    ladder = np.tile(TRAINED, (STEPS, 1))
    for pi, b in pairs:
        v = np.array([_v_pi(P, c, pi, g) for g in BETWEEN]).T
        rng = np.random.default_rng(0)
        s, _, s_next = _walk(P, pi, STEPS, rng)
        td = LinearGammaNet(GammaNetConfig(**_config(n)), rng=np.random.default_rng(1))
        td.learn_recording(states_t=s.astype(float), cumulants=c[s_next], states_tp1=s_next.astype(float),
                           timescales=ladder)  # fmt: skip
        on_policy = _errors(td, n, v)
        s, a, s_next = _walk(P, b, STEPS, rng)
        ratios = {}
        for lam, kappa in ((0.0, None), (0.5, None), (0.0, 0.0)):  # None: the default ridge of h
            ridge = {} if kappa is None else {"secondary_regularization": kappa}
            config = OffPolicyConfig(**_config(n), method="gtd", lam=lam, secondary_step_size=0.1, **ridge)
            net = OffPolicyGammaNet(config, rng=np.random.default_rng(1))
            net.learn_recording(states_t=s.astype(float), cumulants=c[s_next], states_tp1=s_next.astype(float),
                                rhos=pi[s, a] / b[s, a], timescales=ladder)  # fmt: skip
            ratios[lam, kappa] = _errors(net, n, v) / on_policy
        assert np.all(on_policy < 0.3), on_policy  # the yardstick itself learned v_pi
        # At the defaults, TDC and GTD(0.5): within 1.5x of on-policy TD(0)'s error at every timescale between the
        # rungs. TDC without the ridge (kappa 0) is as good up to 0.75 and slower at 0.85 (1.9x and 2.2x on the
        # ring: h's correction of a long timescale lags); within 2.5x.
        assert np.all(ratios[0.0, None] <= 1.5) and np.all(ratios[0.5, None] <= 1.5), ratios
        assert np.all(ratios[0.0, 0.0][:3] <= 1.5) and ratios[0.0, 0.0][3] <= 2.5, ratios
