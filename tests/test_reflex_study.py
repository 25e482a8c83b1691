"""`gamma-net reflex study` and `gamma-net bench reflex` on tiny budgets, as users run them; the study's loop."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
from waiting import bound

from gamma_net_core.horde.learner import HordeLearner
from gamma_net_core.horde.questions import load_questions
from gamma_net_core.paths import config_file
from gamma_net_core.reflex.rules import load_rules
from gamma_net_core.signals.arm import ArmConfig
from gamma_net_core.signals.obstacle import Obstacle
from gamma_net_studies.reflex_study import _settings, run_condition
from gamma_net_studies.ros.bench.reflex import _command_latency, _reaction

#: The study on its tiny budget: a Horde warmed, three conditions simulated (scaled by `bound`).
STUDY_S = 250.0


def test_a_reactive_rule_shortens_the_contacts_of_the_same_seed_and_costs_no_progress():
    spec = load_questions(config_file("horde"))
    rule_set = load_rules(
        {
            "rules": [
                {
                    "name": "r",
                    "source": "signal",
                    "question": "shoulder_effort",
                    "above": 0.06,
                    "release": 0.03,
                    "hold_s": 0.5,
                    "response": {"scale": 0.0, "joints": ["shoulder"], "direction": "positive"},
                }
            ]
        },
        questions=spec,
        joint_names=("shoulder", "elbow"),
    )
    settings = _settings(ArmConfig())
    obstacle = Obstacle(-0.26, 0.5)  # just inside the route's reach: met on most passes
    none, _ = run_condition(settings, obstacle, None, None, spec, seed=1, seconds=30.0)
    reactive, trace = run_condition(settings, obstacle, rule_set, None, spec, seed=1, seconds=30.0)
    assert none["contacts"] >= 2 and none["contact_s"] > 0.5, none
    assert reactive["contact_s"] < 0.5 * none["contact_s"], (reactive, none)
    assert reactive["peak_current_a"] < none["peak_current_a"]
    assert reactive["circuits"] == pytest.approx(none["circuits"], rel=0.1)
    assert trace["on"].any() and np.isnan(trace["prediction"]).all()  # no Horde in this condition


@pytest.mark.slow
@pytest.mark.timeout(bound(STUDY_S + 30))
def test_reflex_study_runs_as_a_user_runs_it_on_a_tiny_budget(tmp_path):
    out = tmp_path / "study"
    command = ["gamma-net", "reflex", "study", "--seeds", "1", "--seconds", "4", "--warmup-circuits", "1"]
    result = subprocess.run(
        [*command, "--out", str(out), "--json", str(tmp_path / "study.json")],
        capture_output=True,
        text=True,
        timeout=bound(STUDY_S),
    )
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads((tmp_path / "study.json").read_text())["data"]
    assert {"none", "reactive", "predictive"} <= set(data)
    assert all(len(data[c]["circuits"]) == 1 for c in ("none", "reactive", "predictive"))
    assert (out / "reflex_study.png").stat().st_size > 0 and (out / "warm_horde.npz").is_file()
    refused = subprocess.run(
        [*command[:3], "--seeds", "0", "--out", str(out)], capture_output=True, text=True, timeout=bound(120)
    )
    assert refused.returncode == 2 and refused.stderr.strip().count("\n") == 0, refused.stderr
    assert "--seeds" in refused.stderr and "Traceback" not in refused.stderr


def test_the_bench_pairs_each_switch_with_the_first_command_showing_it():
    received = [(1.0, 0.9, 0.4), (1.2, 1.1, 0.4), (1.3, 0.9, 0.0), (1.4, 1.35, 0.0), (2.0, 1.9, 0.4)]
    np.testing.assert_allclose(_reaction([(1.25, True), (1.95, False)], received), [0.05, 0.05])
    # A re-sent command arrives twice with one stamp: its latency is counted once, from its first arrival.
    np.testing.assert_allclose(_command_latency([0.9, 1.1], received), [0.1, 0.1])


@pytest.mark.ros
@pytest.mark.slow  # not `serial`: the paths' times are reported, not asserted (only that each was measured)
def test_bench_reflex_reports_both_paths_against_the_echo(tmp_path):
    out = tmp_path / "bench.json"
    command = ["gamma-net", "bench", "reflex", "--rate", "50", "--seconds", "1", "--json", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=bound(250))
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(out.read_text())["data"]
    for key in ("reflex_path_s", "echo_path_s", "reflex_reaction_s", "echo_reaction_s"):
        assert len(data[key]) > 0, key


def test_the_loop_observes_every_rule_of_a_pair_as_the_reflex_node_does():
    """A prediction rule that never fires beside the reactive floor: the pair acts as the floor alone.

    The loop used to observe only the set's first rule: the floor went stale and the fail-safe held the
    arm still (no contact, no progress), so a pair could not be simulated.
    """
    spec = load_questions(config_file("reflex_questions"))
    floor = {
        "name": "floor", "source": "signal", "question": "shoulder_effort", "above": 0.06, "release": 0.03,
        "hold_s": 0.5, "response": {"scale": 0.0, "joints": ["shoulder"], "direction": "positive"},
    }  # fmt: skip
    never = {**floor, "name": "never", "source": "prediction", "question": "shoulder_contact", "tau": 10.0,
             "above": 0.99, "release": 0.98}  # fmt: skip
    pair = load_rules({"rules": [never, floor]}, questions=spec, joint_names=("shoulder", "elbow"))
    alone = load_rules({"rules": [floor]}, questions=spec, joint_names=("shoulder", "elbow"))
    settings = _settings(ArmConfig())
    obstacle = Obstacle(-0.26, 0.5)
    learner = HordeLearner.from_spec(spec, rng=np.random.default_rng(spec.seed))
    run = dict(seed=1, seconds=30.0, mark_s=10.0)
    with_pair, trace = run_condition(settings, obstacle, pair, learner, spec, **run)
    with_floor, _ = run_condition(settings, obstacle, alone, None, spec, **run)
    none, _ = run_condition(settings, obstacle, None, None, spec, **run)
    assert with_floor["contact_s"] < 0.5 * none["contact_s"], (with_floor, none)
    assert with_pair["contact_s"] == with_floor["contact_s"] and with_pair["contacts"] == with_floor["contacts"]
    assert not trace["on"].any()  # the first rule, the prediction, never fired
    assert np.isfinite(trace["prediction"]).all() and trace["prediction"].max() < 0.98
    assert 0.0 < with_pair["contact_s_at_mark"] <= with_pair["contact_s"]
    with pytest.raises(ValueError, match="needs a learner"):
        run_condition(settings, obstacle, pair, None, spec, seed=1, seconds=1.0)
