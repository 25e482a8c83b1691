"""A 1 kHz burst of commands into the real reflex process: nothing lost silently, the last output the filter's.

The reflex (its own process, as ``ros2 run`` starts it) gets commands at 1 kHz for ``BURST_S``
seconds while a rule is on. Its status on /diagnostics then counts them: ``received`` (handed to
the node), ``processed`` (answered on joint_commands) and ``lost`` (sent but dropped from its
keep-last queue, from the publisher's sequence numbers), never more than were sent; and its last
output is the core's filter (``ReflexState.filter``) of the last command sent.

The issue's run is 10 s: ``GAMMA_NET_BURST_S=10 python -m pytest tests/test_reflex_burst.py -s``.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from gamma_net_msgs.msg import PredictionArray, ReflexEvent
from rclpy.node import Node
from sensor_msgs.msg import JointState
from test_reflex_node import GAMMAS, STALL, TAUS, rules_file
from waiting import bound, publish_burst, spin_until

from gamma_net_core.horde.questions import load_questions
from gamma_net_core.reflex.evaluation import ReflexState
from gamma_net_core.reflex.rules import load_rules
from gamma_net_ros.paths import config_file
from gamma_net_ros.processes import NodeProcess, node_command
from gamma_net_ros.reflex.forms import make_form

pytestmark = pytest.mark.ros
RATE_HZ, BURST_S = 1000.0, float(os.environ.get("GAMMA_NET_BURST_S", "2"))
EFFORT = 2.0  # (1 - gamma) V of shoulder_effort at tau 10: past the rule's threshold, so it is on


def _command(step: int) -> JointState:
    return JointState(name=["shoulder", "elbow"], velocity=[0.5 * math.sin(step / 7), 0.3 * math.cos(step / 5)])


def _expected(rules, msg: JointState) -> list[float]:
    """The core's filter of ``msg`` under the rule, on: what the reflex must send for it."""
    names = ["shoulder", "elbow"]
    state = ReflexState(load_rules(rules, questions=load_questions(config_file("reflex_questions")), joint_names=names))
    state.observe(0, EFFORT, 0.0)
    assert [c.on for c in state.decide(0.0)] == [True]
    return state.filter(make_form("joint_state", "velocity", names).read(msg)).velocity[0].tolist()


def test_a_1khz_burst_is_counted_and_the_last_output_is_the_filter_of_the_last_command(tmp_path, executor):
    rules = rules_file(tmp_path, STALL | {"hold_s": 0.0})
    name = "burst_reflex"
    log = tmp_path / "reflex.log"
    rig = Node("burst_rig")
    executor.add_node(rig)
    commands = rig.create_publisher(JointState, "joint_commands_in", 10)
    predictions = rig.create_publisher(PredictionArray, "horde/predictions", 10)
    outputs, events, counts, reports = [], [], {}, []
    rig.create_subscription(JointState, "joint_commands", outputs.append, 10)
    rig.create_subscription(ReflexEvent, "reflex/events", events.append, 10)

    def on_diagnostics(msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.name.startswith(f"{name}:"):
                values = {kv.key: kv.value for kv in status.values}
                counts.update({k: int(values[k]) for k in ("received", "processed", "lost")})
                reports.append(len(outputs))  # how many outputs had arrived when it came

    rig.create_subscription(DiagnosticArray, "/diagnostics", on_diagnostics, 100)
    values = np.zeros((2, TAUS.size))
    values[1] = EFFORT / (1.0 - GAMMAS)
    alarm = PredictionArray(questions=["shoulder_speed", "shoulder_effort"], gammas=GAMMAS.tolist())
    alarm.values = values.ravel().tolist()
    command = node_command("gamma_net_ros.reflex", name=name, params={"rules_file": str(rules)})
    with NodeProcess(command, log_path=log) as node:

        def on() -> bool:
            predictions.publish(alarm)
            return any(e.active for e in events) and commands.get_subscription_count() > 0

        assert spin_until(executor, on, 120.0, step=0.1), log.read_text()
        sent = publish_burst(executor, lambda n: commands.publish(_command(n)), RATE_HZ, BURST_S)
        last = _expected(rules, _command(sent - 1))
        # The last output arrived, and a report made after it counts every command answered.
        caught_up = lambda: counts.get("processed", 0) > 0 and counts["received"] == counts["processed"]  # noqa: E731
        done = lambda: outputs and list(outputs[-1].velocity) == last and reports[-1] == len(outputs) and caught_up()  # noqa: E731
        settled = spin_until(executor, done, 60.0)
        assert node.stop(timeout=bound(30.0)) == 0, log.read_text()
    print(f"sent {sent}, diagnostics {counts}, last output {list(outputs[-1].velocity)}, expected {last}")
    assert settled, (counts, list(outputs[-1].velocity), last)
    # Every command sent was received or counted lost; only those before the first taken are not counted (the
    # reflex waits idle for the burst: at most a queue's depth).
    assert sent - 10 <= counts["received"] + counts["lost"] <= sent, (sent, counts)
    assert last[0] == 0.0 or _command(sent - 1).velocity[0] < 0  # the rule is on: no shoulder motion up
