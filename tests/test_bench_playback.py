"""`gamma-net bench playback` runs end to end on a tiny budget: with its window, nothing is lost."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from waiting import bound

pytestmark = [pytest.mark.ros, pytest.mark.slow]


# Not `serial`: the window loses nothing at any load, and the timings are reported, not asserted.
def test_bench_playback_counts_every_message_sent_received_and_skipped(tmp_path):
    out = tmp_path / "bench.json"
    result = subprocess.run(
        [sys.executable, "-m", "gamma_net_core.cli", "bench", "playback", "--messages", "300", "--rates", "20"]
        + ["--fault-every", "50", "--no-reference", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=bound(180),
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    (run,) = json.loads(out.read_text())["data"]["runs"]
    assert run["sent"] == run["received"] == 300 and run["lost"] == 0
    assert run["skipped_by_rule"] == run["skipped"] == 6  # every 50th message is stamped 0.1 s back


def test_bench_playback_refuses_a_bad_rate_in_one_line():
    result = subprocess.run(
        [sys.executable, "-m", "gamma_net_core.cli", "bench", "playback", "--rates", "0"],
        capture_output=True,
        text=True,
        timeout=bound(60),
    )
    assert result.returncode != 0 and "--rates must be positive; got [0.0]" in result.stderr
    assert "Traceback" not in result.stderr
