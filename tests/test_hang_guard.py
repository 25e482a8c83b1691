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


@pytest.mark.slow
def test_a_test_held_with_the_gil_fails_with_its_stacks_and_the_run_goes_on(tmp_path):
    """pytest-timeout's SIGALRM cannot end it; the guard's C watchdog does, the worker is replaced, the next test runs,
    and the held test is not run again."""
    runs = tmp_path / "runs"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env[INNER] = str(runs)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "1", "--dist", "loadfile"]
    command += ["--timeout", "2", "--basetemp", str(tmp_path / "inner"), "-k", "test_inner_", __file__]
    done = subprocess.run(command, cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=bound(120))
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "1 failed, 1 passed" in out, out
    assert "crashed while running 'tests/test_hang_guard.py::test_inner_held'" in out, out
    assert "test_inner_held still running after 4 s (the hang guard" in out, out
    assert "in hold_the_gil_for_good" in out, out
    assert runs.read_text() == "held\n", out
