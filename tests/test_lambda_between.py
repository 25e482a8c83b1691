"""TD(lambda) between the ladder's rungs: two Markov chains, exact values, against TD(0) on drawn Gamma_t.

TD(lambda) keeps traces on a fixed ladder of timescales and trains TD(0) between its rungs
(gamma_net_core/linear/traces.py). On an 8-state ring and a 25-state sparse chain with a rare
large cumulant, continuing and episodic (the return stops on entering state 0: an event
question), with exact values V = (I - gamma P B)^-1 P c (B: the continuations), issue 24 asks it
to be within 1.5x of the paper's TD(0) on drawn Gamma_t at timescales on no ladder, and better on
the episodic chains at tau >= 40, where the return runs up to the event and TD(0) bootstraps it
back a step at a time. The first is checked at the end of the run; the second over the learning
curve (faster, not more accurate once both have converged), and on the sparse chain it does not
hold: kept as an expected failure there. Both learners see the same stream, tile offsets, coding
and draws (TD(lambda)'s TD(0) part trains on the draws the baseline trains on).

What the second bar measures here is the step more than the traces: TD(lambda) beside the draw
takes about twice TD(0)'s step (linear/traces.py), and over ten seeds lambda 0.1 gains on the ring
and loses on the sparse chains as much as 0.5 does; with the step matched to TD(0)'s every lambda is
within 6 % of TD(0) on both (docs/results.md, `python tools/lambda_heldout.py 0-9 ...`). The ring's
pass is the larger step's.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest

from gamma_net_core.linear import GammaNetConfig, LinearGammaNet
from gamma_net_core.timescales import TimescaleSampler, TimescaleSampling, ladder

#: Timescales on no ladder: the midpoints of the arm ladder's gaps 2.71-6.12, 12.95-16.36, 43.67-47.09, 84.64-88.05.
OFF_LADDER_TAUS = (3.7, 14.7, 45.4, 86.3)
SAMPLING = TimescaleSampling(n_gamma=1, n_tau=29)  # the arm's: 32 timescales, tau in [1, 100]
#: Steps per run (alpha decayed linearly to 0 over them): at 60,000 the ratios scattered 0.33-2.1 over seeds.
STEPS = 300_000
#: Where the learning curve is read: spaced about evenly in log(steps), so learning's early part, where
#: TD(lambda) is said to be faster, weighs as much as its converged end.
CHECKPOINTS = (1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 150_000, 200_000, STEPS)
#: Within this factor of drawn-Gamma_t TD(0) at every off-ladder tau.
RATIO = 1.5
#: alpha (per active feature after division), decayed linearly to 0 over the run.
ALPHA = 0.03


def ring(n: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """A walk around a ring (forwards 0.6, stay 0.3, back 0.1), cumulant 1 + cos(2 pi s / n) on arriving at s."""
    P = np.zeros((n, n))
    for s in range(n):
        P[s, (s + 1) % n] += 0.6
        P[s, s] += 0.3
        P[s, (s - 1) % n] += 0.1
    return P, 1.0 + np.cos(2 * np.pi * np.arange(n) / n)


def sparse(n: int = 25, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Three random successors per state and a step forward; a cumulant of 20 on arriving at the last state only."""
    rng = np.random.default_rng(seed)
    P = np.zeros((n, n))
    for s in range(n):
        P[s, rng.choice(n, size=3, replace=False)] = rng.dirichlet(np.ones(3))
        P[s, (s + 1) % n] += 0.2
    P /= P.sum(axis=1, keepdims=True)
    c = np.zeros(n)
    c[-1] = 20.0
    return P, c


CHAINS = {"ring": ring, "sparse": sparse}


def exact(P, c, gamma, beta):
    """V = P (c + gamma beta V): the return of c(S_{t+1}), discounted by gamma and stopped where beta(S_{t+1}) = 0."""
    return np.linalg.solve(np.eye(len(c)) - gamma * P * beta[None, :], P @ c)


def stationary(P):
    w, v = np.linalg.eig(P.T)
    d = np.real(v[:, np.argmin(np.abs(w - 1.0))])
    return d / d.sum()


def config(lam: float, steps: int) -> GammaNetConfig:
    """8 tilings of width 1/16 over the state and both timescale inputs: fine enough to represent either chain."""
    return GammaNetConfig(
        state_low=(0.0,), state_high=(1.0,), tilings=(8,), tile_widths=(1 / 16,), memory_size=0, bias=True,
        step_size=ALPHA, step_size_decay_steps=steps, lam=lam, timescale_input="both", tau_scale=100.0,
    )  # fmt: skip


def run(chain: str, episodic: bool, lams, *, steps: int = STEPS, seed: int = 0) -> dict:
    """Relative RMSE (weighted by the stationary distribution) at OFF_LADDER_TAUS of TD(0) (key 0.0) and each lambda.

    Each value is [len(CHECKPOINTS), len(OFF_LADDER_TAUS)]: the learning curve, read after each
    checkpoint's step (the stream is learned in pieces, which learns what one call does).
    """
    P, c = CHAINS[chain]()
    n = len(c)
    beta = np.ones(n)
    if episodic:
        beta[0] = 0.0
    rng = np.random.default_rng(seed)
    cumulative = np.cumsum(P, axis=1)
    s = np.empty(steps + 1, dtype=np.int64)
    s[0] = 0
    u = rng.random(steps)
    for t in range(steps):
        s[t + 1] = min(np.searchsorted(cumulative[s[t]], u[t]), n - 1)
    x = (s + 0.5) / n
    states = ((np.arange(n) + 0.5) / n)[:, None]
    d = stationary(P)
    wants = [exact(P, c, 1.0 - 1.0 / tau, beta) for tau in OFF_LADDER_TAUS]
    bounds = [0, *(b for b in CHECKPOINTS if b < steps), steps]
    errors = {}
    for lam in (0.0, *lams):
        net = LinearGammaNet(config(lam, steps), rng=np.random.default_rng(seed + 1))
        sampler = TimescaleSampler(SAMPLING, np.random.default_rng(seed + 2), fixed=lam > 0.0)
        curve = []
        for a, b in itertools.pairwise(bounds):
            net.learn_recording(states_t=x[a:b, None], cumulants=c[s[a + 1 : b + 1]], states_tp1=x[a + 1 : b + 1, None],
                                terminals=beta[s[a + 1 : b + 1]] == 0, timescales=sampler)  # fmt: skip
            row = []
            for tau, want in zip(OFF_LADDER_TAUS, wants):
                got = net.predict(states, [1.0 - 1.0 / tau])[:, 0]
                row.append(np.sqrt(d @ (got - want) ** 2 / (d @ want**2)))
            curve.append(row)
        errors[lam] = np.array(curve)
    return errors


def test_the_probed_taus_are_on_no_ladder():
    rungs = 1.0 / (1.0 - ladder(SAMPLING))
    assert np.min(np.abs(rungs[:, None] - np.array(OFF_LADDER_TAUS)[None, :])) > 0.99


#: The event question's gain at tau >= 40 on the sparse chain: TD(lambda)'s second step costs there what it gains
#: on the ring (1.05-1.22x TD(0) at tau 86.3, means over ten seeds, lambda 0.1 the worst), and at a step matched to
#: TD(0)'s it is within 2 % of TD(0) at every lambda: the traces' reach does not make it faster (docs/results.md).
EVENT_SPARSE = pytest.mark.xfail(reason="sparse chain: TD(lambda)'s learning curve not below TD(0)'s at tau >= 40")


@functools.cache
def errors_of(chain: str, episodic: bool) -> dict:
    return run(chain, episodic, (0.5, 0.9))


@pytest.mark.parametrize(
    "chain, episodic",
    [("ring", False), ("ring", True), ("sparse", False), ("sparse", True)],
    ids=["ring-continuing", "ring-episodic", "sparse-continuing", "sparse-episodic"],
)  # fmt: skip
def test_td_lambda_holds_between_the_rungs(chain, episodic):
    """The error at the end of the run (alpha decayed to 0), seed 0; other seeds in docs/results.md."""
    errors = errors_of(chain, episodic)
    for lam in (0.5, 0.9):
        assert np.all(errors[lam][-1] / errors[0.0][-1] < RATIO), (lam, errors[lam][-1], errors[0.0][-1])


@pytest.mark.parametrize("chain", ["ring", pytest.param("sparse", marks=EVENT_SPARSE)])
def test_td_lambda_learns_the_event_question_faster_at_long_timescales(chain):
    """Faster: a lower mean error over the learning curve (CHECKPOINTS), not a lower error at its end.

    With alpha decayed to 0 both learners converge to the values the stream allows, and what is left
    at the end is noise (since the traces fade out over the first half of the decay, TD(lambda) ends
    as TD(0) on the same draws: the end is the first test's). TD(lambda)'s claim is speed: an event's
    return reaches back along the traces in one step where TD(0) bootstraps it back one step per visit.
    On the ring the pass is carried by the larger step of TD(lambda) beside the draw (lambda 0.1 gains
    as much: the module's docstring), not by that reach.
    """
    errors = errors_of(chain, True)
    long = np.array(OFF_LADDER_TAUS) >= 40
    td0 = errors[0.0].mean(axis=0)[long]
    for lam in (0.5, 0.9):
        assert np.all(errors[lam].mean(axis=0)[long] < td0), (lam, errors[lam].mean(axis=0), errors[0.0].mean(axis=0))


def test_the_rings_event_gain_is_the_step_lambda_0_1_gains_as_much():
    """The control for the traces' reach (linear/traces.py, "Twice the step"): lambda 0.1, traces about one step
    long but the same two updates a step, is as far below TD(0) on the ring's event question as lambda 0.5.

    Over ten seeds the two differ by 0.09 at most at tau >= 40 (docs/results.md); seed 0 here.
    """
    errors = errors_of("ring", True)
    control = run("ring", True, (0.1,))
    np.testing.assert_array_equal(control[0.0], errors[0.0])  # the same stream, draws and TD(0)
    long = np.array(OFF_LADDER_TAUS) >= 40
    td0 = errors[0.0].mean(axis=0)[long]
    reach = errors[0.5].mean(axis=0)[long] / td0
    step = control[0.1].mean(axis=0)[long] / td0
    assert np.all(step < 1.0) and np.all(np.abs(reach - step) < 0.1), (step, reach)
