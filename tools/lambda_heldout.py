"""TD(lambda)'s two bars of tests/test_lambda_between.py on seeds and chains the test does not use.

    python tools/lambda_heldout.py SEEDS CHAINS      e.g.  3 sparse:1,sparse7:1,sparse11:1,ring:1,sparse:0,ring:0

CHAINS: NAME:EPISODIC, NAME one of the test's chains or sparseK (the sparse chain with successors of
seed K). One JSON line per chain and seed: per lambda, the final error over TD(0)'s ("end") and the
mean over the learning curve over TD(0)'s ("curve"), at the test's four off-ladder tau.
"""

import functools
import json
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
import test_lambda_between as chains  # the test's harness: same streams, tiles, alpha


def main(seeds: str, names: str) -> None:
    for name in names.split(","):
        chain = name.split(":")[0]
        if chain.startswith("sparse") and chain != "sparse":
            chains.CHAINS[chain] = functools.partial(chains.sparse, seed=int(chain.removeprefix("sparse")))
    for seed in (int(s) for s in seeds.split(",")):
        for name in names.split(","):
            chain, episodic = name.split(":")
            errors = chains.run(chain, episodic == "1", (0.5, 0.9), seed=seed)
            row = {"chain": chain, "episodic": episodic == "1", "seed": seed}
            for lam in (0.5, 0.9):
                row[f"end {lam}"] = [round(x, 3) for x in errors[lam][-1] / errors[0.0][-1]]
                row[f"curve {lam}"] = [round(x, 3) for x in errors[lam].mean(axis=0) / errors[0.0].mean(axis=0)]
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
