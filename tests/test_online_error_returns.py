"""The realized returns the online error exposes, against direct discounted sums over a recorded stream.

Each step :meth:`OnlineError.realized` gives, per question and column, the return that completed
then (the earliest made, where a termination completes several) beside the prediction made where
it starts. The reference here sums each return by its definition over the whole recording.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gamma_net_core.horde.online_error import OnlineError, PlainOnlineError
from gamma_net_core.horde.readouts import horizon


def discounts(gammas, readouts) -> list[np.ndarray]:
    """d(a) over each column's horizon: gamma^a, or a readout's sum_j c_j gamma_j^a."""
    out = [g ** np.arange(horizon(g)) for g in gammas]
    for rg, rc in readouts.values():
        a = np.arange(horizon(float(np.max(rg))))
        out.append(np.asarray(rc) @ (np.asarray(rg)[:, None] ** a[None, :]))
    return out


def direct_realized(c: np.ndarray, cont: np.ndarray, d: np.ndarray):
    """Per step t, the return completed at t and the step n it started from (NaN, -1: none), summed by definition.

    G_n = sum_a d(a) c_{n+1} ... c_{n+a} C_{n+1+a} over a < H, stopped after the cumulant where a
    termination holds (c = 0); it completes at step n + (its number of cumulants). Of those complete at
    one step, the earliest n.
    """
    T, H = c.shape[0], d.shape[0]
    returns, made = np.full(T, np.nan), np.full(T, -1)
    for n in range(T):
        ret, weight = 0.0, 1.0
        for a in range(H):
            t = n + 1 + a
            if t >= T:
                break
            ret += d[a] * weight * c[t]
            weight *= cont[t]
            if weight == 0.0 or a == H - 1:
                if made[t] < 0:  # n rises: the first to complete at t is the earliest made
                    returns[t], made[t] = ret, n
                break
    return returns, made


def run(errors, c, cont, predictions):
    """Observe the stream; per step, what ``realized()`` gave."""
    out = []
    for n in range(c.shape[0]):
        errors.observe(c[n], cont[n], predictions[n])
        out.append(errors.realized())
    return out


def check_against_direct(c, cont, predictions, gammas, readouts, *, fast_tolerance):
    """Both trackers' realized returns equal the direct sums: the plain one exactly, the fast one nearly."""
    T, Q = c.shape
    ds = discounts(gammas, readouts)
    for cls, tolerance in ((PlainOnlineError, 0.0), (OnlineError, fast_tolerance)):
        got = run(cls(gammas=gammas, n_questions=Q, readouts=readouts), c, cont, predictions)
        for q in range(Q):
            for p, d in enumerate(ds):
                want, made = direct_realized(c[:, q], cont[:, q], d)
                returns = np.array([r.returns[q, p] for r in got])
                steps_ago = np.array([r.steps_ago[q, p] for r in got])
                prediction = np.array([r.predictions[q, p] for r in got])
                done = made >= 0
                np.testing.assert_array_equal(np.isnan(returns), ~done, err_msg=f"{cls.__name__} q={q} p={p}")
                scale = max(1.0, float(np.max(np.abs(want[done]), initial=0.0)))
                np.testing.assert_allclose(returns[done], want[done], rtol=0, atol=tolerance * scale)
                np.testing.assert_array_equal(steps_ago[done], np.arange(T)[done] - made[done])
                np.testing.assert_array_equal(steps_ago[~done], 0)
                np.testing.assert_array_equal(prediction[done], predictions[made[done], q, p])


def test_realized_returns_equal_direct_sums_with_terminations_and_readouts():
    rng = np.random.default_rng(11)
    T, Q = 900, 4
    c = rng.normal(1.0, 1.0, (T, Q))
    cont = np.ones((T, Q))
    cont[:, 1] = rng.random(T) > 0.02  # rare terminations: most returns run their horizon
    cont[:, 2] = rng.random(T) > 0.3  # frequent ones: several complete together
    cont[:, 3] = 0.0  # every step: each return is one cumulant
    gammas = 1.0 - 1.0 / np.array([1.0, 2.0, 10.0, 100.0])
    readouts = {"two": (np.array([0.5, 0.9]), np.array([0.3, 0.7]))}
    predictions = rng.normal(size=(T, Q, 5))
    # the fast tracker divides running sums by a factor >= gamma^H ~ 1e-3 (1e-4 for a readout's
    # components): at most four of float's sixteen digits are lost
    check_against_direct(c, cont, predictions, gammas, readouts, fast_tolerance=1e-12)


def test_without_terminations_each_step_completes_the_prediction_made_its_horizon_before():
    T = 200
    gammas = np.array([0.0, 0.9])
    errors = OnlineError(gammas=gammas, n_questions=1)
    H = errors.horizons
    c = np.arange(T, dtype=float)
    for n in range(T):
        errors.observe([c[n]], None, [[n, -n]])
        realized = errors.realized()
        for p, h in enumerate(H):
            if n < h:
                assert np.isnan(realized.returns[0, p]) and realized.steps_ago[0, p] == 0
            else:
                assert realized.steps_ago[0, p] == h  # the prediction made at n - H: one a step, in order
                assert realized.predictions[0, p] == (n - h) * (1 if p == 0 else -1)
    # gamma 0: the return of the prediction at n - 1 is the next cumulant alone
    assert errors.realized().returns[0, 0] == c[-1]
    # gamma 0.9: sum_a 0.9^a C_{n-H+1+a}, exactly as summed directly
    want = sum(0.9**a * c[T - H[1] + a] for a in range(H[1]))
    assert errors.realized().returns[0, 1] == pytest.approx(want, rel=1e-13)


def test_a_gap_leaves_no_return_across_it_and_the_plain_tracker_agrees():
    rng = np.random.default_rng(3)
    T, Q = 300, 2
    gammas = [0.5, 0.8]
    fast, plain = (cls(gammas=gammas, n_questions=Q) for cls in (OnlineError, PlainOnlineError))
    for n in range(T):
        if n == 150:
            fast.restart()
            plain.restart()
        stopped = np.array([False, 100 <= n < 120])
        c, cont, predictions = rng.normal(size=Q), (rng.random(Q) > 0.1).astype(float), rng.normal(size=(Q, 2))
        predictions[stopped] = np.nan
        for errors in (fast, plain):
            if stopped.any():
                errors.restart(stopped)
            errors.observe(c, cont, predictions)
        a, b = fast.realized(), plain.realized()
        np.testing.assert_allclose(a.returns, b.returns, rtol=1e-11, atol=1e-12)
        np.testing.assert_array_equal(a.predictions, b.predictions)
        np.testing.assert_array_equal(a.steps_ago, b.steps_ago)
        if 100 <= n <= 120:  # question 1's pending returns dropped at its gap; its first after it made at 120
            assert np.all(np.isnan(a.returns[1])), (n, a)
        if n == 150:
            assert np.all(np.isnan(a.returns)), a  # every pending return dropped at the gap


@settings(max_examples=60, deadline=None)
@given(
    data=st.lists(
        st.tuples(st.floats(-10, 10), st.booleans(), st.floats(-10, 10)),
        min_size=1,
        max_size=80,
    ),
    taus=st.lists(st.sampled_from([1.0, 1.5, 2.0, 3.0, 5.0]), min_size=1, max_size=3),
)
def test_property_realized_returns_are_the_discounted_sums_of_the_cumulants(data, taus):
    """Any cumulants, terminations (True: c = 0 there) and predictions, one question at a few timescales."""
    c = np.array([[x] for x, _, _ in data])
    cont = np.array([[0.0 if terminates else 1.0] for _, terminates, _ in data])
    predictions = np.array([[[v + p for p in range(len(taus))]] for _, _, v in data])  # one per column
    gammas = 1.0 - 1.0 / np.asarray(taus)
    check_against_direct(c, cont, predictions, gammas, {}, fast_tolerance=1e-12)
