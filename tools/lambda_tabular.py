"""Textbook tabular TD(lambda) against TD(0) on the event question of tests/test_lambda_between.py's chains.

    python tools/lambda_tabular.py SEEDS CHAINS [LAMBDAS [ALPHAS [DESIGN]]]
    e.g.  python tools/lambda_tabular.py 0-9 ring,sparse,sparse7,sparse11 0.1,0.5,0.9 0.003,0.01,0.03,0.1

The oracle for the test's second bar (the test's ``tabular_td``): one table entry per state, one
fixed gamma per run (tau 45.4 and 86.3, the bar's), accumulating traces cut where the return stops
(entering state 0); no tiles, no timescale input, no ladder, no draws. The streams, checkpoints and
the linear decay of alpha to 0 are the test's; the error is its relative RMSE weighted by the
stationary distribution, and "curve" its mean over the checkpoints. CHAINS: the test's ring and
sparse, sparseK (successors of seed K) or ringN (N states). DESIGN (the test's TABULAR_DESIGNS):
textbook (TD(lambda) at alpha, the default), scaled (at alpha (1 - lambda), the library's traced
step alone), built (the library's: TD(0) at alpha beside the traced step, faded) or handover
(TD(lambda) at alpha phi_t handing over to TD(0) at alpha (1 - phi_t)); or the library's one-gamma
learner (``FixedTimescaleTD``) at the textbook step, its step_size alpha / (1 - lambda): library
(the test's state tiles, 8 of 1/16, and a bias), library-nobias, library-fine (no bias, tiles of
1/64: one state each, the table again). Prints per chain, alpha and
tau TD(0)'s mean curve error and each lambda's curve over TD(0)'s, as a mean over seeds with a
bootstrap 95 % interval.
"""

import itertools
import sys

import numpy as np
from lambda_heldout import _seeds, chains, mean_interval, register_chain  # chains: the test's harness

TAUS = (45.4, 86.3)
#: The library's one-gamma learner: (bias, state tile width) of each design.
LIBRARY = {"library": (True, 1 / 16), "library-nobias": (False, 1 / 16), "library-fine": (False, 1 / 64)}


def library_curve(walk, tau: float, lam: float, alpha: float, design: str) -> float:
    """tabular_curve's measure for FixedTimescaleTD at tau, at textbook TD(lambda)'s step alpha."""
    P, c, beta, s = walk
    n = len(c)
    x = (s + 0.5) / n
    gamma = 1.0 - 1.0 / tau
    want = chains.exact(P, c, gamma, beta)
    d = chains.stationary(P)
    bias, width = LIBRARY[design]
    net = chains.one_gamma_td(gamma, lam, alpha, len(s) - 1, bias=bias, width=width)
    states = ((np.arange(n) + 0.5) / n)[:, None]
    errors = []
    for a, b in itertools.pairwise([0, *chains.CHECKPOINTS]):
        net.learn_recording(states_t=x[a:b, None], cumulants=c[s[a + 1 : b + 1]], states_tp1=x[a + 1 : b + 1, None],
                            terminals=beta[s[a + 1 : b + 1]] == 0)  # fmt: skip
        errors.append(chains.relative_rmse(net.predict(states), want, d))
    return float(np.mean(errors))


def curve(walk, tau: float, lam: float, alpha: float, design: str) -> float:
    if design in LIBRARY:
        return library_curve(walk, tau, lam, alpha, design)
    return chains.tabular_curve(walk, tau, lam, alpha, design)


def main(seeds: str, names: str, lams: str = "0.1,0.5,0.9", alphas: str = "0.003,0.01,0.03,0.1",
         design: str = "textbook") -> None:  # fmt: skip
    if design not in (*chains.TABULAR_DESIGNS, *LIBRARY):
        sys.exit(f"DESIGN must be one of {', '.join((*chains.TABULAR_DESIGNS, *LIBRARY))}; got {design!r}")
    lambdas = [float(x) for x in lams.split(",")]
    for name in names.split(","):
        register_chain(name)
        walks = [chains.stream(name, True, chains.STEPS, seed) for seed in _seeds(seeds)]
        for alpha in (float(x) for x in alphas.split(",")):
            for tau in TAUS:
                td0 = np.array([curve(walk, tau, 0.0, alpha, design) for walk in walks])
                cells = [f"{name:9s} alpha {alpha:<6g} tau {tau:5.1f}  TD(0) {td0.mean():.3f}"]
                for lam in lambdas:
                    got = np.array([curve(walk, tau, lam, alpha, design) for walk in walks])
                    mean, low, high = mean_interval(got / td0)
                    cells.append(f"lam {lam:g} {mean:.2f} ({low:.2f}-{high:.2f})")
                print("  ".join(cells), flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(*sys.argv[1:])
