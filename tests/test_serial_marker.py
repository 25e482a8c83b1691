"""Under pytest-xdist, a test marked `serial` runs while no other test of the run does."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time

import pytest
from waiting import bound

TESTS = pathlib.Path(__file__).resolve().parent
#: Set for the inner run only: its tests record when they ran instead of skipping.
INNER = "GAMMA_NET_TEST_SERIAL_OUT"
inner_only = pytest.mark.skipif(INNER not in os.environ, reason="run by test_a_serial_test_runs_alone")


def _record(name: str, seconds: float) -> None:
    start = time.time()
    time.sleep(seconds)  # a window in which another worker would run, if it may
    out = pathlib.Path(os.environ[INNER])
    (out / f"{name}.json").write_text(json.dumps({"start": start, "end": time.time()}))


@inner_only
@pytest.mark.parametrize("i", range(8))
def test_inner_plain(i):
    _record(f"plain{i}", 0.3)


@inner_only
@pytest.mark.serial
def test_inner_serial():  # collected last: handed out while the other worker is busy with plain ones
    _record("serial", 1.0)


@pytest.mark.slow
def test_a_serial_test_runs_alone(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env[INNER] = str(tmp_path)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "load"]
    command += ["--basetemp", str(tmp_path / "inner"), "-k", "test_inner_", __file__]
    done = subprocess.run(command, cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=bound(120))
    assert done.returncode == 0, done.stdout + done.stderr
    runs = {path.stem: json.loads(path.read_text()) for path in tmp_path.glob("*.json")}
    assert len(runs) == 9, sorted(runs)
    serial = runs.pop("serial")
    overlapping = [name for name, run in runs.items() if run["start"] < serial["end"] and serial["start"] < run["end"]]
    assert not overlapping, (serial, runs)
