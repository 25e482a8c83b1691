"""A reflex given one joint twice (``joint_names:=[shoulder,shoulder]``) refuses to start in one line naming it."""

from __future__ import annotations

import subprocess

import pytest
from waiting import bound

from gamma_net_ros.processes import node_command

pytestmark = pytest.mark.ros


def test_a_joint_named_twice_is_refused_in_one_line():
    command = node_command("gamma_net_ros.reflex.node", params={"joint_names": ["shoulder", "shoulder"]})
    done = subprocess.run(command, capture_output=True, text=True, timeout=bound(120.0))
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "Traceback" not in output, output
    (line,) = [line for line in output.splitlines() if "refusing to start" in line]
    assert "joint_names" in line and "'shoulder' twice" in line, output
