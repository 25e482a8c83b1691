"""Neural Γ-net settings against the default linear Γ-net on the zoo (recording mode), as in
docs/choosing-settings.md ("The neural Γ-net").

    python tools/neural_zoo.py SEEDS VARIANTS_JSON [PROBLEMS] [FEATURES]
    e.g.  python tools/neural_zoo.py 2 '{"n4": {"n_step": 4}, "n32": {"n_step": 32}}' rare_ring_10,ar1_square

VARIANTS_JSON: name -> NeuralConfig changes. PROBLEMS: default every zoo problem (or ""). FEATURES: what
the networks see, ``problem`` (one-hot states or the scaled observation; the default) or ``tiles`` (the linear
Γ-net's state tiles, the zoo's ``neural_tiles``). The linear Γ-net sees
30,000 transitions a stream and the networks 24,000, as in the zoo's full tier. Prints per problem and
variant the largest ratio over tau of the network's error to the linear's (mean over seeds) and, in
brackets, the network's largest error; then per variant how many problems are within 2x at every tau,
the geometric mean of the ratios and the CPU seconds a run.
"""

import json
import sys

import numpy as np

from gamma_net_core.zoo import learners as zoo_learners
from gamma_net_core.zoo import problems as zoo_problems
from gamma_net_core.zoo import runner


def main(seeds: str, variants: str, problems: str | None = None, features: str = "problem") -> None:
    named = json.loads(variants)
    names = problems.split(",") if problems else list(zoo_problems.PROBLEMS)
    learners = [zoo_learners.LinearGammaNetLearner()]
    learners += [
        zoo_learners.NeuralLearner(name, changes=changes, features=features) for name, changes in named.items()
    ]
    results = runner.run_zoo(
        names, learners, steps=30_000, neural_steps=24_000, seeds=range(int(seeds)), modes=("recording",), workers=2
    )
    errors: dict = {}
    cpu: dict = {}
    for r in results:
        errors.setdefault((r.problem, r.learner), []).append(r.error)
        cpu.setdefault(r.learner, []).append(r.cpu_seconds)
    ratios = {name: [] for name in named}
    for problem in names:
        linear = np.mean(errors[(problem, "linear")], axis=0)
        cells = []
        for name in named:
            error = np.mean(errors[(problem, name)], axis=0)
            ratio = float((error / np.maximum(linear, 1e-12)).max())
            ratios[name].append(ratio)
            cells.append(f"{name} {ratio:5.2f} ({error.max():.2f})")
        print(f"{problem:20s} | " + " | ".join(cells), flush=True)
    for name, r in ratios.items():
        within = sum(x <= 2.0 for x in r)
        mean = float(np.exp(np.mean(np.log(r))))
        print(f"{name}: within 2x on {within} of {len(r)}, geometric mean {mean:.2f}, {np.mean(cpu[name]):.1f} s a run")


if __name__ == "__main__":
    main(*sys.argv[1:])
