"""`gamma-net reflex realtime-study` end to end on a tiny budget: real launches, as a user runs it."""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import signal
import subprocess

import pytest
from waiting import bound, wait_until

pytestmark = [pytest.mark.ros, pytest.mark.slow]

#: A run's wall seconds: long enough for a circuit's part (the operator went round about a whole circuit in
#: 15 s at load 5) and for two starts of the 10 s windows, short enough for `make test`.
RUN_S = 12


def study(out, *extra):
    command = ["gamma-net", "reflex", "realtime-study", "--runs", "1", "--seconds", str(RUN_S)]
    command += ["--obstacles", "shoulder", "--resamples", "1000", "--window-s", "10", "--out", str(out)]
    command += ["--json", str(out / "r.json"), "--markdown", str(out / "tables.md"), "--simulated-seeds", "2"]
    return subprocess.run(command + list(extra), capture_output=True, text=True, timeout=bound(400))


def test_the_study_runs_each_condition_through_ros2_launch_and_resumes(tmp_path):
    out = tmp_path / "study"
    done = study(out)
    assert done.returncode == 0, done.stdout + done.stderr
    runs = {}
    for condition in ("none", "reactive", "predictive"):
        run = json.loads((out / "runs" / f"shoulder-{condition}-seed0.json").read_text())
        runs[condition] = run
        assert run["launch_exit"] == 0, run["log"]  # Ctrl-C ended the launch cleanly
        assert run["seconds"] >= RUN_S and run["joint_states"] > 10 * RUN_S  # the driver's states all along
        assert isinstance(run["contacts"], int) and run["contacts"] >= 0
        # The emulator counts a contact as it starts and its time while it pushes: both or neither.
        assert run["contact_s"] >= 0 and (run["contact_s"] > 0) == (run["contacts"] > 0)
        assert math.isfinite(run["peak_current_a"]) and (run["peak_current_a"] > 0) == (run["contacts"] > 0)
        assert run["progress_circuits"] > 0.2  # the operator went round the wire, measured from joint_states
        fractions = run["rule_on_fraction"]  # each of the run's rules, from reflex/events
        assert set(fractions) <= (
            {"shoulder_stall_ahead", "shoulder_stall"}
            if condition == "predictive"
            else {"shoulder_stall" if condition == "reactive" else "shoulder_stall_ahead"}
        )
        assert all(0.0 <= f <= 1.0 for f in fractions.values())
        assert max(fractions.values()) - 1e-9 <= run["any_rule_on_fraction"] <= min(1.0, sum(fractions.values())) + 1e-9
        assert run["arguments"]["rules_file"].endswith(f"shoulder-{condition}.yaml")
        # The counters read about every second, from 0 at the window's start to the run's totals at its end.
        series = run["contact_series"]
        assert series[0] == [0.0, 0.0, 0] and len(series) + run["polls_missed"] >= RUN_S
        assert series[-1][1:] == [pytest.approx(run["contact_s"], abs=1e-6), run["contacts"]]
        assert all(a[0] < b[0] and a[1] <= b[1] for a, b in itertools.pairwise(series))
        assert run["wall_s"] > run["seconds"] and len(run["load_average"]) == 6 and run["priorities"] == {}
    report = json.loads((out / "r.json").read_text())
    shoulder = report["data"]["scratch"]["shoulder"]
    ratio = shoulder["ratio"]
    if runs["reactive"]["contact_s"] > 0:
        # Contact seconds per minute: each run's window is its own measured length (at least RUN_S).
        rate = {c: runs[c]["contact_s"] / runs[c]["seconds"] for c in ("predictive", "reactive")}
        want = rate["predictive"] / rate["reactive"]
        assert ratio["ratio"] == pytest.approx(want, rel=1e-3) and ratio["undefined"] is None
    else:
        assert ratio["ratio"] is None and ratio["undefined"] == "the denominator's runs have no contact"
    assert (out / "reflex_realtime.png").stat().st_size > 0
    # The time to beat from the series (10 s windows over at least 15 s), and every check decided or n/a.
    beat = shoulder["time_to_beat"]
    if runs["reactive"]["contact_s"] > 0:
        assert beat["undefined"] is None and beat["end_s"] >= RUN_S and len(beat["rates"]["start"]) >= RUN_S - 10
    else:
        assert beat["undefined"] == "the reactive runs have no contact"
    assert set(shoulder["checks"].values()) <= {"PASS", "FAIL", "n/a"} and shoulder["checks"]["progress"] != "n/a"
    # The per-hit reference: the same reactive rule in simulated time (2 seeds here), kept for a resume.
    assert 0.0 < shoulder["simulated_contact_per_hit"] < 0.1
    assert json.loads((out / "simulated.json").read_text()) == {
        "shoulder seeds 2": shoulder["simulated_contact_per_hit"]
    }
    assert (out / "reflex_realtime_ahead.png").exists() == (beat["rates"] is not None)
    tables = (out / "tables.md").read_text()
    assert "| scratch | shoulder |" in tables and tables.count("**") == 2 * len(report["tables"])
    # Resumable: the runs done are read back, not run again.
    again = study(out)
    assert again.returncode == 0, again.stderr
    assert "[realtime-study]" not in again.stdout and json.loads((out / "r.json").read_text())["data"]["runs"] == 3


def test_bad_arguments_are_refused_in_one_line_before_any_launch(tmp_path):
    refused = study(tmp_path / "x", "--obstacles", "knee")
    assert refused.returncode == 2
    assert refused.stderr.strip().endswith("--obstacles must name some of shoulder, elbow, shoulder_low; got 'knee'"), (
        refused.stderr
    )
    assert not (tmp_path / "x" / "runs").exists()


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_or_sigterm_ends_the_study_and_its_launch_in_one_line(tmp_path, stop):
    out = tmp_path / "study"
    command = ["gamma-net", "reflex", "realtime-study", "--runs", "1", "--seconds", "600", "--obstacles", "shoulder"]
    command += ["--conditions", "reactive", "--out", str(out)]
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as study_process:
        log = out / "logs" / "shoulder-reactive-seed0.log"
        # Interrupted mid-run: once the Horde learns (its first predictions start the run's window).
        assert wait_until(lambda: log.exists() and "learner kernels warm" in log.read_text(), timeout=120), log
        study_process.send_signal(stop)  # Ctrl-C, or a supervisor's SIGTERM
        stdout, stderr = study_process.communicate(timeout=bound(60))
    assert study_process.returncode == 130, stdout + stderr
    assert stderr.strip().splitlines()[-1] == "gamma-net reflex realtime-study: interrupted", stderr
    assert "Traceback" not in stderr, stderr
    assert not (out / "runs" / "shoulder-reactive-seed0.json").exists()  # a cut run is not recorded as done
    # The launch ended with it: every process it started is gone.
    pids = [int(p) for p in re.findall(r"process started with pid \[(\d+)\]", log.read_text())]
    assert len(pids) >= 6, log.read_text()  # emulator, driver, teleop, operator, horde, reflex
    assert wait_until(lambda: not any(alive(pid) for pid in pids), timeout=30), log.read_text()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
