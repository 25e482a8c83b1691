"""The test files are collected longest first (tests/durations.json), those with serial tests last, each file whole."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
from waiting import bound

REPO = pathlib.Path(__file__).resolve().parent.parent

#: Quick files in collection order, each with several tests; the first has a `serial` one.
FILES = ["tests/test_serial_marker.py", "tests/test_plots.py", "tests/test_servo.py", "tests/test_timescales.py"]


def collected(durations, tmp_path) -> list[str]:
    """The node ids an inner `pytest --collect-only` of FILES lists, given these files' seconds (None: no list)."""
    path = tmp_path / "durations.json"
    path.unlink(missing_ok=True)
    if durations is not None:
        path.write_text(json.dumps({"measured": "test", "seconds": durations}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["GAMMA_NET_TEST_DURATIONS"] = str(path)
    command = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *FILES]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=bound(120))
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if "::" in line]


def files_in_order(ids: list[str]) -> list[str]:
    order: list[str] = []
    for nodeid in ids:
        name = nodeid.split("::", 1)[0]
        if not order or order[-1] != name:
            assert name not in order, f"{name}'s tests are split: {ids}"
            order.append(name)
    return order


@pytest.mark.slow
def test_the_longest_file_comes_first_an_unmeasured_one_before_it_and_one_with_serial_tests_last(tmp_path):
    plain = collected(None, tmp_path)  # no list: collection order
    assert files_in_order(plain) == FILES
    ranked = collected({FILES[0]: 100.0, FILES[1]: 1.0, FILES[2]: 2.0}, tmp_path)  # FILES[3] unmeasured
    assert files_in_order(ranked) == [FILES[3], FILES[2], FILES[1], FILES[0]]
    # Each file's tests as pytest collected them.
    for name in FILES:
        assert [i for i in ranked if i.startswith(name)] == [i for i in plain if i.startswith(name)]


def test_a_junit_report_gives_each_file_the_sum_of_its_tests_seconds_less_their_waits_for_serial_ones(tmp_path):
    sys.path.insert(0, str(REPO / "tools"))
    try:
        from file_durations import file_seconds
    finally:
        sys.path.remove(str(REPO / "tools"))
    report = tmp_path / "junit.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_servo" name="a" time="1.2"/>'
        '<testcase classname="tests.test_plots" name="b" time="0.5"/>'
        '<testcase classname="tests.test_servo" name="c" time="9.0">'
        '<properties><property name="serial_lock_wait_s" value="7.0"/></properties></testcase>'
        "</testsuite></testsuites>"
    )
    seconds = file_seconds(report)
    assert seconds == {"tests/test_servo.py": 3.2, "tests/test_plots.py": 0.5}
    assert list(seconds) == ["tests/test_servo.py", "tests/test_plots.py"]
