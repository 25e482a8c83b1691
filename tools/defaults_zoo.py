"""Linear Γ-net settings against the fixed-gamma TD(0) baseline on the zoo (recording mode), as in
docs/choosing-settings.md.

    python tools/defaults_zoo.py STEPS SEEDS VARIANTS_JSON [PROBLEMS]
    e.g.  python tools/defaults_zoo.py 30000 3 '{"new": {}, "old": {"step_size": 0.1, "bias_unit": "scaled",
          "_sampling": [2, 2]}}' random_walk_19,ar1_x

VARIANTS_JSON: name -> GammaNetConfig changes; "_sampling": [n_gamma, n_tau] replaces Gamma_t's draws,
step_size_decay_steps -1 decays alpha over the stream, and "_autostep": {"meta_step_size": mu, "trace_tau": tau}
makes the variant a Horde of one question with Autostep step sizes, fed online (a questions file's defaults).
BASE (environment, JSON) changes the baseline's settings. PROBLEMS: default every zoo problem but CartPole.
Prints per problem the baseline's error at each tau, and per variant the largest error over tau (mean over
seeds), the largest ratio to the baseline and the errors, then a markdown table of the error at tau 1, 10, 30
and 90 (mean +- standard deviation over the seeds). JSON (environment, a path) also saves every seed's errors.
"""

import json
import os
import sys

import numpy as np

from gamma_net_core.horde.questions import AdaptationConfig
from gamma_net_core.timescales import TimescaleSampling
from gamma_net_core.zoo import learners as zoo_learners
from gamma_net_core.zoo import problems as zoo_problems
from gamma_net_core.zoo import runner


class AutostepHorde(zoo_learners.HordeLearner):
    """The zoo's Horde of one question with Autostep (Mahmood et al. 2012) in place of the constant alpha."""

    def __init__(self, name: str, changes: dict, autostep: dict) -> None:
        super().__init__(name, changes=changes, adaptation=AdaptationConfig(method="autostep", **autostep))


def variant(name: str, changes: dict, steps: int) -> zoo_learners.ZooLearner:
    changes = dict(changes)
    if "_autostep" in changes:
        return AutostepHorde(name, changes, changes.pop("_autostep"))
    drawn = changes.pop("_sampling", None)
    if changes.get("step_size_decay_steps") == -1:
        changes["step_size_decay_steps"] = steps
    sampling = TimescaleSampling(n_gamma=drawn[0], n_tau=drawn[1]) if drawn else None
    return zoo_learners.LinearGammaNetLearner(name, changes=changes, sampling=sampling)


def main(steps: str, seeds: str, variants: str, problems: str | None = None) -> None:
    n_steps = int(steps)
    named = json.loads(variants)
    names = problems.split(",") if problems else [p for p in zoo_problems.PROBLEMS if p != "cartpole"]
    learners = [variant(name, changes, n_steps) for name, changes in named.items()]
    learners.append(zoo_learners.FixedTimescaleLearner(changes=json.loads(os.environ.get("BASE", "{}"))))
    by_name = {learner.name: learner for learner in learners}
    modes = (
        ("recording", "online") if any(isinstance(learner, AutostepHorde) for learner in learners) else ("recording",)
    )
    results = runner.run_zoo(names, learners, steps=n_steps, seeds=range(int(seeds)), modes=modes)
    errors: dict = {}
    for r in results:
        if r.mode == "online" and not isinstance(by_name.get(r.learner), AutostepHorde):
            continue  # a learner with both feeds is measured as a recording
        if r.note:
            print("NOTE", r.problem, r.learner, r.note)
            continue
        errors.setdefault((r.problem, r.learner), []).append(r.error)
    print("taus", results[0].taus)
    for problem in names:
        td0 = np.mean(errors[(problem, "td0_fixed")], axis=0)
        print(f"{problem}: td0 {np.round(td0, 2).tolist()}")
        for name in named:
            if (problem, name) not in errors:
                continue
            mean = np.mean(errors[(problem, name)], axis=0)
            ratio = np.max(mean / np.maximum(td0, 1e-9))
            print(f"   {name}: max err {mean.max():.2f} max ratio {ratio:.2f} | err {np.round(mean, 2).tolist()}")
    for name in named:
        ratios = [np.mean(errors[(p, name)], axis=0) / np.maximum(np.mean(errors[(p, "td0_fixed")], axis=0), 1e-9)
                  for p in names if (p, name) in errors]  # fmt: skip
        within = sum(bool(np.all(r <= 1.5)) for r in ratios)
        below = sum(bool(np.all(np.mean(errors[(p, name)], axis=0) < 0.5)) for p in names if (p, name) in errors)
        print(f"{name}: every tau within 1.5x the baseline on {within} of {len(ratios)}, below 0.5 on {below}")
    taus = list(results[0].taus)
    shown = [taus.index(t) for t in (1.0, 10.0, 30.0, 90.0)]
    print("\n| problem | learner | tau 1 | tau 10 | tau 30 | tau 90 |\n|---|---|---|---|---|---|")
    for problem in names:
        for name in [*named, "td0_fixed"]:
            if (problem, name) in errors:
                runs = np.array(errors[(problem, name)])
                cells = " | ".join(f"{runs[:, i].mean():.2f} ± {runs[:, i].std():.2f}" for i in shown)
                print(f"| {problem} | {name} | {cells} |")
    if os.environ.get("JSON"):
        with open(os.environ["JSON"], "w") as f:
            json.dump({"taus": taus, "errors": {f"{p}|{n}": np.array(e).tolist() for (p, n), e in errors.items()}}, f)


if __name__ == "__main__":
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__)
    main(*sys.argv[1:])
