"""A test that passes on its rerun is named in the run's summary with its first failure (tests/conftest.py)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
from waiting import bound

TESTS = pathlib.Path(__file__).resolve().parent
#: Set for the inner run only: a flag file whose absence makes its test fail once.
INNER = "GAMMA_NET_TEST_RERUN_FLAG"
inner_only = pytest.mark.skipif(INNER not in os.environ, reason="run by test_a_rerun_is_named_with_its_first_failure")


@inner_only
def test_inner_fails_once():
    flag = pathlib.Path(os.environ[INNER])
    if not flag.exists():
        flag.write_text("failed once")
        raise subprocess.TimeoutExpired(["ros2", "param", "get", "/operator", "x"], 7)


def inner_run(flag: pathlib.Path, tmp_path, *options: str) -> subprocess.CompletedProcess:
    """pytest on this file's inner test, with OPTIONS, its flag at FLAG."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env[INNER] = str(flag)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options]
    command += ["--basetemp", str(tmp_path / "inner"), "-k", "test_inner_", __file__]
    done = subprocess.run(command, cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=bound(120))
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.mark.slow
def test_a_rerun_is_named_with_its_first_failure(tmp_path):
    done = inner_run(tmp_path / "flag", tmp_path, "-n", "2", "--dist", "loadfile", "--reruns", "1",
                     "--only-rerun", "TimeoutExpired")  # fmt: skip
    summary = done.stdout.split("reruns: the first failure of each test run again", 1)
    assert len(summary) == 2, done.stdout
    assert "test_rerun_summary.py::test_inner_fails_once" in summary[1], done.stdout
    assert "timed out after 7 seconds" in summary[1], done.stdout
    assert "1 passed, 1 rerun" in done.stdout, done.stdout


@pytest.mark.slow
def test_a_run_without_reruns_has_no_rerun_section(tmp_path):
    flag = tmp_path / "flag"
    flag.write_text("already failed")  # the inner test passes at once
    done = inner_run(flag, tmp_path, "--reruns", "1")
    assert "reruns:" not in done.stdout and "1 passed" in done.stdout, done.stdout
