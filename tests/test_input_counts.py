"""A node that takes input says on /diagnostics what it received and what it processed.

The real predictor process gets a 1 kHz burst of joint_states for 2 s; its status on
/diagnostics then counts them: ``received`` (handed to the node) and ``processed`` (learned
from), equal once it has caught up, and never more than were sent.
"""

from __future__ import annotations

import math
import os

import pytest
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from waiting import bound, publish_burst, spin_until

from gamma_net_ros.conversions import seconds_to_stamp
from gamma_net_ros.paths import config_file
from gamma_net_ros.processes import NodeProcess, node_command

pytestmark = pytest.mark.ros
RATE_HZ, BURST_S = 1000.0, float(os.environ.get("GAMMA_NET_BURST_S", "2"))  # the run: 10


def _reading(step: int) -> JointState:
    phase = 2 * math.pi * step / 900
    msg = JointState(
        name=["shoulder", "elbow"],
        position=[0.5 * math.cos(phase), 1.7 + 0.4 * math.sin(phase)],
        velocity=[-0.5 * math.sin(phase), 0.4 * math.cos(phase)],
    )
    msg.header.stamp = seconds_to_stamp(step / RATE_HZ)
    return msg


def test_a_predictor_counts_a_1khz_burst_on_diagnostics(tmp_path, executor):
    log = tmp_path / "predictor.log"
    name = "counted_predictor"
    command = node_command(
        "gamma_net_ros.predictor",
        name=name,
        params={"reliable_input": True, "input_queue_depth": 5000},
        remaps={"joint_states": "counted_joint_states"},
    )
    rig = Node("burst_rig")
    executor.add_node(rig)
    reliable = QoSProfile(depth=5000, reliability=ReliabilityPolicy.RELIABLE)
    states = rig.create_publisher(JointState, "counted_joint_states", reliable)
    counts: dict[str, int] = {}

    def on_diagnostics(msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.name.startswith(f"{name}:"):
                values = {kv.key: kv.value for kv in status.values}
                counts.update(received=int(values["received"]), processed=int(values["processed"]))

    rig.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 100)
    with NodeProcess(command, log_path=log) as node:
        assert spin_until(executor, lambda: "ready" in log.read_text() and states.get_subscription_count(), 120.0), (
            log.read_text()
        )
        sent = publish_burst(executor, lambda n: states.publish(_reading(n)), RATE_HZ, BURST_S)
        caught_up = lambda: counts.get("received", 0) > 0 and counts["received"] == counts["processed"]  # noqa: E731
        settled = spin_until(executor, lambda: caught_up() and counts["received"] == sent, 60.0)
        assert node.stop(timeout=bound(30.0)) == 0, log.read_text()
    print(f"sent {sent}, diagnostics {counts}")  # shown with -s
    assert caught_up() and counts["received"] <= sent, (sent, counts, settled)


def test_a_horde_ticking_on_joint_states_counts_a_1khz_burst_on_diagnostics(tmp_path, executor):
    """Every message of ``tick_topic`` is a tick: under a burst its keep-last queue drops some, and the counts
    say how many came (``received.<topic>``, ``received`` ticks) and how many the learner took (``processed``)."""
    log = tmp_path / "horde.log"
    name = "counted_horde"
    command = node_command(
        "gamma_net_ros.horde",
        name=name,
        params={"questions_file": str(config_file("horde")), "tick_topic": "/joint_states"},
        remaps={"/joint_states": "/counted_joint_states"},
    )
    rig = Node("horde_burst_rig")
    executor.add_node(rig)
    states = rig.create_publisher(JointState, "/counted_joint_states", 10)
    counts: dict[str, int] = {}

    def on_diagnostics(msg: DiagnosticArray) -> None:
        for status in msg.status:
            values = {kv.key: kv.value for kv in status.values}
            if status.name.startswith(f"{name}:") and "received" in values:
                counts.update(received=int(values["received"]), processed=int(values["processed"]))
                counts.update(topic=int(values["received./joint_states"]), warming=int(values["skipped.warming_up"]))

    rig.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 100)
    with NodeProcess(command, log_path=log) as node:
        up = lambda: states.get_subscription_count() > 0 and "received" in counts  # noqa: E731
        assert spin_until(executor, up, 120.0), log.read_text()
        sent = publish_burst(executor, lambda n: states.publish(_reading(n)), RATE_HZ, BURST_S)
        ended = dict(counts)
        # Caught up: a report after the burst counts every tick taken, and the learner took each.
        # (A message that came while the node compiled its kernels is a tick received and skipped as warming up.)
        caught_up = lambda: (  # noqa: E731
            counts["topic"] > ended.get("topic", 0) and counts["received"] == counts["processed"] + counts["warming"]
        )
        settled = spin_until(executor, caught_up, 60.0)
        assert node.stop(timeout=bound(30.0)) == 0, log.read_text()
    print(f"sent {sent}, diagnostics {counts}")  # shown with -s
    assert settled, (sent, counts)
    assert 0 < counts["topic"] <= sent and counts["received"] == counts["topic"], (sent, counts)
