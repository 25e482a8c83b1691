"""The reflex's rule pair (prediction, with the reactive floor) against the floor alone, in simulated time.

    python tools/reflex_scratch_sweep.py [SEEDS [SECONDS [DESIGNS [WARMUP]]]]     e.g.  8 180 paper,reflex 0

The real-time study's obstacles, questions and rules (gamma_net_studies/ros/reflex_realtime.py:
config/reflex_questions.yaml and the shipped rules, adapted per obstacle), stepped as `gamma-net
reflex study` steps them (its loop, ``reflex_study.run_condition``, at the Horde's rate, 30 Hz), with
both rules of the pair observed, as the reflex node and the real-time study run them. Designs:

- ``reflex``: as shipped (the reflex's own questions; the rule on (1 - gamma) V of contact);
- ``paper``: config/horde.yaml's questions (the paper's arm) and the rule the shipped file had
  before: (1 - gamma) V of |effort| at tau 10 above 0.06, release 0.03;
- ``reflex@X``: as shipped with the predictive rule's threshold X (release X / 2).

WARMUP circuits of a simulated recording with the obstacle first (0: from scratch). Per obstacle
and design one line: the ratio of the pair's contact time to the floor's over the whole run and
in its windows (0-60 s and 60 s to the end, the study's --learn-s), the change in circuits, and
the fraction of the time the predictive rule was on; every run on the same operator seeds.
"""

from __future__ import annotations

import copy
import pathlib
import sys
import tempfile

import numpy as np
import yaml

from gamma_net_core.config import load_config
from gamma_net_core.horde.learner import HordeLearner
from gamma_net_core.horde.questions import load_questions
from gamma_net_core.paths import config_file
from gamma_net_core.reflex.rules import load_rules
from gamma_net_core.signals.arm import ArmConfig
from gamma_net_core.signals.obstacle import Obstacle
from gamma_net_studies.reflex_study import run_condition, study_settings, warm_up
from gamma_net_studies.ros.reflex_realtime import EXTRA_QUESTIONS, OBSTACLES, _write_questions, _write_rules

LEARN_S = 60.0  # the study's --learn-s


def files(design: str, obstacle: str, folder: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path, pathlib.Path]:
    """(questions, pair rules, floor rules) of a design at an obstacle."""
    questions = _write_questions(folder / "questions.yaml")
    pair = _write_rules(folder / "pair.yaml", obstacle, "predictive", questions)
    floor = _write_rules(folder / "floor.yaml", obstacle, "reactive", questions)
    doc = yaml.safe_load(pair.read_text())
    ahead = doc["rules"][0]
    if design == "paper":
        paper = yaml.safe_load(config_file("horde").read_text())
        paper["questions"] += [copy.deepcopy(q) for q in EXTRA_QUESTIONS]
        questions.write_text(yaml.safe_dump(paper, sort_keys=False))
        ahead.update(question=OBSTACLES[obstacle]["question"], above=0.06, release=0.03)
    elif design.startswith("reflex@"):
        threshold = float(design.split("@")[1])
        ahead.update(above=threshold, release=threshold / 2)
    elif design != "reflex":
        raise SystemExit(f"unknown design {design!r}: reflex, paper or reflex@THRESHOLD")
    pair.write_text(yaml.safe_dump(doc, sort_keys=False))
    return questions, pair, floor


def run(questions, rules, obstacle: str, seed: int, seconds: float, *, learn: bool, warmup: int) -> dict:
    place = OBSTACLES[obstacle]
    joint = place["joint"]
    spec = load_questions(questions)
    rule_set = load_rules(rules, questions=spec, joint_names=("shoulder", "elbow"))
    arm_config = load_config(ArmConfig, config_file("arm"), "/**", "arm")
    settings = study_settings(arm_config, overshoot_joint=joint, overshoot_direction=place["direction"])
    obstacle_here = Obstacle(place["low"], place["high"])
    learner = None
    if learn:
        learner = (
            warm_up(spec, settings, {joint: obstacle_here}, circuits=warmup)
            if warmup
            else HordeLearner.from_spec(spec, rng=np.random.default_rng(spec.seed))
        )
    result, trace = run_condition(
        settings, obstacle_here, rule_set, learner, spec, seed=seed, seconds=seconds, joint=joint, mark_s=LEARN_S
    )  # fmt: skip
    early = result["contact_s_at_mark"]
    return {
        "contact": result["contact_s"],
        "early": early,
        "late": result["contact_s"] - early,
        "circuits": result["circuits"],
        "on": float(np.mean(trace["on"])) if learn else 0.0,
    }


def main(seeds: int, seconds: float, designs: list[str], warmup: int) -> None:
    for obstacle in OBSTACLES:
        with tempfile.TemporaryDirectory() as tmp:
            folder = pathlib.Path(tmp)
            questions, _, floor_rules = files("reflex", obstacle, folder)
            floor = [run(questions, floor_rules, obstacle, s, seconds, learn=False, warmup=0) for s in range(seeds)]
            for design in designs:
                sub = folder / design
                sub.mkdir()
                questions, pair_rules, _ = files(design, obstacle, sub)
                pair = [
                    run(questions, pair_rules, obstacle, s, seconds, learn=True, warmup=warmup) for s in range(seeds)
                ]
                ratio = {
                    k: sum(r[k] for r in pair) / max(sum(r[k] for r in floor), 1e-12)
                    for k in ("contact", "early", "late")
                }
                circuits = np.mean([r["circuits"] for r in pair]) / np.mean([r["circuits"] for r in floor]) - 1.0
                print(
                    f"{obstacle:12s} {design:12s} pair/floor contact {ratio['contact']:.2f} "
                    f"(0-{LEARN_S:g} s {ratio['early']:.2f}, {LEARN_S:g}-{seconds:g} s {ratio['late']:.2f}); "
                    f"floor {sum(r['contact'] for r in floor) / seeds:.3f} s a run; circuits {circuits:+.1%}; "
                    f"predictive rule on {np.mean([r['on'] for r in pair]):.3f}",
                    flush=True,
                )


if __name__ == "__main__":
    args = sys.argv[1:]
    main(
        int(args[0]) if args else 8,
        float(args[1]) if len(args) > 1 else 180.0,
        args[2].split(",") if len(args) > 2 else ["paper", "reflex"],
        int(args[3]) if len(args) > 3 else 0,
    )
