"""`gamma-net reflex realtime-study` before any launch: its plan, its refusals, its checkpoints, its priorities."""

from __future__ import annotations

import json
import os
import pathlib
import re
import shlex
import subprocess
import sys

import pytest
from waiting import bound, wait_until

from gamma_net_core.horde.learner import HordeLearner
from gamma_net_core.horde.questions import load_questions
from gamma_net_core.reflex.rules import load_rules
from gamma_net_studies.reflex_realtime_stats import SIMULATED_CONTACT_PER_HIT
from gamma_net_studies.ros.reflex_realtime import (
    JOINTS,
    _launched,
    _simulated_per_hit,
    _warm_checkpoint,
    _write_questions,
    _write_rules,
)


def plan(out, *extra):
    command = ["gamma-net", "reflex", "realtime-study", "--plan", "--out", str(out), "--json", str(out / "p.json")]
    return subprocess.run(command + list(extra), capture_output=True, text=True, timeout=bound(60))


@pytest.mark.slow
def test_the_plan_lists_every_run_with_the_time_left_and_makes_none(tmp_path):
    out = tmp_path / "study"
    done = plan(out, "--starts", "scratch,pretrained", "--obstacles", "shoulder,elbow=5", "--seconds", "90")
    assert done.returncode == 0, done.stderr
    # (10 + 5) seeds x (none and reactive once for both starts + predictive per start), each 90 s + 10 s;
    # 2 checkpoints to warm up (60 s each) and 2 simulated references (30 s each).
    assert "60 of 60 runs to make, about 1 h 43 min (each run's length + 10 s start and stop" in done.stdout
    assert "2 checkpoints to warm up" in done.stdout and "2 simulated references" in done.stdout
    rows = json.loads((out / "p.json").read_text())["tables"][0]["rows"]
    assert rows == [
        [start, obstacle, condition, runs, 0, runs]
        for obstacle, runs in (("shoulder", 10), ("elbow", 5))
        for start, condition in (
            ("scratch, pretrained", "none"),
            ("scratch, pretrained", "reactive"),
            ("scratch", "predictive"),
            ("pretrained", "predictive"),
        )
    ]
    assert not (out / "runs").exists()
    # Runs done count as done, and their own start and stop (wall time beyond their length) sets the estimate.
    (out / "runs").mkdir()
    (out / "runs" / "shoulder-none-seed0.json").write_text(json.dumps({"wall_s": 130.0}))
    again = plan(out, "--obstacles", "shoulder")
    assert (
        "29 of 30 runs to make, about 1 h 03 min (each run's length + 40 s start and stop, the mean of 1 done; "
        "1 simulated reference," in again.stdout
    )
    # A shared run done by either start's name counts for both starts; a predictive one for its own.
    for name in ("pretrained-shoulder-reactive-seed1.json", "pretrained-shoulder-predictive-seed0.json"):
        (out / "runs" / name).write_text(json.dumps({"wall_s": 130.0}))
    both = plan(out, "--obstacles", "shoulder", "--starts", "scratch,pretrained")
    # 10 seeds x 4 runs, 3 done; 37 x 130 s, a checkpoint to warm up and a reference.
    said = "37 of 40 runs to make, about 1 h 22 min (each run's length + 40 s start and stop, the mean of 3 done"
    assert said in both.stdout
    done_of = {(r[0], r[2]): r[4] for r in json.loads((out / "p.json").read_text())["tables"][0]["rows"]}
    assert done_of == {
        ("scratch, pretrained", "none"): 1,
        ("scratch, pretrained", "reactive"): 1,
        ("scratch", "predictive"): 0,
        ("pretrained", "predictive"): 1,
    }


@pytest.mark.slow
def test_from_scratch_predictive_runs_take_their_own_length_and_a_run_of_another_is_refused(tmp_path):
    out = tmp_path / "study"
    args = ["--obstacles", "shoulder", "--runs", "2", "--starts", "scratch", "--simulated-seeds", "0"]
    longer = plan(out, *args, "--scratch-seconds", "150", "--learn-s", "60")
    assert longer.returncode == 0, longer.stderr
    assert "runs of 90 s (150 s from scratch with the prediction, its first 60 s to learn)" in longer.stdout
    # 2 seeds: none and reactive 90 s, predictive 150 s, each + 10 s: 720 s
    assert "6 of 6 runs to make, about 0 h 12 min" in longer.stdout
    # A from-scratch predictive run of 90 s is not pooled with runs of 150 s: refused before any launch.
    (out / "runs").mkdir(parents=True)
    (out / "runs" / "shoulder-predictive-seed0.json").write_text(json.dumps({"seconds": 90.001, "wall_s": 93.0}))
    command = ["gamma-net", "reflex", "realtime-study", "--out", str(out), *args, "--conditions", "predictive"]
    refused = subprocess.run(
        [*command, "--scratch-seconds", "150", "--learn-s", "60"], capture_output=True, text=True, timeout=bound(60)
    )
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert "shoulder-predictive-seed0.json is a run of 90.001 s where this study's are 150 s" in refused.stderr
    assert "[realtime-study]" not in refused.stdout


@pytest.mark.slow
def test_a_summary_of_both_starts_uses_the_same_reactive_and_none_runs(tmp_path):
    """Runs recorded (under either name) are summarized by the command itself, with no launch."""
    out = tmp_path / "study"
    (out / "runs").mkdir(parents=True)

    def record(name, condition, seed, contact, on, checkpoint=None):
        run = {"obstacle": "shoulder", "condition": condition, "seed": seed, "pretrained": checkpoint}
        run.update(contact_s=contact, contacts=2 if contact else 0, peak_current_a=0.5, progress_circuits=1.0)
        run.update(rule_on_fraction={"shoulder_stall": on}, wall_s=100.0)
        (out / "runs" / name).write_text(json.dumps(run))

    record("shoulder-reactive-seed0.json", "reactive", 0, 0.2, 0.2)
    record("pretrained-shoulder-reactive-seed1.json", "reactive", 1, 0.4, 0.2, "/x/shoulder.npz")  # an old name
    record("shoulder-none-seed0.json", "none", 0, 0.5, 0.3)
    record("shoulder-none-seed1.json", "none", 1, 0.7, 0.5)
    for seed in (0, 1):
        record(f"shoulder-predictive-seed{seed}.json", "predictive", seed, 0.15, 0.1)
        record(f"pretrained-shoulder-predictive-seed{seed}.json", "predictive", seed, 0.03, 0.1, "/x/shoulder.npz")
    command = ["gamma-net", "reflex", "realtime-study", "--starts", "scratch,pretrained", "--obstacles", "shoulder"]
    command += ["--runs", "2", "--seconds", "90", "--simulated-seeds", "0", "--resamples", "500", "--out", str(out)]
    done = subprocess.run(command + ["--json", str(out / "r.json")], capture_output=True, text=True, timeout=bound(120))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[realtime-study]" not in done.stdout  # every run read back, none launched
    report = json.loads((out / "r.json").read_text())
    assert report["data"]["runs"] == 8  # 2 seeds x (none, reactive, predictive twice)
    scratch, pretrained = report["data"]["scratch"]["shoulder"], report["data"]["pretrained"]["shoulder"]
    assert scratch["reactive"] == pretrained["reactive"] and scratch["reactive"]["contact_s"] == [0.2, 0.4]
    assert scratch["ratio"]["ratio"] == pytest.approx(0.5) and pretrained["ratio"]["ratio"] == pytest.approx(0.1)
    assert scratch["none"]["contact_s"] == pretrained["none"]["contact_s"] == [0.5, 0.7]
    # None's rule on is its Horde's, which learned from scratch: not the pretrained start's.
    assert scratch["none"]["rule_on_fraction"] == [0.3, 0.5] and pretrained["none"]["rule_on_fraction"] == []


@pytest.mark.slow
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--starts", "warm"], "--starts must name some of scratch, pretrained; got 'warm'"),
        (["--pretrained", "nowhere.npz"], "--pretrained nowhere.npz: no such checkpoint file"),
        (["--starts", "scratch", "--pretrained", "x.npz"], "--pretrained x.npz needs --starts with pretrained"),
        (["--priorities", "80,70"], "--priorities must be three FIFO priorities 1..99 for dynamixel_driver, reflex"),
        (["--priorities", "60,70,80"], "--priorities must be distinct and falling, driver above reflex above horde"),
        (["--obstacles", "elbow=0"], "--obstacles elbow=0: runs must be a whole number, at least 1"),
        (["--poll-s", "0"], "--poll-s"),
        (["--scratch-seconds", "150", "--learn-s", "150"], "--learn-s 150 leaves nothing of a 150 s run to count"),
        (["--learn-s", "-1"], "--learn-s"),
    ],
)
def test_bad_arguments_are_refused_in_one_line(tmp_path, extra, message):
    refused = plan(tmp_path / "x", *extra)
    assert refused.returncode == 2 and message in refused.stderr and len(refused.stderr.strip().splitlines()) == 1


def test_a_warmed_up_checkpoint_is_of_the_studys_questions_and_made_once(tmp_path):
    questions = _write_questions(tmp_path / "questions.yaml")
    path = _warm_checkpoint(tmp_path, "elbow", questions, 1)
    assert path == tmp_path / "pretrained" / "elbow.npz"
    learner = HordeLearner.load(path, spec=load_questions(questions))  # refused if not of these questions
    assert HordeLearner.from_spec(load_questions(questions)).n_questions == learner.n_questions
    stamp = path.stat().st_mtime_ns
    assert _warm_checkpoint(tmp_path, "elbow", questions, 1).stat().st_mtime_ns == stamp  # kept, not made again


def test_the_launchs_processes_are_found_by_their_scripts_name(tmp_path):
    script = tmp_path / "dynamixel_driver"
    script.write_text("import time\ntime.sleep(60)\n")
    # As ros2 launch starts a node: a child running `python SCRIPT --ros-args ...`, under a parent.
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import subprocess, sys; subprocess.run([sys.executable, {str(script)!r}, '--ros-args'])",
        ]
    )
    try:
        assert wait_until(lambda: "dynamixel_driver" in _launched(parent.pid), timeout=10)
        found = _launched(parent.pid)["dynamixel_driver"]
        assert os.path.basename(open(f"/proc/{found}/cmdline").read().split("\0")[1]) == "dynamixel_driver"
        assert "horde" not in _launched(parent.pid)
    finally:
        # Once each: a process is listed under its interpreter's name and its script's, and once
        # killed, its parent may reap it before a second kill.
        for child in set(_launched(parent.pid).values()):
            os.kill(child, 9)
        parent.kill()
        parent.wait()


def test_the_guides_full_study_command_plans_what_the_issue_asks(tmp_path):
    guide = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "reflex.md").read_text()
    [line] = [line for line in guide.splitlines() if "gamma-net reflex realtime-study --starts" in line]
    words = shlex.split(line)
    assert words[0] == "ROS_DOMAIN_ID=77" and "--priorities" in words  # a domain of its own, real-time priorities
    words = words[1:]
    out = words.index("--out")
    words[out + 1] = str(tmp_path / "study")  # --json and --markdown are left out: a plan writes neither
    words = [w for i, w in enumerate(words) if i < 1 or not ({words[i - 1], w} & {"--json", "--markdown"})]
    planned = subprocess.run(
        words + ["--plan", "--json", str(tmp_path / "p.json")], capture_output=True, text=True, timeout=bound(60)
    )
    assert planned.returncode == 0, planned.stderr
    runs = {}
    for start, obstacle, condition, count, _, _ in json.loads((tmp_path / "p.json").read_text())["tables"][0]["rows"]:
        runs[(start, obstacle, condition)] = count
    # Both starts: their own predictive runs, and the reactive and none runs shared, one per obstacle and seed.
    for start, condition in (
        ("scratch", "predictive"),
        ("pretrained", "predictive"),
        ("scratch, pretrained", "reactive"),
        ("scratch, pretrained", "none"),
    ):
        assert runs.pop((start, "shoulder", condition)) >= 10
        assert runs.pop((start, "elbow", condition)) >= 5 and runs.pop((start, "shoulder_low", condition)) >= 5
    assert runs == {}
    assert float(words[words.index("--seconds") + 1]) >= 90
    # The guide's time is the plan's.
    [said] = re.findall(r"about \d+ h \d+ min", guide)
    assert f"80 of 80 runs to make, {said} (" in planned.stdout


@pytest.mark.slow
def test_the_per_hit_reference_on_the_shoulder_is_the_simulated_studys_published_number(tmp_path):
    # The study's own reactive rule and obstacle, stepped as `gamma-net reflex study` steps them:
    # on seeds 0-9 the 0.7084 s over 33 contacts of docs/results.md (its JSON rounds to 4 digits).
    questions = _write_questions(tmp_path / "questions.yaml")
    rules = {("shoulder", "reactive"): _write_rules(tmp_path / "r.yaml", "shoulder", "reactive", questions)}
    got = _simulated_per_hit(tmp_path, ["shoulder"], rules, questions, seeds=10)
    assert got["shoulder"] == pytest.approx(SIMULATED_CONTACT_PER_HIT["shoulder"], rel=1e-3)


def test_the_predictive_condition_has_the_reactive_rule_as_its_floor(tmp_path):
    questions = _write_questions(tmp_path / "questions.yaml")
    spec = load_questions(questions)

    def rules(name, obstacle, condition):
        return load_rules(
            _write_rules(tmp_path / name, obstacle, condition, questions), questions=spec, joint_names=JOINTS
        ).rules

    for obstacle, joint in (("shoulder", "shoulder"), ("elbow", "elbow")):
        ahead, floor = rules(f"{obstacle}.yaml", obstacle, "predictive")
        assert (ahead.name, ahead.source, ahead.tau) == (f"{joint}_stall_ahead", "prediction", 10)
        assert (floor.name, floor.source, floor.tau) == (f"{joint}_stall", "signal", None)
        # the prediction of contact in front, the present effort as the floor: the shipped pair
        assert (ahead.question, floor.question) == (f"{joint}_contact", f"{joint}_effort")
        # The floor is the reactive condition's rule, word for word.
        (reactive,) = rules(f"{obstacle}-r.yaml", obstacle, "reactive")
        assert floor == reactive and ahead.response == floor.response
    # Pushing the shoulder down: contact is its effort below minus the floor's threshold.
    ahead, floor = rules("low.yaml", "shoulder_low", "predictive")
    assert ahead.question == "shoulder_contact_below" and ahead.response.direction == "negative"
    (contact,) = [q.cumulant for q in spec.questions if q.name == ahead.question]
    assert (contact.threshold, contact.direction) == (-floor.threshold, "below")
    (none,) = rules("n.yaml", "shoulder", "none")
    assert none.response.event and none.fail_safe == "pass"
