"""A params file whose section misses the node (say, it runs in a namespace) is warned about, not silently ignored."""

from __future__ import annotations

import pytest
from waiting import bound, wait_until

from gamma_net_ros.params import section_applies
from gamma_net_ros.processes import NodeProcess, node_command


@pytest.mark.parametrize(
    "section, fqn, applies",
    [
        ("predictor", "/predictor", True),
        ("predictor", "/robot/predictor", False),  # rcl reads it as /predictor
        ("/robot/predictor", "/predictor", False),
        ("robot/predictor", "/robot/predictor", True),
        ("/**/predictor", "/robot/predictor", True),
        ("/**/predictor", "/predictor", True),
        ("/**", "/a/b/c", True),
        ("/robot/*", "/robot/predictor", True),
        ("/*", "/robot/predictor", False),
    ],
)
def test_a_section_applies_as_rcl_matches_it(section, fqn, applies):
    assert section_applies(section, fqn) is applies


@pytest.mark.ros
def test_a_node_in_a_namespace_warns_that_its_sections_checkpoint_path_is_ignored(tmp_path):
    params = tmp_path / "params.yaml"
    params.write_text(f"predictor:\n  ros__parameters:\n    checkpoint_path: {tmp_path / 'p.npz'}\n")
    log = tmp_path / "predictor.log"
    command = node_command("gamma_net_ros.predictor", params_file=params) + ["-r", "__ns:=/robot"]
    with NodeProcess(command, log_path=log) as node:
        assert wait_until(lambda: "ready" in log.read_text(), 120.0), log.read_text()
        assert node.stop(timeout=bound(30.0)) == 0, log.read_text()
    warned = [line for line in log.read_text().splitlines() if "does not apply to this node" in line]
    assert len(warned) == 1 and "'predictor'" in warned[0] and "/robot/predictor" in warned[0], log.read_text()
    assert "checkpoint off" in log.read_text()  # what the warning is about: the section's value is not used
