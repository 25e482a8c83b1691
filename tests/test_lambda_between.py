"""TD(lambda) between the ladder's rungs: two Markov chains, exact values, against TD(0) on drawn Gamma_t.

TD(lambda) keeps traces on a fixed ladder of timescales and trains TD(0) between its rungs
(gamma_net_core/linear/traces.py). On an 8-state ring and a 25-state sparse chain with a rare
large cumulant, continuing and episodic (the return stops on entering state 0: an event
question), with exact values V = (I - gamma P B)^-1 P c (B: the continuations), issue 24 asks it
to be within 1.5x of the paper's TD(0) on drawn Gamma_t at timescales on no ladder, and better on
the episodic chains at tau >= 40, where the return runs up to the event and TD(0) bootstraps it
back a step at a time. The first holds on the ring, not everywhere on the sparse chain; the second
does not hold in general: both kept as expected failures where they fail. Both learners see the same
stream, tile offsets, coding and draws (TD(lambda)'s TD(0) part trains on the draws the baseline
trains on).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from gamma_net_core.linear import GammaNetConfig, LinearGammaNet
from gamma_net_core.timescales import TimescaleSampler, TimescaleSampling, ladder

#: Timescales on no ladder: the midpoints of the arm ladder's gaps 2.71-6.12, 12.95-16.36, 43.67-47.09, 84.64-88.05.
OFF_LADDER_TAUS = (3.7, 14.7, 45.4, 86.3)
SAMPLING = TimescaleSampling(n_gamma=1, n_tau=29)  # the arm's: 32 timescales, tau in [1, 100]
#: Steps per run (alpha decayed linearly to 0 over them): at 60,000 the ratios scattered 0.33-2.1 over seeds.
STEPS = 300_000
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
    """Relative RMSE (weighted by the stationary distribution) at OFF_LADDER_TAUS of TD(0) (key 0.0) and each lambda."""
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
    stream = {"states_t": x[:-1, None], "cumulants": c[s[1:]], "states_tp1": x[1:, None], "terminals": beta[s[1:]] == 0}
    states = ((np.arange(n) + 0.5) / n)[:, None]
    d = stationary(P)
    errors = {}
    for lam in (0.0, *lams):
        net = LinearGammaNet(config(lam, steps), rng=np.random.default_rng(seed + 1))
        sampler = TimescaleSampler(SAMPLING, np.random.default_rng(seed + 2), fixed=lam > 0.0)
        net.learn_recording(**stream, timescales=sampler)
        row = []
        for tau in OFF_LADDER_TAUS:
            gamma = 1.0 - 1.0 / tau
            want = exact(P, c, gamma, beta)
            got = net.predict(states, [gamma])[:, 0]
            row.append(np.sqrt(d @ (got - want) ** 2 / (d @ want**2)))
        errors[lam] = np.array(row)
    return errors


def test_the_probed_taus_are_on_no_ladder():
    rungs = 1.0 / (1.0 - ladder(SAMPLING))
    assert np.min(np.abs(rungs[:, None] - np.array(OFF_LADDER_TAUS)[None, :])) > 0.99


#: The sparse chain: TD(lambda) is not within 1.5x of TD(0) everywhere there (seed 0: 1.91 at tau 86.3 with
#: lambda 0.5, where TD(0) happens to be 0.012 off; episodic 1.55): its rare cumulant of 20 makes the traced
#: returns noisy. Issue 24's bar, kept as an expected failure.
SPARSE = pytest.mark.xfail(reason="sparse chain: TD(lambda) up to 1.9x TD(0)'s error at tau 86.3")
#: The event question's gain at tau >= 40 held on the ring for seed 0 only (0.87-0.94; seeds 1 and 2:
#: 0.92-1.21), never on the sparse chain: issue 24's second bar, not met in general (docs/results.md).
EVENT = pytest.mark.xfail(reason="TD(lambda) not reliably better than TD(0) on the event question at tau >= 40")


@functools.cache
def errors_of(chain: str, episodic: bool) -> dict:
    return run(chain, episodic, (0.5, 0.9))


@pytest.mark.parametrize(
    "chain, episodic",
    [("ring", False), ("ring", True), pytest.param("sparse", False, marks=SPARSE),
     pytest.param("sparse", True, marks=SPARSE)],
    ids=["ring-continuing", "ring-episodic", "sparse-continuing", "sparse-episodic"],
)  # fmt: skip
def test_td_lambda_holds_between_the_rungs(chain, episodic):
    """Seed 0; the ring's ratios were 0.87-1.30 over seeds 0-2 (docs/results.md)."""
    errors = errors_of(chain, episodic)
    for lam in (0.5, 0.9):
        assert np.all(errors[lam] / errors[0.0] < RATIO), (lam, errors[lam], errors[0.0])


@pytest.mark.parametrize("chain", [pytest.param("ring", marks=EVENT), pytest.param("sparse", marks=EVENT)])
def test_td_lambda_gains_on_the_event_question_at_long_timescales(chain):
    errors = errors_of(chain, True)
    long = np.array(OFF_LADDER_TAUS) >= 40
    for lam in (0.5, 0.9):
        assert np.all(errors[lam][long] < errors[0.0][long]), (lam, errors[lam], errors[0.0])
