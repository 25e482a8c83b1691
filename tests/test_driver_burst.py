"""A 1 kHz burst of commands into the real Dynamixel driver process: counted, and the last one at the servos.

The driver (its own process, as ``ros2 run`` starts it) drives the emulated servos through the
real dynamixel_sdk while it gets velocity commands at 1 kHz for ``BURST_S`` seconds, ten times
its cycle. Its status on /diagnostics then counts them: ``received`` (handed to the node),
``processed`` (applied or refused as malformed) and ``lost`` (sent but dropped from its keep-last
queue, from the publisher's sequence numbers), never more than were sent; and the servos' goal
is the last command sent.

The issue's run is 10 s: ``GAMMA_NET_BURST_S=10 python -m pytest tests/test_driver_burst.py -s``.
"""

from __future__ import annotations

import math
import os
import time

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState
from test_dynamixel_driver import servo_state
from waiting import bound, publish_burst, spin_until

from gamma_net_ros.paths import config_file
from gamma_net_ros.processes import NodeProcess, node_command

pytestmark = pytest.mark.ros
RATE_HZ, BURST_S = 1000.0, float(os.environ.get("GAMMA_NET_BURST_S", "2"))


def _command(step: int) -> JointState:
    # Small and back and forth: the servos stay far from their position limits (no soft stop).
    return JointState(name=["shoulder", "elbow"], velocity=[0.4 * math.sin(step / 7), 0.3 * math.cos(step / 5)])


def test_a_1khz_burst_is_counted_and_the_last_command_reaches_the_servos(tmp_path, start_emulator, executor):
    port, client = start_emulator([0.0, 1.5])
    log = tmp_path / "driver.log"
    rig = Node("driver_burst_rig")
    executor.add_node(rig)
    commands = rig.create_publisher(JointState, "joint_commands", 10)
    states, counts, reports = [], {}, []
    rig.create_subscription(JointState, "joint_states", states.append, qos_profile_sensor_data)

    def on_diagnostics(msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.name.startswith("dynamixel_driver"):
                values = {kv.key: kv.value for kv in status.values}
                if "received" in values:
                    counts.update({k: int(values[k]) for k in ("received", "processed", "lost")})
                    counts["clean"] = values.get("unexpected_publishers") == "none"
                    reports.append(time.monotonic())

    rig.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 100)
    # No command timeout: the servos keep the last goal however long the checks below take.
    params = {"port": port, "command_timeout_s": 0.0, "diagnostics_period_s": 0.2}
    command = node_command("gamma_net_ros.dynamixel_driver.node", params_file=config_file("dynamixel"),
                           params=params, node="dynamixel_driver")  # fmt: skip
    with NodeProcess(command, log_path=log) as node:
        # Up, and the graph clean (a process of an earlier test may be listed on joint_commands a moment longer).
        ready = lambda: bool(states) and commands.get_subscription_count() > 0 and counts.get("clean")  # noqa: E731
        assert spin_until(executor, ready, 120.0, step=0.1), log.read_text()
        # The rig seeing the driver's subscription does not mean the driver has matched the rig's publisher
        # yet (discovery runs each way on its own): commands until one is taken, so the burst is all counted.
        primed = []

        def taken() -> bool:
            commands.publish(_command(0))
            primed.append(1)
            return counts.get("received", 0) > 0

        assert spin_until(executor, taken, 60.0, step=0.05), (len(primed), counts, log.read_text())
        sent = publish_burst(executor, lambda n: commands.publish(_command(n)), RATE_HZ, BURST_S)
        last = np.array(_command(sent - 1).velocity)
        ended = time.monotonic()
        # A report made after the burst ended counts every command taken, and each taken one was processed.
        caught_up = lambda: reports and reports[-1] > ended + 0.5 and counts["received"] == counts["processed"]  # noqa: E731
        settled = spin_until(executor, caught_up, 60.0)
        # within one of the register's velocity units (0.229 rpm, 0.024 rad/s)
        there = lambda: np.allclose(servo_state(client, "goal_velocity"), last, atol=0.025)  # noqa: E731
        at_servos = spin_until(executor, there, 30.0)
        goal = servo_state(client, "goal_velocity")
        assert node.stop(timeout=bound(30.0)) == 0, log.read_text()
    print(f"sent {sent} after {len(primed)}, diagnostics {counts}, servos' goal {goal.tolist()}, last {last.tolist()}")
    assert settled, counts
    assert at_servos, (goal, last)
    # Every command of the burst was received or counted lost; of those sent before it, only the ones
    # before the first taken are not counted.
    assert sent <= counts["received"] + counts["lost"] <= sent + len(primed), (sent, len(primed), counts)
    assert counts["processed"] > 0 and counts["clean"]
