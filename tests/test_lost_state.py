"""An exit that loses learned state says so: a node whose last checkpoint cannot be written exits non-zero.

The real predictor process starts with a checkpoint folder it can write (checked at start); the
folder is then replaced by a regular file of the same name, so the save at shutdown fails with
an OSError whoever runs the test (root ignores file modes, not a path through a file).
"""

from __future__ import annotations

import shutil

import pytest
from waiting import bound, wait_until

from gamma_net_ros.node_main import LOST_STATE
from gamma_net_ros.processes import NodeProcess, node_command

pytestmark = pytest.mark.ros
START_S = 120.0


def test_a_predictor_whose_last_checkpoint_fails_exits_non_zero_in_one_line(tmp_path):
    folder = tmp_path / "checkpoints"
    folder.mkdir()
    log = tmp_path / "predictor.log"
    command = node_command(
        "gamma_net_ros.predictor",
        params={"checkpoint_path": str(folder / "predictor.npz"), "checkpoint_interval": 3600.0},
    )
    with NodeProcess(command, log_path=log) as node:
        assert wait_until(lambda: "ready" in log.read_text(), START_S), log.read_text()
        shutil.rmtree(folder)
        folder.write_text("not a folder")
        code = node.stop(timeout=bound(30.0))
    output = log.read_text()
    assert code == LOST_STATE, output
    assert "Traceback" not in output, output
    lost = [line for line in output.splitlines() if "is lost" in line]
    assert len(lost) == 1 and "predictor.npz" in lost[0] and "not written" in lost[0], output
