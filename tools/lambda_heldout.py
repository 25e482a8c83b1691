"""TD(lambda)'s two bars of tests/test_lambda_between.py on seeds and chains the test does not use.

    python tools/lambda_heldout.py SEEDS CHAINS [LAMBDAS [ALPHA [BIAS [VIEW]]]]
    e.g.  python tools/lambda_heldout.py 0-9 sparse:1,ring:1,sparse7:1,sparse11:1 0.1,0.5,0.9

SEEDS: a list (0,3) or a range (0-9). CHAINS: NAME:EPISODIC, NAME one of the test's chains, sparseK
(the sparse chain with successors of seed K) or ringN (the ring of N states, whose event lies about
N steps away from the stationary distribution: 23.6 for 24, the test's ring's 7.6). LAMBDAS:
default 0.5,0.9 (the test's); a small lambda (0.1) is the control: returns (or traces) about one
step long, so what it gains is the step's doing, not the reach. ALPHA: the test's (0.01) by default.
BIAS: test (the test's, no bias feature), bias or nobias. VIEW: forward (TD(lambda) by lambda-returns
on the draws, a Γ-net's default) or backward (traces on the ladder beside a draw). One JSON line per
chain and seed: per lambda, the final error over TD(0)'s ("end") and the mean over the learning
curve over TD(0)'s ("curve"), at the test's four off-ladder tau, and TD(0)'s own mean error over the
curve ("td0 curve"); then per chain and lambda the curve ratio at tau 45.4 and 86.3 (the event
question's bar) as a mean over seeds with a bootstrap 95 % interval, the seeds better at both, the
largest end ratio of one seed, and the largest ratio of the end errors' means over seeds (the first
bar as the test checks it).

The backward-view designs measured in docs/results.md are a patch (tools/lambda_variants.patch):
apply it in a worktree and run this tool from there with VIEW backward, one numba cache per setting
(the settings are read when the kernels compile):

    git worktree add /tmp/variants HEAD && git -C /tmp/variants apply tools/lambda_variants.patch
    LAM_SHARE=0.5 LAM_NORM=1 NUMBA_CACHE_DIR=/tmp/nb-share-norm PYTHONPATH=/tmp/variants \
        python /tmp/variants/tools/lambda_heldout.py 0-9 ring:1,sparse:1 0.1,0.5,0.9 0.03 bias backward

(LAM_SHARE=1 LAM_HAND=1 is the handover: the traces at alpha phi_t, textbook TD(lambda)'s step, the
draw at alpha_t (1 - phi_t).) tools/lambda_tabular.py is the tabular oracle for the same bar.
"""

import functools
import json
import pathlib
import sys

import numpy as np

from gamma_net_studies.reflex_realtime_stats import bootstrap_ratio

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


def main(seeds: str, names: str, lams: str = "0.5,0.9", alpha: str | None = None, bias: str = "test",
         view: str = "forward") -> None:  # fmt: skip
    lambdas = tuple(float(s) for s in lams.split(","))
    if bias not in ("test", "bias", "nobias"):
        sys.exit(f"BIAS must be test, bias or nobias; got {bias!r}")
    if view not in ("forward", "backward"):
        sys.exit(f"VIEW must be forward or backward; got {view!r}")
    settings = {"view": view, "alpha": None if alpha is None else float(alpha),
                "bias": None if bias == "test" else bias == "bias"}  # fmt: skip
    for name in names.split(","):
        register_chain(name.split(":")[0])
    rows = []
    for seed in _seeds(seeds):
        for name in names.split(","):
            chain, episodic = name.split(":")
            errors = chains.run(chain, episodic == "1", lambdas, seed=seed, **settings)
            row = {"chain": name, "seed": seed, "td0 curve": [round(x, 3) for x in errors[0.0].mean(axis=0)],
                   "td0 end": errors[0.0][-1].tolist()}  # fmt: skip
            for lam in lambdas:
                row[f"end {lam}"] = [round(x, 3) for x in errors[lam][-1] / errors[0.0][-1]]
                row[f"curve {lam}"] = [round(x, 3) for x in errors[lam].mean(axis=0) / errors[0.0].mean(axis=0)]
                row[f"end error {lam}"] = errors[lam][-1].tolist()
            rows.append(row)
            print(json.dumps(row), flush=True)
    print("chain, lambda: curve ratio at tau 45.4 | 86.3, mean over seeds [bootstrap 95 %]; seeds better at both; "
          "largest end ratio of a seed; largest end ratio of the seeds' means")  # fmt: skip
    for name in names.split(","):
        mine = [r for r in rows if r["chain"] == name]
        for lam in lambdas:
            curves = np.array([r[f"curve {lam}"][LONG] for r in mine])
            cells = [mean_interval(curves[:, j]) for j in range(curves.shape[1])]
            better = int(np.sum(np.all(curves < 1.0, axis=1)))
            end = max(max(r[f"end {lam}"]) for r in mine)
            td0_end = np.mean([r["td0 end"] for r in mine], axis=0)
            means = np.mean([r[f"end error {lam}"] for r in mine], axis=0) / td0_end
            said = " | ".join(f"{m:.2f} [{lo:.2f}, {hi:.2f}]" for m, lo, hi in cells)
            print(f"{name} {lam:g}: {said}; better on {better}/{len(mine)}; end up to {end:.2f}; "
                  f"of means {np.max(means):.2f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4, 5, 6, 7):
        sys.exit(__doc__)
    main(*sys.argv[1:])
