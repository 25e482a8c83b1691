"""A test held where pytest-timeout cannot end it fails with every stack, and the run goes on (tests/conftest.py)."""

from __future__ import annotations

import ctypes
import os
import pathlib
import subprocess
import sys

import pytest
from waiting import bound

TESTS = pathlib.Path(__file__).resolve().parent
#: Set for the inner run only.
INNER = "GAMMA_NET_TEST_HANG_GUARD_INNER"
inner_only = pytest.mark.skipif(INNER not in os.environ, reason="run by the outer test below")


def hold_the_gil_for_good():
    """Lock a fresh mutex twice through ``ctypes.PyDLL`` (the GIL kept): no signal handler of Python runs again."""
    mutex = ctypes.create_string_buffer(64)  # all zeros: glibc's PTHREAD_MUTEX_INITIALIZER
    libc = ctypes.PyDLL(None)
    libc.pthread_mutex_lock(mutex)
    libc.pthread_mutex_lock(mutex)


@inner_only
def test_inner_held():
    pathlib.Path(os.environ[INNER]).open("a").write("held\n")
    hold_the_gil_for_good()


@inner_only
def test_inner_after():
    pass


def inner_run(tmp_path, *options: str) -> str:
    """pytest -n 1 on this file's inner tests (``-k``-selected by OPTIONS); its output (exit code 1 asserted)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env[INNER] = str(tmp_path / "runs")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "1", "--dist", "loadfile"]
    command += ["--timeout", "2", "--basetemp", str(tmp_path / "inner"), *options, __file__]
    done = subprocess.run(command, cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=bound(120))
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    return out


@pytest.mark.slow
def test_a_test_held_with_the_gil_fails_with_its_stacks_and_the_run_goes_on(tmp_path):
    """pytest-timeout's SIGALRM cannot end it; the guard's C watchdog does, the worker is replaced, the next test runs,
    and the held test is not run again (its file, back in pytest-xdist's queue, has it marked done)."""
    out = inner_run(tmp_path, "-k", "test_inner_held or test_inner_after")
    assert "1 failed, 1 passed in " in out, out
    assert "crashed while running 'tests/test_hang_guard.py::test_inner_held'" in out, out
    assert "test_inner_held still running after 4 s (the hang guard" in out, out
    assert "in hold_the_gil_for_good" in out, out
    assert (tmp_path / "runs").read_text() == "held\n", out


@inner_only
def test_inner_a_worker_was_ended_in_the_next_test(tmp_path_factory):
    """As the guard leaves it: a file of the run whose worker was ended while in the next test."""
    folder = tmp_path_factory.getbasetemp().parent
    held = "tests/test_hang_guard.py::test_inner_b_held_before"
    stacks = "Timeout (0:00:04)!\nThread 0x1 (most recent call first):\n"
    (folder / "hang-guard-gw7.txt").write_text(f"{held} still running after 4 s (...)\n{stacks}")


@inner_only
def test_inner_b_held_before():
    pathlib.Path(os.environ[INNER]).open("a").write("ran again\n")
    raise AssertionError("ran again")


@pytest.mark.slow
def test_a_test_another_worker_took_after_it_held_is_skipped_not_run_again(tmp_path):
    """pytest-xdist may hand a crashed worker's file to another worker before the controller hears of the crash: that
    worker skips the test the guard ended, by the guard's file of the run."""
    out = inner_run(tmp_path, "-rs", "-k", "test_inner_a_ or test_inner_b_ or test_inner_held")
    assert "1 failed, 1 passed, 1 skipped in " in out, out
    assert "held past the hang guard's limit on an earlier worker" in out, out
    assert not (tmp_path / "runs").read_text().count("ran again"), out
