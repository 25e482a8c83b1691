"""Tests side by side never share a ROS 2 domain: each pytest process, xdist workers included, claims its own."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
from waiting import bound, wait_until

TESTS = pathlib.Path(__file__).resolve().parent
#: Set for the inner run only: its workers report their domains instead of skipping.
INNER = "GAMMA_NET_TEST_ISOLATION_OUT"


@pytest.mark.skipif(INNER not in os.environ, reason="run by test_each_xdist_worker_claims_a_domain_of_its_own")
def test_report_this_workers_domain():
    """One worker's half of the check: report the domain, then hold it until every worker reported."""
    out = pathlib.Path(os.environ[INNER])
    worker = os.environ["PYTEST_XDIST_WORKER"]
    report = {"domain": os.environ["ROS_DOMAIN_ID"], "range": os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"]}
    (out / f"{worker}.json").write_text(json.dumps(report))
    # Every worker holds its domain at once, so two of them could not have claimed the same one in turn.
    assert wait_until(lambda: len(list(out.glob("gw*.json"))) == 2, timeout=60.0), sorted(out.iterdir())


@pytest.mark.slow
def test_each_xdist_worker_claims_a_domain_of_its_own(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "GAMMA_NET_TEST_DOMAIN"))}
    env[INNER] = str(tmp_path)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "each"]
    command += ["--basetemp", str(tmp_path / "inner"), f"{__file__}::test_report_this_workers_domain"]
    done = subprocess.run(command, cwd=TESTS.parent, env=env, capture_output=True, text=True, timeout=bound(120))
    assert done.returncode == 0, done.stdout + done.stderr
    reports = {path.stem: json.loads(path.read_text()) for path in tmp_path.glob("gw*.json")}
    assert sorted(reports) == ["gw0", "gw1"], done.stdout
    domains = {report["domain"] for report in reports.values()}
    assert len(domains) == 2, reports  # the two workers apart
    if "GAMMA_NET_TEST_DOMAIN" not in os.environ:  # a domain set by hand is not held: anyone may claim it
        assert os.environ["ROS_DOMAIN_ID"] not in domains, reports  # apart from this process, which holds its own
    assert all(1 <= int(domain) <= 100 for domain in domains), reports
    assert all(report["range"] == "LOCALHOST" for report in reports.values()), reports
