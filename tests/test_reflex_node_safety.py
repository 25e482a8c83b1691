"""The reflex node's safety through real messages: it outlives stale, infinite and malformed inputs,
holds on a timer, takes every command form, survives a fuzz of random messages, and refuses
``use_sim_time`` at run time (the real ``ros2 param set``).

The node runs in-process beside a rig node (tests/test_reflex_node.py's); an exception out of any
of its callbacks would propagate out of the test's spin, so "alive" is checked by every spin.
"""

from __future__ import annotations

import math
import subprocess

import numpy as np
import pytest
from gamma_net_msgs.msg import PredictionArray
from geometry_msgs.msg import Twist, TwistStamped
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from test_reflex_node import GAMMAS, STALL, Rig, rules_file
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint
from waiting import bound

from gamma_net_ros.processes import node_command

pytestmark = pytest.mark.ros


def make_reflex(rules, remap=(), **params):
    from gamma_net_ros.reflex.node import Reflex

    args = ["--ros-args", "-p", f"rules_file:={rules}"]
    for rule in remap:
        args += ["-r", rule]
    for key, value in params.items():
        args += ["-p", f"{key}:={value}"]
    return Reflex(cli_args=args)


def fresh(reflex) -> bool:
    """The rules' input seen and fresh (before any decision the node is not yet stopped)."""
    return all(s.seen > -math.inf for s in reflex.state.status) and not reflex.state.stopped


def test_a_rule_that_is_on_going_stale_or_an_infinite_prediction_leaves_the_node_holding(tmp_path, executor, spin):
    reflex = make_reflex(rules_file(tmp_path, STALL | {"hold_s": 0.0}, stale_after_s=1.0))
    executor.add_node(reflex)
    rig = Rig(executor, spin)
    assert rig.until(lambda: rig.events, feed=lambda: rig.predict(2.0))  # on
    rig.predict(math.inf)  # ignored: says nothing, so the input ages
    assert rig.until(lambda: any(e.reason == "stale" for e in rig.events))  # once rclpy's logger died here
    assert rig.until(lambda: reflex.state.stopped)
    assert rig.command(0.4, 0.3) == [0.0, 0.0]
    assert reflex.counts["errors"] == 0


def test_a_malformed_prediction_is_dropped_and_counted_and_its_rule_goes_stale(tmp_path, executor, spin):
    reflex = make_reflex(rules_file(tmp_path, STALL, stale_after_s=1.0))
    executor.add_node(reflex)
    rig = Rig(executor, spin)
    assert rig.until(lambda: fresh(reflex), feed=lambda: rig.predict(0.2))

    def malformed():
        rig.predictions.publish(PredictionArray(questions=["shoulder_effort"], gammas=GAMMAS.tolist(), values=[2.0]))

    assert rig.until(lambda: reflex.state.stopped, feed=malformed)
    assert reflex.counts["rejected"] > 0 and reflex.counts["errors"] == 0
    assert rig.command(0.4, 0.3) == [0.0, 0.0]


def test_a_fail_safe_stop_sends_its_hold_on_a_timer_without_new_commands(tmp_path, executor, spin):
    reflex = make_reflex(rules_file(tmp_path, STALL, stale_after_s=1.0), hold_period_s=0.1)
    executor.add_node(reflex)
    rig = Rig(executor, spin)
    assert rig.until(lambda: fresh(reflex), feed=lambda: rig.predict(0.2))
    assert rig.command(0.4, 0.3) == [0.4, 0.3]
    sent = len(rig.commands)
    assert rig.until(lambda: len(rig.commands) >= sent + 3)  # the operator silent, the predictions gone
    assert all(list(m.velocity) == [0.0, 0.0] for m in rig.commands[sent:])


def test_joint_state_position_goals_are_held_at_the_present_position(tmp_path, executor, spin):
    reflex = make_reflex(rules_file(tmp_path, STALL, stale_after_s=1.0))
    executor.add_node(reflex)
    rig = Rig(executor, spin)
    rig.teleop.publish(JointState(name=["shoulder", "elbow"], position=[0.9, 0.2]))
    # Stopped and no joint_states yet: nowhere to hold a position goal, so nothing is sent, never the goal.
    assert rig.until(lambda: reflex.counts["unheld"] > 0)
    assert not rig.commands
    goal = JointState(name=["shoulder", "elbow"], position=[0.9, 0.2], velocity=[0.4, 0.3])
    rig.teleop.publish(goal)  # a velocity too: the joints are held by zero velocity alone
    assert rig.until(lambda: rig.commands)
    assert list(rig.commands[-1].position) == [] and list(rig.commands[-1].velocity) == [0.0, 0.0]
    held = lambda: rig.commands and list(rig.commands[-1].position) == [0.0, 1.0]  # noqa: E731 (Rig.state's)
    assert rig.until(held, feed=lambda: (rig.state(0.0), rig.teleop.publish(goal)))
    assert list(rig.commands[-1].velocity) == [0.0, 0.0]
    rig.teleop.publish(JointState(name=["shoulder", "elbow"], velocity=[0.4]))  # shorter than the names
    assert rig.until(lambda: reflex.counts["rejected"] > 0)


class FormRig:
    """Sends one form's commands on ``{topic}_in``; records ``topic`` (the reflex remapped to them)."""

    REMAP = lambda topic: (f"joint_commands_in:={topic}_in", f"joint_commands:={topic}")  # noqa: E731

    def __init__(self, rig: Rig, cls, topic: str, reflex):
        self.rig, self.out, self.reflex = rig, [], reflex
        self.send = rig.node.create_publisher(cls, f"{topic}_in", 10).publish
        rig.node.create_subscription(cls, topic, self.out.append, 10)

    def published(self) -> int:
        return self.reflex.counts["commands"] + self.reflex.counts["held"]

    def through(self, msg):
        """The command that came out for ``msg`` (once every earlier one, a hold or a re-send, has come)."""
        before = self.published()
        self.send(msg)
        assert self.rig.until(lambda: self.published() > before and len(self.out) == self.published()), "none came"
        return self.out[-1]


def twist(x: float, z: float, stamped: bool):
    msg = TwistStamped() if stamped else Twist()
    body = msg.twist if stamped else msg
    body.linear.x, body.angular.z = x, z
    return msg


@pytest.mark.parametrize("stamped", [False, True])
def test_a_mobile_base_twist_is_filtered_by_axis(tmp_path, executor, spin, stamped):
    rule = STALL | {"hold_s": 0.0, "response": {"scale": 0.0, "joints": ["linear.x"], "direction": "positive"}}
    kind = "twist_stamped" if stamped else "twist"
    reflex = make_reflex(
        rules_file(tmp_path, rule, stale_after_s=1.0), FormRig.REMAP("cmd_vel"), command_type=kind, command_stale_s=60.0
    )
    executor.add_node(reflex)
    rig = Rig(executor, spin)
    base = FormRig(rig, TwistStamped if stamped else Twist, "cmd_vel", reflex)
    body = (lambda m: m.twist) if stamped else (lambda m: m)
    assert rig.until(lambda: fresh(reflex), feed=lambda: rig.predict(0.2))
    out = body(base.through(twist(0.5, 0.2, stamped)))
    assert (out.linear.x, out.angular.z) == (0.5, 0.2)
    assert rig.until(lambda: rig.events, feed=lambda: rig.predict(2.0))
    out = body(base.through(twist(0.5, 0.2, stamped)))
    assert (out.linear.x, out.angular.z) == (0.0, 0.2)  # forward stopped, turning free
    assert body(base.through(twist(-0.5, 0.2, stamped))).linear.x == -0.5  # backing away free
    assert reflex.counts["non_finite"] == 0
    out = body(base.through(twist(math.nan, 0.2, stamped)))
    assert (out.linear.x, out.angular.z) == (0.0, 0.0)  # not finite: held
    assert reflex.counts["non_finite"] == 1 and reflex.counts["rejected"] == 0


@pytest.mark.parametrize("interface", ["velocity", "position"])
def test_a_forward_controllers_float64_multi_array_is_filtered_in_joint_order(tmp_path, executor, spin, interface):
    rule = STALL | {"hold_s": 0.0}
    reflex = make_reflex(
        rules_file(tmp_path, rule, stale_after_s=1.0),
        FormRig.REMAP("forward_controller/commands"),
        command_type="float64_multi_array",
        interface=interface,
        joint_names="[elbow, shoulder]",
        command_stale_s=60.0,
    )
    executor.add_node(reflex)
    rig = Rig(executor, spin)
    arm = FormRig(rig, Float64MultiArray, "forward_controller/commands", reflex)
    feed = lambda effort: lambda: (rig.predict(effort), rig.state(0.0))  # noqa: E731
    assert rig.until(lambda: fresh(reflex), feed=feed(0.2))
    assert list(arm.through(Float64MultiArray(data=[0.3, 0.4])).data) == [0.3, 0.4]
    assert rig.until(lambda: rig.events, feed=feed(2.0))
    # The shoulder (data[1]) moving up is stopped: its velocity zeroed, its goal held at its present 0.0.
    assert list(arm.through(Float64MultiArray(data=[0.3, 0.4])).data) == [0.3, 0.0]
    assert list(arm.through(Float64MultiArray(data=[0.3, -0.4])).data) == [0.3, -0.4]
    before = reflex.counts["rejected"]
    one = Float64MultiArray(data=[0.3])  # one value for two joints: refused, the hold sent
    held = [1.0, 0.0] if interface == "position" else [0.0, 0.0]
    assert rig.until(lambda: list(arm.out[-1].data) == held, feed=lambda: (rig.state(0.0), arm.send(one)))
    assert reflex.counts["rejected"] > before


def test_joint_trajectory_goals_are_filtered_and_held(tmp_path, executor, spin):
    remap = FormRig.REMAP("trajectory_controller/joint_trajectory")
    reflex = make_reflex(rules_file(tmp_path, STALL, stale_after_s=1.0), remap, command_type="joint_trajectory")
    executor.add_node(reflex)
    rig = Rig(executor, spin)
    arm = FormRig(rig, JointTrajectory, "trajectory_controller/joint_trajectory", reflex)
    goal = JointTrajectory(joint_names=["shoulder", "elbow"])
    goal.points = [JointTrajectoryPoint(positions=[0.5, 1.2]) for _ in range(2)]
    assert rig.until(lambda: arm.out, feed=lambda: (rig.state(0.0), arm.send(goal)))
    assert [list(p.positions) for p in arm.out[-1].points] == [[0.0, 1.0]]  # stopped: held where it is


@pytest.mark.parametrize(
    "params, named",
    [
        ({"joint_names": "[]"}, "parameter joint_names must be a non-empty list of joint names; got []"),
        ({"command_type": "pose"}, "parameter command_type must be one of ['float64_multi_array', "),
        (
            {"interface": "torque"},
            "parameter interface must be one of ['position', 'velocity', 'effort']; got 'torque'",
        ),
    ],
)
def test_bad_parameters_are_refused_in_one_line(tmp_path, params, named):
    command = node_command("gamma_net_ros.reflex.node", params=params)
    result = subprocess.run(command, capture_output=True, text=True, timeout=bound(120))
    output = result.stdout + result.stderr
    assert result.returncode == 1 and "Traceback" not in output, output
    fatal = [line for line in output.splitlines() if "[FATAL]" in line]
    assert len(fatal) == 1 and named in fatal[0], output


def test_a_fuzz_of_random_and_malformed_messages_leaves_the_node_alive_and_every_output_safe(tmp_path, executor, spin):
    rule = STALL | {"hold_s": 0.0}
    reflex = make_reflex(rules_file(tmp_path, rule, stale_after_s=0.2), hold_period_s=0.05)
    executor.add_node(reflex)
    rig = Rig(executor, spin)
    checked, received = [], []
    publish = reflex.commands.publish

    def check(msg: JointState) -> None:
        """Every output as it is sent: finite; no push up the shoulder while the rule is on; all held when stopped."""
        velocity = np.asarray(msg.velocity, dtype=float)
        assert np.isfinite(velocity).all() and np.isfinite(np.asarray(msg.position, dtype=float)).all()
        assert len(msg.velocity) in (0, len(msg.name)) and len(msg.position) in (0, len(msg.name))
        names = list(msg.name)
        if reflex.state.stopped:
            assert not velocity.any()
        elif reflex.state.status[0].on and "shoulder" in names and len(velocity):
            assert velocity[names.index("shoulder")] <= 0.0
        checked.append(msg)
        publish(msg)

    reflex.commands.publish = check
    rig.node.create_subscription(JointState, "joint_commands", received.append, 100)
    states = rig.node.create_publisher(JointState, "joint_states", qos_profile_sensor_data)
    rng = np.random.default_rng(0)
    odd = [math.nan, math.inf, -math.inf, 0.0, 1e308]
    value = lambda: float(rng.choice(odd)) if rng.random() < 0.2 else float(rng.uniform(-3, 3))  # noqa: E731
    values = lambda: [value() for _ in range(int(rng.integers(0, 4)))]  # noqa: E731
    names = lambda: list(rng.choice(["shoulder", "elbow", "wrist", ""], size=int(rng.integers(0, 3))))  # noqa: E731
    for k in range(3000):
        kind = rng.integers(4)
        if kind == 0:
            msg = PredictionArray(questions=["shoulder_effort"], gammas=GAMMAS.tolist(), values=[value()] * 3)
            if rng.random() < 0.3:
                msg = PredictionArray(questions=names(), gammas=values(), values=values(), readout_values=values())
            rig.predictions.publish(msg)
        elif kind == 1:
            rig.teleop.publish(JointState(name=names(), position=values(), velocity=values(), effort=values()))
        elif kind == 2:
            rig.teleop.publish(JointState(name=["shoulder", "elbow"], velocity=[value(), value()]))
        else:
            states.publish(JointState(name=names(), position=values(), effort=values()))
        if k % 20 == 0:
            spin(executor, lambda: False, timeout=0.01)  # the node takes what came; an error would raise here
    assert rig.until(lambda: len(checked) > 100 and received)
    assert reflex.counts["errors"] == 0 and reflex.counts["rejected"] > 0


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the rig's V of an infinite level
def test_the_node_as_users_run_it_outlives_a_fuzz_never_pushes_toward_the_hazard_and_exits_0_on_ctrl_c(
    tmp_path, executor, spin
):
    """Every valid prediction is past the threshold, so the rule is on or its input stale (stop): no
    output may ever push the shoulder up, whatever else the fuzz sends."""
    from ros2_cli import Background, close_all, param_set

    rules = rules_file(tmp_path, STALL | {"hold_s": 0.0}, stale_after_s=0.2)
    command = node_command("gamma_net_ros.reflex.node", params={"rules_file": str(rules), "hold_period_s": 0.05})
    run = Background(command, cwd=tmp_path, log_path=tmp_path / "reflex.log")
    rig = Rig(executor, spin)
    try:
        assert run.wait_for("rules ['stall_ahead']", timeout=120), run.output
        # The clock staleness is judged on is fixed like every other parameter: `ros2 param set` is refused.
        said = param_set("/reflex", "use_sim_time", "true")
        assert "Setting parameter failed: use_sim_time is fixed once the reflex is up" in said, said
        rng = np.random.default_rng(1)
        odd = [math.nan, math.inf, -math.inf, 1e308]
        value = lambda: float(rng.choice(odd)) if rng.random() < 0.2 else float(rng.uniform(-3, 3))  # noqa: E731
        for k in range(2000):
            kind = rng.integers(4)
            if kind == 3:  # malformed: sizes, gammas
                values = [value() for _ in range(int(rng.integers(0, 5)))]
                rig.predictions.publish(PredictionArray(questions=["shoulder_effort"], gammas=values, values=values))
            elif kind == 0:
                rig.predict(float(rng.uniform(1.5, 1e6)) if rng.random() < 0.8 else float(rng.choice(odd)))
            elif kind == 1:
                size = int(rng.integers(1, 4))
                rig.teleop.publish(JointState(name=["shoulder", "elbow", "wrist"][:size], velocity=[value(), value()]))
            else:
                rig.teleop.publish(JointState(name=["shoulder", "elbow"], velocity=[value(), value()]))
            if k % 20 == 0:
                spin(executor, lambda: False, timeout=0.01)
        assert rig.until(lambda: len(rig.commands) > 50)
        assert run.process.poll() is None, run.output  # alive
    finally:
        code = run.interrupt()
        close_all()
    assert code == 0, run.output
    for msg in rig.commands:
        velocity = np.asarray(msg.velocity, dtype=float)
        assert np.isfinite(velocity).all() and len(velocity) == len(msg.name)
        assert velocity[list(msg.name).index("shoulder")] <= 0.0, msg
    assert "Traceback" not in run.output


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the rig's V of an infinite level
@pytest.mark.parametrize("kind", ["float64_multi_array", "twist_stamped"])
def test_a_fuzz_of_each_forms_messages_leaves_every_output_well_formed_finite_and_safe(tmp_path, executor, spin, kind):
    axis = "shoulder" if kind == "float64_multi_array" else "linear.x"
    rule = STALL | {"hold_s": 0.0, "response": {"scale": 0.0, "joints": [axis], "direction": "positive"}}
    topic = "commands"
    reflex = make_reflex(rules_file(tmp_path, rule, stale_after_s=0.2), FormRig.REMAP(topic), command_type=kind)
    executor.add_node(reflex)
    rig = Rig(executor, spin)
    cls = Float64MultiArray if kind == "float64_multi_array" else TwistStamped
    checked = []
    publish = reflex.commands.publish

    def check(msg) -> None:
        """As sent: a command of the form (read back without error), finite, the rule and the fail-safe obeyed."""
        command = reflex.form.read(msg)
        assert command.is_finite()
        velocity = command.velocity[0]
        if reflex.state.stopped:
            assert not velocity.any()
        elif reflex.state.status[0].on:
            assert velocity[command.names.index(axis)] <= 0.0
        checked.append(msg)
        publish(msg)

    reflex.commands.publish = check
    send = rig.node.create_publisher(cls, f"{topic}_in", 10).publish
    rng = np.random.default_rng(2)
    odd = [math.nan, math.inf, -math.inf, 0.0, 1e308]
    value = lambda: float(rng.choice(odd)) if rng.random() < 0.2 else float(rng.uniform(-3, 3))  # noqa: E731
    for k in range(1500):
        if rng.random() < 0.3:
            rig.predict(value())
        elif kind == "float64_multi_array":
            send(Float64MultiArray(data=[value() for _ in range(int(rng.choice([1, 2, 2, 2, 3])))]))
        else:
            send(twist(value(), value(), stamped=True))
        if k % 20 == 0:
            spin(executor, lambda: False, timeout=0.01)
    assert rig.until(lambda: len(checked) > 100)
    assert reflex.counts["errors"] == 0
