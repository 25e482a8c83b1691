"""The reflex node: real messages in (predictions, signals, commands), scaled commands and events out.

The node runs in-process beside a rig node that publishes what the Horde, the driver and teleop
would, and listens to what the driver and a user would. Refusals run the node as its own process,
as ``ros2 run`` does; the launch file runs under the real ``ros2 launch``.
"""

from __future__ import annotations

import pathlib
import subprocess
import tempfile

import numpy as np
import pytest
import yaml
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from gamma_net_msgs.msg import PredictionArray, ReflexEvent
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState
from waiting import bound

from gamma_net_ros.hardware.emulator import EmulatorClient
from gamma_net_ros.processes import node_command

pytestmark = pytest.mark.ros

TAUS = np.array([1.0, 10.0, 100.0])
GAMMAS = 1.0 - 1.0 / TAUS


def rules_file(folder: pathlib.Path, *rules, stale_after_s=30.0, fail_safe="stop") -> pathlib.Path:
    path = folder / "rules.yaml"
    path.write_text(yaml.safe_dump({"stale_after_s": stale_after_s, "fail_safe": fail_safe, "rules": list(rules)}))
    return path


STALL = {
    "name": "stall_ahead",
    "question": "shoulder_effort",
    "tau": 10,
    "above": 1.0,
    "release": 0.5,
    "hold_s": 1.0,
    "response": {"scale": 0.0, "joints": ["shoulder"], "direction": "positive"},
}


class Rig:
    """Publishes predictions, joint states and teleop's commands; records commands, events, diagnostics."""

    def __init__(self, executor, spin):
        self.node = Node("reflex_rig")
        self.executor, self.spin = executor, spin
        self.predictions = self.node.create_publisher(PredictionArray, "horde/predictions", 10)
        self.states = self.node.create_publisher(JointState, "joint_states", qos_profile_sensor_data)
        self.teleop = self.node.create_publisher(JointState, "joint_commands_in", 10)
        self.commands: list[JointState] = []
        self.events: list[ReflexEvent] = []
        self.diagnostics: list = []
        self.node.create_subscription(JointState, "joint_commands", self.commands.append, 10)
        self.node.create_subscription(ReflexEvent, "reflex/events", self.events.append, 10)
        self.node.create_subscription(
            DiagnosticArray,
            "/diagnostics",
            lambda m: self.diagnostics.extend(s for s in m.status if s.name.startswith("reflex")),
            10,
        )
        executor.add_node(self.node)

    def predict(self, effort: float) -> None:
        """A Horde prediction whose (1 - gamma) V of shoulder_effort at tau 10 is ``effort``."""
        values = np.zeros((2, TAUS.size))
        values[1] = effort / (1.0 - GAMMAS)
        msg = PredictionArray(questions=["shoulder_speed", "shoulder_effort"], gammas=GAMMAS.tolist())
        msg.values = values.ravel().tolist()
        self.predictions.publish(msg)

    def state(self, effort: float) -> None:
        msg = JointState(name=["shoulder", "elbow"], position=[0.0, 1.0], velocity=[0.0, 0.0], effort=[effort, 0.0])
        self.states.publish(msg)

    def command(self, shoulder: float, elbow: float) -> list[float]:
        """Send one teleop command; return the velocities the driver got for it."""
        before = len(self.commands)
        self.teleop.publish(JointState(name=["shoulder", "elbow"], velocity=[shoulder, elbow]))
        assert self.spin(self.executor, lambda: len(self.commands) > before, timeout=30), "no command came out"
        return list(self.commands[-1].velocity)

    def until(self, predicate, feed=None, timeout=30.0) -> bool:
        """Spin until ``predicate()`` (within ``bound(timeout)``), calling ``feed()`` now and then."""
        return self._feed(predicate, feed, bound(timeout))

    def during(self, seconds: float, predicate, feed) -> bool:
        """Spin for ``seconds`` (not scaled: a window in which nothing may happen) feeding as ``until`` does;
        True as soon as ``predicate()`` holds."""
        return self._feed(predicate, feed, seconds)

    def _feed(self, predicate, feed, seconds: float) -> bool:
        import time

        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if feed is not None:
                feed()
            if self.spin(self.executor, predicate, timeout=0.05):
                return True
        return predicate()


def make_reflex(rules: pathlib.Path):
    from gamma_net_ros.reflex.node import Reflex

    return Reflex(cli_args=["--ros-args", "-p", f"rules_file:={rules}"])


def test_a_rule_on_the_prediction_stops_motion_toward_the_hazard_with_hysteresis_and_hold(tmp_path, executor, spin):
    reflex = make_reflex(rules_file(tmp_path, STALL))
    executor.add_node(reflex)
    rig = Rig(executor, spin)
    # A quiet prediction: commands pass as teleop sent them.
    assert rig.until(lambda: reflex.state.status[0].seen > 0, feed=lambda: rig.predict(0.2))
    assert rig.command(0.4, 0.3) == [0.4, 0.3]
    # The prediction rises past the threshold: the rule switches on and the last command is re-sent,
    # scaled, without waiting for teleop's next one.
    sent = len(rig.commands)
    assert rig.until(lambda: rig.events, feed=lambda: rig.predict(1.5))
    event = rig.events[0]
    assert (event.rule, event.active, event.reason) == ("stall_ahead", True, "threshold")
    assert event.value == pytest.approx(1.5)
    assert rig.until(lambda: len(rig.commands) > sent and list(rig.commands[-1].velocity) == [0.0, 0.3])
    assert rig.command(0.4, 0.3) == [0.0, 0.3]
    assert rig.command(-0.4, 0.3) == [-0.4, 0.3]  # moving away from the hazard is free
    # Between release and threshold: still on (hysteresis), once the node has the new value.
    assert rig.until(lambda: reflex.state.status[0].value == pytest.approx(0.8), feed=lambda: rig.predict(0.8))
    assert rig.command(0.4, 0.3) == [0.0, 0.3] and len(rig.events) == 1
    # Below the release: off, but only once it has been on for hold_s.
    assert rig.until(lambda: len(rig.events) == 2, feed=lambda: rig.predict(0.2))
    off = rig.events[1]
    assert (off.active, off.reason) == (False, "release")
    held = (off.header.stamp.sec + off.header.stamp.nanosec * 1e-9) - (
        event.header.stamp.sec + event.header.stamp.nanosec * 1e-9
    )
    assert held >= 1.0  # the rule's hold_s
    assert rig.command(0.4, 0.3) == [0.4, 0.3]


def test_the_same_rule_on_the_present_signal_reads_the_questions_cumulant(tmp_path, executor, spin):
    signal_rule = {k: v for k, v in STALL.items() if k != "tau"} | {"source": "signal", "hold_s": 0.0}
    reflex = make_reflex(rules_file(tmp_path, signal_rule))
    executor.add_node(reflex)
    rig = Rig(executor, spin)
    # shoulder_effort's cumulant is |effort[shoulder]| of /joint_states: a pull the other way counts too.
    assert rig.until(lambda: rig.events, feed=lambda: rig.state(-2.0))
    assert rig.events[0].active and rig.events[0].value == pytest.approx(2.0)
    assert rig.command(0.4, 0.3) == [0.0, 0.3]
    assert rig.during(30.0, lambda: len(rig.events) == 2, feed=lambda: rig.state(0.7)) is False  # hysteresis
    assert rig.until(lambda: len(rig.events) == 2, feed=lambda: rig.state(0.1))
    assert rig.command(0.4, 0.3) == [0.4, 0.3]


def test_a_rule_from_the_predictor_reads_its_prediction_message(tmp_path, executor, spin):
    from gamma_net_msgs.msg import Prediction

    rule = STALL | {"from": "predictor", "question": "|shoulder.velocity|", "hold_s": 0.0}  # config/arm.yaml's
    reflex = make_reflex(rules_file(tmp_path, rule))
    executor.add_node(reflex)
    rig = Rig(executor, spin)
    predictor = rig.node.create_publisher(Prediction, "predictions", 10)

    def predict(speed: float) -> None:
        msg = Prediction(question="|shoulder.velocity|", gammas=GAMMAS.tolist())
        msg.values = (speed / (1.0 - GAMMAS)).tolist()
        predictor.publish(msg)

    assert rig.until(lambda: rig.events, feed=lambda: predict(2.0))
    assert rig.events[0].rule == "stall_ahead" and rig.events[0].value == pytest.approx(2.0)
    assert rig.command(0.4, 0.3) == [0.0, 0.3]
    rig.predict(5.0)  # the Horde's predictions are not this rule's input
    assert rig.until(lambda: len(rig.events) == 2, feed=lambda: predict(0.1))
    assert rig.command(0.4, 0.3) == [0.4, 0.3]


def test_stale_predictions_stop_every_joint_and_say_so_on_diagnostics(tmp_path, executor, spin):
    reflex = make_reflex(rules_file(tmp_path, STALL, stale_after_s=1.0, fail_safe="stop"))
    executor.add_node(reflex)
    rig = Rig(executor, spin)
    # No prediction yet: fail-safe stop, reported as such.
    assert rig.command(0.4, 0.3) == [0.0, 0.0]
    assert rig.until(lambda: rig.diagnostics)
    assert rig.diagnostics[
        -1
    ].level == DiagnosticStatus.WARN and "stale input for rules ['stall_ahead']: fail-safe stop" in (
        rig.diagnostics[-1].message
    )
    # Predictions flowing: commands pass.
    assert rig.until(lambda: not reflex.state.stopped, feed=lambda: rig.predict(0.2))
    assert rig.command(0.4, 0.3) == [0.4, 0.3]
    rig.diagnostics.clear()
    assert rig.until(lambda: rig.diagnostics, feed=lambda: rig.predict(0.2))
    assert rig.diagnostics[-1].level == DiagnosticStatus.OK
    # They stop: after the limit the arm is stopped again.
    assert rig.until(lambda: reflex.state.stopped)
    assert rig.command(0.4, -0.3) == [0.0, 0.0]


def test_hold_keeps_a_rule_as_it_was_while_its_prediction_is_stale(tmp_path, executor, spin):
    reflex = make_reflex(rules_file(tmp_path, STALL, stale_after_s=1.0, fail_safe="hold"))
    executor.add_node(reflex)
    rig = Rig(executor, spin)
    assert rig.command(0.4, 0.3) == [0.4, 0.3]  # never seen, held off
    assert rig.until(lambda: rig.events, feed=lambda: rig.predict(1.5))
    assert rig.until(lambda: reflex.state.stale == ["stall_ahead"])
    assert rig.command(0.4, 0.3) == [0.0, 0.3] and len(rig.events) == 1


@pytest.mark.parametrize(
    "rule, named",
    [
        (STALL | {"question": "wrist_speed"}, "rule 'stall_ahead': unknown question 'wrist_speed'"),
        (STALL | {"tau": 1000}, "rule 'stall_ahead': tau 1000 is outside the learner's range [1, 100]"),
        (STALL | {"response": {"scale": 0.0, "joints": ["wrist"]}}, "rule 'stall_ahead': unknown joint 'wrist'"),
        ({k: v for k, v in STALL.items() if k != "response"}, "rule 'stall_ahead': missing key 'response'"),
    ],
)
def test_a_bad_rules_file_is_refused_at_start_in_one_line(tmp_path, rule, named):
    path = rules_file(tmp_path, rule)
    before = path.read_bytes()
    command = node_command("gamma_net_ros.reflex.node", params={"rules_file": str(path)})
    result = subprocess.run(command, capture_output=True, text=True, timeout=bound(120))
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "Traceback" not in output
    fatal = [line for line in output.splitlines() if "[FATAL]" in line]
    assert len(fatal) == 1 and named in fatal[0] and str(path) in fatal[0], output
    assert path.read_bytes() == before


@pytest.mark.slow
def test_reflex_launch_starts_the_emulated_arm_the_horde_and_the_reflex_in_the_command_path(tmp_path, executor, spin):
    from ros2_cli import assert_clean_shutdown, close_all, launch, param_get, stop_daemon, wait_for_nodes

    folder = pathlib.Path(tempfile.mkdtemp(prefix="rfx-", dir="/tmp"))  # short: a Unix socket path is length-limited
    link = folder / "ttyDXL"
    listener = Node("reflex_launch_listener")
    learned, moving = [], []
    listener.create_subscription(PredictionArray, "horde/predictions", lambda m: learned.append(m.update_count), 10)
    listener.create_subscription(
        JointState, "joint_commands", lambda m: moving.append(any(v != 0.0 for v in m.velocity)), 10
    )
    executor.add_node(listener)
    run = launch(
        "gamma_net_ros",
        "reflex.launch.py",
        f"port:={link}",
        "obstacle_low:=-0.21",
        cwd=tmp_path,
        log_path=tmp_path / "launch.log",
    )
    nodes = {"/dynamixel_driver", "/teleop", "/operator", "/horde", "/reflex"}
    try:
        assert nodes <= wait_for_nodes(nodes, timeout=120, launched=run), run.output
        assert param_get("/operator", "operator.overshoot_probability") == "0.5"  # config/reflex.yaml's operator
        # joint_states -> horde -> horde/predictions -> reflex; 60 steps learned: the learner is warm
        assert spin(executor, lambda: learned and max(learned) >= 60, timeout=240), run.output
        # operator -> joy -> teleop -> joint_commands_in -> reflex -> joint_commands -> driver -> servos:
        # with fresh predictions the commands pass (before them, the fail-safe held every joint)
        assert spin(executor, lambda: any(moving), timeout=120), run.output
        state = EmulatorClient(f"{link}.ctl").state()
        assert state["servos"][1]["obstacle"]["low"] == -0.21  # the launch argument reached the emulator
    finally:
        code = run.interrupt()
        close_all()
        stop_daemon()
    assert code == 0, run.output
    assert_clean_shutdown(run.output, ["servo_emulator", "dynamixel_driver", "teleop", "operator", "horde", "reflex"])
    assert not link.exists()
    folder.rmdir()
