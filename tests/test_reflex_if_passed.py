"""The reflex's "if the command passes" question: its files, its rho, its prediction through a held
intervention against the on-policy question's, and `gamma-net reflex study`'s condition on it."""

from __future__ import annotations

import json
import subprocess

import numpy as np
import pytest
import yaml
from waiting import bound

from gamma_net_core.horde.questions import load_questions
from gamma_net_core.paths import config_file
from gamma_net_core.reflex.rules import RuleSet, load_rules
from gamma_net_core.signals.arm import ArmConfig
from gamma_net_core.signals.obstacle import Obstacle
from gamma_net_studies.reflex_if_passed import OffPolicyLearning, holds
from gamma_net_studies.reflex_study import _settings, run_condition, warm_up

QUESTION = "shoulder_contact_if_passed"


def test_the_files_are_the_shipped_ones_but_the_question_and_the_rule_reading_it():
    shipped, passed = (
        yaml.safe_load(config_file(n).read_text()) for n in ("reflex_questions", "reflex_questions_if_passed")
    )
    assert {k: v for k, v in passed.items() if k != "questions"} == {
        k: v for k, v in shipped.items() if k != "questions"
    }
    assert passed["questions"][:-1] == shipped["questions"]
    added = passed["questions"][-1]
    assert added["name"] == QUESTION and added["cumulant"] == shipped["questions"][1]["cumulant"]
    rules, rules_passed = (
        yaml.safe_load(config_file(n).read_text()) for n in ("reflex_rules", "reflex_rules_if_passed")
    )
    changed = {"question": QUESTION, "above": 0.04, "release": 0.02}  # not taught away: held longer at 0.02
    assert rules_passed["rules"][0] == {**rules["rules"][0], **changed}
    assert rules_passed["rules"][1:] == rules["rules"][1:]
    assert {k: v for k, v in rules_passed.items() if k != "rules"} == {k: v for k, v in rules.items() if k != "rules"}
    spec = load_questions(config_file("reflex_questions_if_passed"))
    policy = spec.questions[spec.names.index(QUESTION)].policy
    assert (policy.target, policy.behaviour, policy.rho_max) == ("equals", "matching", 1.0)
    assert (policy.action.topic, policy.reference.topic) == ("/joint_commands", "/joint_commands_in")
    load_rules(config_file("reflex_rules_if_passed"), questions=spec, joint_names=("shoulder", "elbow"))


def test_rho_is_zero_where_the_reflex_changed_the_command_and_the_prediction_holds_there_where_on_policy_falls():
    """Pretrained on a recording with the obstacle, the rule on the off-policy question holds the shoulder
    off it; while it changes the operator's command, rho is 0 and the off-policy prediction stays where it
    was, while the on-policy question of the same Horde, learning from the same steps, falls."""
    spec = load_questions(config_file("reflex_questions_if_passed"))
    arm = ArmConfig()
    rule_set = load_rules(config_file("reflex_rules_if_passed"), questions=spec, joint_names=arm.joint_names)
    settings = _settings(arm)
    obstacle = Obstacle(-0.2, 0.5)
    learner = warm_up(spec, settings, {0: obstacle}, circuits=5)
    rule = RuleSet(rule_set.rules[:1], rule_set.stale_after_s)
    _, trace = run_condition(settings, obstacle, rule, learner, spec, seed=1, seconds=120.0, watch="shoulder_contact")
    changed = np.abs(trace["given"] - trace["command"]) > 1e-9
    assert changed.sum() >= 20, "the rule never held the operator off the obstacle"
    np.testing.assert_array_equal(trace["rho"][changed], 0.0)
    np.testing.assert_array_equal(trace["rho"][~changed], 1.0)  # the reflex passes a command as it is: b = 1
    held = holds(trace, spec.rate_hz)
    assert held["interventions"] >= 2, held
    assert held["end_over_start"] >= 0.9, held  # learns nothing while the rule holds
    assert held["watched_end_over_start"] <= 0.5, held  # taught that contact stops coming


def test_a_policy_reading_a_topic_the_study_does_not_simulate_is_refused_in_one_line():
    doc = yaml.safe_load(config_file("reflex_questions_if_passed").read_text())
    doc["questions"][-1]["policy"]["action"]["topic"] = "/cmd_vel_raw"
    spec = load_questions(doc)
    learner = warm_up(spec, _settings(ArmConfig()), {}, circuits=0)
    with pytest.raises(ValueError, match=r"question 'shoulder_contact_if_passed': its policy reads /cmd_vel_raw") as e:
        OffPolicyLearning(learner, spec, ("shoulder", "elbow"))
    assert "\n" not in str(e.value)


@pytest.mark.slow
@pytest.mark.timeout(bound(400))
def test_the_study_runs_the_if_passed_condition_from_both_starts_with_windows(tmp_path):
    out = tmp_path / "study"
    command = ["gamma-net", "reflex", "study", "--seeds", "2", "--seconds", "6", "--warmup-circuits", "1"]
    command += ["--conditions", "none,reactive,predictive,predictive_if_passed", "--starts", "scratch,pretrained"]
    command += ["--window-s", "3", "--resamples", "200", "--out", str(out), "--json", str(tmp_path / "study.json")]
    result = subprocess.run(command, capture_output=True, text=True, timeout=bound(300))
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads((tmp_path / "study.json").read_text())["data"]
    labels = ["none", "reactive", "predictive_scratch", "predictive", "predictive_if_passed_scratch",
              "predictive_if_passed"]  # fmt: skip
    assert set(labels) <= set(data)
    windows = data["windows"]
    assert windows["window_s"] == 3.0
    for label in labels:
        assert len(windows["contact_s"][label]) == 2 and all(len(run) == 2 for run in windows["contact_s"][label])
        assert len(windows["by_condition"][label]["mean"]) == 2
    assert len(windows["by_condition"]["predictive_if_passed"]["ratio"]) == 2
    assert set(data["holds"]) == set(labels[2:])
    assert (out / "warm_horde_predictive_if_passed.npz").is_file() and (out / "warm_horde.npz").is_file()
    assert (out / "reflex_windows.png").stat().st_size > 0
    refused = subprocess.run(
        [*command[:3], "--conditions", "none,predictive_if_passed", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=bound(120),
    )
    assert refused.returncode == 2 and refused.stderr.strip().count("\n") == 0, refused.stderr
    assert "--conditions" in refused.stderr and "Traceback" not in refused.stderr
