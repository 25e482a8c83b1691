"""Node: fixed responses driven by predictions, in the command path (``joint_commands_in`` -> ``joint_commands``).

    ros2 run gamma_net_ros teleop --ros-args --params-file config/arm.yaml -r joint_commands:=joint_commands_in
    ros2 run gamma_net_ros reflex --ros-args --params-file config/reflex.yaml
    ros2 topic echo /reflex/events

It sits between the operator and the motors, as a safety limiter does (guide: docs/reflex.md):
every command on ``joint_commands_in`` (``command_type``: JointState, a forward controller's
Float64MultiArray, JointTrajectory, Twist, TwistStamped; :mod:`gamma_net_ros.reflex.forms`) goes
out on ``joint_commands`` after the rules (``rules_file``, :mod:`gamma_net_core.reflex.rules`)
that are on and the fail-safe (:mod:`gamma_net_core.reflex.evaluation`). The rules read
``horde/predictions``, the predictor's ``predictions`` or the present signal; position goals are
scaled and held relative to ``joint_states``. Each switch is a ReflexEvent on ``reflex/events``
and re-sends the last command (a rule switching on also re-sends, restricted, what earlier
commands left in force on the joints it names); while a fail-safe stop lasts, its hold is re-sent every
``hold_period_s`` (steady time). A hold covers every joint the node knows: ``joint_names``, the
joints on ``joint_states`` and every joint a command has named (:mod:`gamma_net_core.reflex.holds`);
a fail-safe ``{stop: [linear.x]}`` holds only the joints it names (a command's others pass through
the rules), and its re-send is the last command while it is recent, then the hold.
Malformed inputs are counted and dropped, a command with a non-finite value
is counted and held (each said in a throttled warning); no callback can end the node (an
error is logged and the hold sent). A bad rules file or parameter is refused in one line (exit 1).

Time: staleness is judged on the node's clock (``/clock`` under ``use_sim_time``, fixed once the
node is up like every other parameter), and that clock is watched on the steady clock: if it
does not advance for ``stale_after_s`` of steady time (frozen, stopped, stepped back), every
input is stale and the fail-safe acts. The decision timer runs on the steady clock, so a stopped
``/clock`` cannot stop the decisions or the hold's re-sends.

Who is on the inputs: the publishers on ``joint_commands_in``, the prediction and the signal
topics are watched (:mod:`gamma_net_ros.graph_watch`, parameters ``graph.*``); an unexpected one
is named on ``/diagnostics`` and, by default, stops every joint until it is gone. Each input is
counted there: ``received``, ``processed`` and ``lost`` (dropped from the keep-last queue).
"""

from __future__ import annotations

import sys
import time

from gamma_net_msgs.msg import Prediction, PredictionArray, ReflexEvent
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState

from gamma_net_core.horde.reading import PublishedPredictions
from gamma_net_core.reflex.commands import PresentPositions
from gamma_net_core.reflex.evaluation import ReflexState, rule_value
from gamma_net_core.reflex.holds import ClockGuard, KnownJoints
from gamma_net_ros.conversions import clock_seconds
from gamma_net_ros.diagnostics import Diagnostics, Health
from gamma_net_ros.horde.topics import message_class
from gamma_net_ros.node_main import run_node
from gamma_net_ros.reflex.health import event_line, event_msg, rules_health, say_clock, stop_line
from gamma_net_ros.reflex.outputs import COUNTS, CommandOut
from gamma_net_ros.reflex.settings import declare_settings, fixed_clock, load_command_path, signal_readers, watch_inputs


class Reflex(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("reflex", **kwargs)
        s = declare_settings(self)
        self.command_stale_s, self.hold_period_s = s.command_stale_s, s.hold_period_s
        self.present = PresentPositions(s.state_stale_s)
        self.form, self.rule_set, spec, rules_file = load_command_path(s)
        self.joint_names = list(self.form.names)
        self.state = ReflexState(self.rule_set, KnownJoints(self.joint_names, self.form.holding))
        self.clock_guard, self.clock_stalled = ClockGuard(self.rule_set.stale_after_s), False
        self.add_on_set_parameters_callback(fixed_clock)
        self.counts = dict.fromkeys((*COUNTS, "events", "rejected", "non_finite", "clock_stalls", "errors"), 0)
        self.out = CommandOut(self, self.form, self.counts)
        self.commands = self.out.publisher
        self.events = self.create_publisher(ReflexEvent, "reflex/events", 10)
        self.graph = watch_inputs(self, on_change=lambda: self.health.publish())  # who is on the inputs; what came
        guard, watched = self._guarded, self.graph.subscribe
        watched(self.form.cls, "joint_commands_in", guard(self.on_command), 10, role="commands")
        self.create_subscription(JointState, "joint_states", guard(self.on_joint_states), qos_profile_sensor_data)
        rules = self.rule_set.rules
        self.horde_rules = [i for i, r in enumerate(rules) if r.source == "prediction" and r.origin == "horde"]
        self.predictor_rules = [i for i, r in enumerate(rules) if r.origin == "predictor"]
        if self.horde_rules:
            watched(PredictionArray, "horde/predictions", guard(self.on_horde_predictions), 10, role="predictions")
        if self.predictor_rules:
            watched(Prediction, "predictions", guard(self.on_predictor_prediction), 10, role="predictions")
        self.signals = signal_readers(self.rule_set, spec)  # topic -> [(rule index, cumulant, its field path)]
        for topic, readers in self.signals.items():
            on_signal = guard(lambda msg, t=topic: self.on_signal(t, msg))
            watched(message_class(readers[0][1].type), topic, on_signal, qos_profile_sensor_data, role="signals")
        self.last, self.last_at = None, -float("inf")  # (the last well-formed command, its message), when
        # Steady: a /clock that stops (use_sim_time) must not stop the decisions, the holds or the report.
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(1.0 / s.decide_rate_hz, guard(self.tick), clock=steady)
        self.health = Diagnostics(self, "rules", self._health, period=0)
        self.create_timer(s.diagnostics_period_s, guard(self.health.publish), clock=steady)
        self.get_logger().info(
            f"{len(rules)} rules {[r.name for r in rules]} from {rules_file}: {s.command_type} commands "
            f"{self.commands.topic_name} from joint_commands_in; events on {self.events.topic_name}"
        )

    _now = clock_seconds  # self._now(): the node's clock in seconds

    def _guarded(self, callback):
        """``callback``, whose unexpected errors are logged and answered by the hold, never end the node."""

        def run(*args):
            try:
                callback(*args)
            except Exception as exc:  # a safety filter outlives its bugs, holding
                self.counts["errors"] += 1
                self.get_logger().error(f"{type(exc).__name__}: {exc}; holding", throttle_duration_sec=5.0)
                try:
                    self._send_hold()
                except Exception as again:
                    self.get_logger().error(f"the hold failed too: {again}", throttle_duration_sec=5.0)

        return run

    # -- inputs

    def _reject(self, what: str, exc: ValueError) -> None:
        self.counts["rejected"] += 1
        self.get_logger().warning(f"{what} dropped: {exc}", throttle_duration_sec=5.0)

    def on_horde_predictions(self, msg: PredictionArray) -> None:
        self._observe(self.horde_rules, msg.questions, msg.gammas, msg.values, msg.readouts, msg.readout_values)

    def on_predictor_prediction(self, msg: Prediction) -> None:
        self._observe(self.predictor_rules, [msg.question], msg.gammas, msg.values)

    def _observe(self, indices: list[int], *arrays) -> None:
        try:
            published = PublishedPredictions(*arrays)
        except ValueError as exc:
            return self._reject("predictions", exc)  # the rules' input then goes stale, as if none came
        now = self._now()
        for i in indices:
            if (value := rule_value(self.rule_set.rules[i], published)) is not None:
                self.state.observe(i, value, now)
        self.decide()

    def on_signal(self, topic: str, msg) -> None:
        now = self._now()
        for i, cumulant, _ in self.signals[topic]:
            try:
                value = cumulant.read(msg)  # as the Horde reads it (REP 117, the transform): NaN is no news
            except (ValueError, IndexError, KeyError, TypeError) as exc:
                self._reject(topic, exc)
                continue
            self.state.observe(i, value, now)
        self.decide()

    def on_joint_states(self, msg: JointState) -> None:
        self.present.update(msg.name, msg.position, self._now())
        if len(msg.name) == len(msg.position) and len(set(msg.name)) == len(msg.name):  # a well-formed reading
            self.state.joints.saw_states(msg.name)

    def on_command(self, msg) -> None:
        try:
            command = self.form.read(msg)
        except ValueError as exc:
            self._reject("command", exc)
            return self._send_hold()  # a command the reflex cannot read is not passed: the hold is
        if (bad := command.non_finite()) is not None:  # the filter holds it; the operator hears why
            self.counts["non_finite"] += 1
            self.get_logger().warning(f"command held, not finite: {bad}", throttle_duration_sec=5.0)
        self.last, self.last_at = (command, msg), self._now()
        self.decide(resend=False)  # a command never goes out on a decision older than itself
        self._send(command, msg)

    # -- decisions

    def tick(self) -> None:
        self.decide()
        if self.state.stopped and not 0.0 <= time.monotonic() - self.out.sent_at < self.hold_period_s:
            self._send_hold(stopped=True)  # a silent operator cannot leave a goal in force

    def decide(self, resend: bool = True) -> None:
        """Update the rules; publish an event per switch, and re-send the last command after one."""
        now, was_stopped, was_stop = self._now(), self.state.stopped, self.state.stop_joints
        stalled = self.clock_guard.stalled(now, time.monotonic())
        if stalled != self.clock_stalled:
            self.counts["clock_stalls"] += stalled
            say_clock(self.get_logger(), stalled, self.rule_set.stale_after_s, now)
        self.clock_stalled = stalled
        changes = self.state.decide(now, clock_stalled=stalled, stop=self.graph.stopping)
        if self.state.stopped and (self.state.stop_joints != was_stop or not was_stopped) and not self.graph.stopping:
            self.get_logger().warning(stop_line(self.state))  # (the graph check says its own)
        elif was_stopped and not self.state.stopped:
            self.get_logger().info("inputs fresh again: commands pass through the rules")
        for change in changes:
            self.events.publish(event_msg(change, self.get_clock().now().to_msg()))
            self.counts["events"] += 1
            said = event_line(change)
            if change.reason == "stale":
                self.get_logger().warning(said)
            else:
                self.get_logger().info(said)
        if resend and changes and self.last is not None:
            command, msg = self.last
            # A position goal stays in force however old: a rule switching on re-sends it scaled. Released,
            # only a recent one is re-sent: an old goal does not set the arm moving again by itself.
            restricting = "position" in command.fields and any(c.on for c in changes)
            if restricting or now - self.last_at <= self.command_stale_s:
                self._send(command, msg)
        if resend and any(c.on for c in changes) and not self.state.stops_all:
            # What earlier commands left in force at the robot (the shoulder, when the last named the elbow).
            last = self.last[0].names if self.last is not None else ()
            known, stale_s = self.present.known(now), self.command_stale_s
            self.out.restricted(self.state.restricted(changes, known, now=now, stale_s=stale_s, exclude=last))

    def _send(self, command, msg) -> None:
        now = self._now()
        outputs = self.state.outputs(command, self.present.known(now), now=now)
        self.out.command(outputs, command, msg, stopped=self.state.stopped)

    def _send_hold(self, stopped: bool = False) -> None:
        now, last = self._now(), self.last  # stopped: the stop's hold (of some joints: the rest as asked, if recent)
        recent = last is not None and 0.0 <= now - self.last_at <= self.command_stale_s  # (not from the future)
        if stopped and recent and not self.state.stops_all:
            return self._send(*last)
        self.out.hold((self.state.hold_stopped if stopped else self.state.hold_all)(self.present.known(now)))

    def _health(self) -> Health:
        return self.graph.amend(rules_health(self.state, self.rule_set, self.counts, clock_stalled=self.clock_stalled))


def main(args=None) -> int:
    return run_node(Reflex, args)


if __name__ == "__main__":
    sys.exit(main())
