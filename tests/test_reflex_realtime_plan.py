"""`gamma-net reflex realtime-study` before any launch: its plan, its refusals, its checkpoints, its priorities."""

from __future__ import annotations

import json
import os
import pathlib
import shlex
import subprocess
import sys

import pytest
from waiting import bound, wait_until

from gamma_net_core.experiments.reflex_realtime_stats import SIMULATED_CONTACT_PER_HIT
from gamma_net_core.horde.learner import HordeLearner
from gamma_net_core.horde.questions import load_questions
from gamma_net_ros.studies.reflex_realtime import (
    _launched,
    _simulated_per_hit,
    _warm_checkpoint,
    _write_questions,
    _write_rules,
)


def plan(out, *extra):
    command = ["gamma-net", "reflex", "realtime-study", "--plan", "--out", str(out), "--json", str(out / "p.json")]
    return subprocess.run(command + list(extra), capture_output=True, text=True, timeout=bound(60))


def test_the_plan_lists_every_run_with_the_time_left_and_makes_none(tmp_path):
    out = tmp_path / "study"
    done = plan(out, "--starts", "scratch,pretrained", "--obstacles", "shoulder,elbow=5", "--seconds", "90")
    assert done.returncode == 0, done.stderr
    # 2 starts x (10 + 5 runs) x 3 conditions, each 90 s + 10 s; 2 checkpoints to warm up (60 s each)
    # and 2 simulated references (30 s each).
    assert "90 of 90 runs to make, about 2 h 33 min (100 s a run" in done.stdout
    assert "2 checkpoints to warm up" in done.stdout and "2 simulated references" in done.stdout
    rows = json.loads((out / "p.json").read_text())["tables"][0]["rows"]
    assert rows[0] == ["scratch", "shoulder", "none", 10, 0, 10] and rows[-1] == [
        "pretrained",
        "elbow",
        "predictive",
        5,
        0,
        5,
    ]
    assert not (out / "runs").exists()
    # Runs done count as done, and their own wall time sets the estimate.
    (out / "runs").mkdir()
    (out / "runs" / "shoulder-none-seed0.json").write_text(json.dumps({"wall_s": 130.0}))
    again = plan(out, "--obstacles", "shoulder")
    assert (
        "29 of 30 runs to make, about 1 h 03 min (130 s a run, the mean of 1 done; 1 simulated reference,"
        in again.stdout
    )


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
        for child in _launched(parent.pid).values():
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
    for start in ("scratch", "pretrained"):
        for condition in ("none", "reactive", "predictive"):
            assert runs[(start, "shoulder", condition)] >= 10
            assert runs[(start, "elbow", condition)] >= 5 and runs[(start, "shoulder_low", condition)] >= 5
    assert float(words[words.index("--seconds") + 1]) >= 90


def test_the_per_hit_reference_on_the_shoulder_is_the_simulated_studys_published_number(tmp_path):
    # The study's own reactive rule and obstacle, stepped as `gamma-net reflex study` steps them:
    # on seeds 0-9 the 0.7084 s over 33 contacts of docs/results.md (its JSON rounds to 4 digits).
    questions = _write_questions(tmp_path / "questions.yaml")
    rules = {("shoulder", "reactive"): _write_rules(tmp_path / "r.yaml", "shoulder", "reactive", questions)}
    got = _simulated_per_hit(tmp_path, ["shoulder"], rules, questions, seeds=10)
    assert got["shoulder"] == pytest.approx(SIMULATED_CONTACT_PER_HIT["shoulder"], rel=1e-3)
