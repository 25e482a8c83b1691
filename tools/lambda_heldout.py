"""TD(lambda)'s two bars of tests/test_lambda_between.py on seeds and chains the test does not use.

    python tools/lambda_heldout.py SEEDS CHAINS [LAMBDAS [ALPHA [BIAS]]]
    e.g.  python tools/lambda_heldout.py 0-9 sparse:1,ring:1,sparse7:1,sparse11:1 0.1,0.5,0.9

SEEDS: a list (0,3) or a range (0-9). CHAINS: NAME:EPISODIC, NAME one of the test's chains, sparseK
(the sparse chain with successors of seed K) or ringN (the ring of N states, whose event lies about
N steps away from the stationary distribution: 23.6 for 24, the test's ring's 7.6). LAMBDAS:
default 0.5,0.9 (the test's); a small lambda (0.1) is the control: TD(lambda)'s steps with traces
about one step long, so what it gains is the steps' doing, not the traces'. One JSON line per chain
and seed: per lambda, the final error over TD(0)'s ("end") and the mean over the learning curve
over TD(0)'s ("curve"), at the test's four off-ladder tau, and TD(0)'s own mean error over the
curve ("td0 curve"; ALPHA: the test's 0.03 by default; BIAS: nobias leaves out the bias feature,
which the test's tiles do not need); then per chain and lambda the curve ratio at tau 45.4 and 86.3
(the event question's bar) as a mean over seeds with a bootstrap 95 % interval, and the largest end
ratio (the first bar).

The designs measured against the built one in docs/results.md are a patch (tools/lambda_variants.patch):
apply it in a worktree and run this tool from there, one numba cache per setting (the settings are
read when the kernels compile):

    git worktree add /tmp/variants HEAD && git -C /tmp/variants apply tools/lambda_variants.patch
    LAM_SHARE=0.5 LAM_NORM=1 NUMBA_CACHE_DIR=/tmp/nb-share-norm PYTHONPATH=/tmp/variants \
        python /tmp/variants/tools/lambda_heldout.py 0-9 ring:1,sparse:1 0.1,0.5,0.9

(LAM_SHARE=1 LAM_HAND=1 is the handover: the traces at alpha phi_t, textbook TD(lambda)'s step, the
draw at alpha_t (1 - phi_t).) tools/lambda_tabular.py is the tabular oracle for the same bar.
"""

import dataclasses
import functools
import json
import pathlib
import sys

import numpy as np

from gamma_net_core.experiments.reflex_realtime_stats import bootstrap_ratio

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
import test_lambda_between as chains  # the test's harness: same streams, tiles, alpha

LONG = slice(2, 4)  # tau 45.4 and 86.3 of chains.OFF_LADDER_TAUS


def _seeds(text: str) -> list[int]:
    if "-" in text:
        first, last = (int(s) for s in text.split("-"))
        return list(range(first, last + 1))
    return [int(s) for s in text.split(",")]


def register_chain(chain: str) -> None:
    """Adds sparseK (the sparse chain with successors of seed K) or ringN (N states) to the harness's chains."""
    if chain.startswith("sparse") and chain != "sparse":
        chains.CHAINS[chain] = functools.partial(chains.sparse, seed=int(chain.removeprefix("sparse")))
    elif chain.startswith("ring") and chain != "ring":
        chains.CHAINS[chain] = functools.partial(chains.ring, n=int(chain.removeprefix("ring")))


def mean_interval(values) -> tuple[float, float, float]:
    """(mean, 2.5 %, 97.5 %) of the mean over resampled seeds: the real-time study's bootstrap, of a ratio to 1."""
    out = bootstrap_ratio(values, np.ones(len(values)))
    return out["ratio"], out["low"], out["high"]


def main(seeds: str, names: str, lams: str = "0.5,0.9", alpha: str | None = None, bias: str = "bias") -> None:
    lambdas = tuple(float(s) for s in lams.split(","))
    if alpha is not None:
        chains.ALPHA = float(alpha)  # read by the harness's config() when each learner is made
    if bias not in ("bias", "nobias"):
        sys.exit(f"BIAS must be bias or nobias; got {bias!r}")
    if bias == "nobias":
        config = chains.config
        chains.config = lambda lam, steps: dataclasses.replace(config(lam, steps), bias=False)
    for name in names.split(","):
        register_chain(name.split(":")[0])
    rows = []
    for seed in _seeds(seeds):
        for name in names.split(","):
            chain, episodic = name.split(":")
            errors = chains.run(chain, episodic == "1", lambdas, seed=seed)
            row = {"chain": name, "seed": seed, "td0 curve": [round(x, 3) for x in errors[0.0].mean(axis=0)]}
            for lam in lambdas:
                row[f"end {lam}"] = [round(x, 3) for x in errors[lam][-1] / errors[0.0][-1]]
                row[f"curve {lam}"] = [round(x, 3) for x in errors[lam].mean(axis=0) / errors[0.0].mean(axis=0)]
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("chain, lambda: curve ratio at tau 45.4 | 86.3, mean over seeds [bootstrap 95 %]; seeds better at both; "
          "largest end ratio")  # fmt: skip
    for name in names.split(","):
        mine = [r for r in rows if r["chain"] == name]
        for lam in lambdas:
            curves = np.array([r[f"curve {lam}"][LONG] for r in mine])
            cells = [mean_interval(curves[:, j]) for j in range(curves.shape[1])]
            better = int(np.sum(np.all(curves < 1.0, axis=1)))
            end = max(max(r[f"end {lam}"]) for r in mine)
            said = " | ".join(f"{m:.2f} [{lo:.2f}, {hi:.2f}]" for m, lo, hi in cells)
            print(f"{name} {lam:g}: {said}; better on {better}/{len(mine)}; end up to {end:.2f}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4, 5, 6):
        sys.exit(__doc__)
    main(*sys.argv[1:])
