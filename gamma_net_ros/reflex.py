"""Node: fixed responses driven by predictions, in the command path (``joint_commands_in`` -> ``joint_commands``).

    ros2 run gamma_net_ros teleop --ros-args --params-file config/arm.yaml -r joint_commands:=joint_commands_in
    ros2 run gamma_net_ros reflex --ros-args --params-file config/reflex.yaml
    ros2 topic echo /reflex/events

It sits between the operator and the motors, as a safety limiter does (guide: docs/reflex.md):
every command on ``joint_commands_in`` (``command_type``: JointState, a forward controller's
Float64MultiArray, JointTrajectory, Twist, TwistStamped; :mod:`gamma_net_ros.reflex_forms`) goes
out on ``joint_commands`` after the rules (``rules_file``, :mod:`gamma_net_core.reflex.rules`)
that are on and the fail-safe (:mod:`gamma_net_core.reflex.evaluation`). The rules read
``horde/predictions``, the predictor's ``predictions`` or the present signal; position goals are
scaled and held relative to ``joint_states``. Each switch is a ReflexEvent on ``reflex/events``
and re-sends the last command (a rule switching on also re-sends, restricted, what earlier
commands left in force on the joints it names); while a fail-safe stop lasts, its hold is re-sent every
``hold_period_s`` (steady time). A hold covers every joint the node knows: ``joint_names``, the
joints on ``joint_states`` and every joint a command has named (:mod:`gamma_net_core.reflex.holds`).
Malformed inputs are counted and dropped, a command with a non-finite value
is counted and held (each said in a throttled warning); no callback can end the node (an
error is logged and the hold sent). A bad rules file or parameter is refused in one line (exit 1).

Time: staleness is judged on the node's clock (``/clock`` under ``use_sim_time``, fixed once the
node is up like every other parameter), and that clock is watched on the steady clock: if it
does not advance for ``stale_after_s`` of steady time (frozen, stopped, stepped back), every
input is stale and the fail-safe acts. The decision timer runs on the steady clock, so a stopped
``/clock`` cannot stop the decisions or the hold's re-sends.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from gamma_net_msgs.msg import Prediction, PredictionArray, ReflexEvent
from rcl_interfaces.msg import SetParametersResult
from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState

from gamma_net_core.horde.reading import PublishedPredictions
from gamma_net_core.reflex.commands import PresentPositions
from gamma_net_core.reflex.evaluation import Outputs, ReflexState, rule_value
from gamma_net_core.reflex.holds import ClockGuard, KnownJoints
from gamma_net_ros.conversions import clock_seconds
from gamma_net_ros.diagnostics import Diagnostics, Health
from gamma_net_ros.horde_topics import message_class
from gamma_net_ros.node_main import run_node
from gamma_net_ros.reflex_forms import make_form
from gamma_net_ros.reflex_health import event_line, event_msg, rules_health
from gamma_net_ros.reflex_settings import declare_settings, load_rule_set, signal_readers


class Reflex(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("reflex", **kwargs)
        s = declare_settings(self)
        self.command_stale_s, self.hold_period_s = s.command_stale_s, s.hold_period_s
        self.present = PresentPositions(s.state_stale_s)
        self.form = make_form(s.command_type, s.interface, s.joint_names)
        self.joint_names = list(self.form.names)
        self.rule_set, spec, rules_file = load_rule_set(s, self.joint_names)
        self.state = ReflexState(self.rule_set, KnownJoints(self.joint_names, self.form.holding))
        self.clock_guard = ClockGuard(self.rule_set.stale_after_s)
        self.clock_stalled = False
        self.add_on_set_parameters_callback(self._on_set_parameters)
        self.commands = self.create_publisher(self.form.cls, "joint_commands", 10)
        self.events = self.create_publisher(ReflexEvent, "reflex/events", 10)
        guard = self._guarded
        self.create_subscription(self.form.cls, "joint_commands_in", guard(self.on_command), 10)
        self.create_subscription(JointState, "joint_states", guard(self.on_joint_states), qos_profile_sensor_data)
        rules = self.rule_set.rules
        self.horde_rules = [i for i, r in enumerate(rules) if r.source == "prediction" and r.origin == "horde"]
        self.predictor_rules = [i for i, r in enumerate(rules) if r.origin == "predictor"]
        if self.horde_rules:
            self.create_subscription(PredictionArray, "horde/predictions", guard(self.on_horde_predictions), 10)
        if self.predictor_rules:
            self.create_subscription(Prediction, "predictions", guard(self.on_predictor_prediction), 10)
        self.signals = signal_readers(self.rule_set, spec)  # topic -> [(rule index, cumulant, its field path)]
        for topic, readers in self.signals.items():
            on_signal = guard(lambda msg, t=topic: self.on_signal(t, msg))
            self.create_subscription(message_class(readers[0][1].type), topic, on_signal, qos_profile_sensor_data)
        self.last = None  # (the last well-formed command, its message)
        self.last_at = -float("inf")
        self.sent_at = -float("inf")  # steady time of the last output
        self.counts = dict.fromkeys(
            ("commands", "held", "scaled", "stopped", "events", "rejected", "non_finite", "unsent", "unheld",
             "clock_stalls", "errors"), 0
        )  # fmt: skip
        # On the steady clock: a /clock that stops (use_sim_time) must not stop the decisions, the holds, or
        # the report that says so.
        steady = Clock(clock_type=ClockType.STEADY_TIME)
        self.create_timer(1.0 / s.decide_rate_hz, guard(self.tick), clock=steady)
        self.health = Diagnostics(self, "rules", self._health, period=0)
        self.create_timer(s.diagnostics_period_s, guard(self.health.publish), clock=steady)
        self.get_logger().info(
            f"{len(rules)} rules {[r.name for r in rules]} from {rules_file}: {s.command_type} commands "
            f"{self.commands.topic_name} from joint_commands_in; events on {self.events.topic_name}"
        )

    _now = clock_seconds  # self._now(): the node's clock in seconds

    def _on_set_parameters(self, parameters) -> SetParametersResult:
        """Refuse ``use_sim_time`` at run time: the clock the staleness is judged on is fixed, as every parameter."""
        for parameter in parameters:
            if parameter.name == "use_sim_time":
                return SetParametersResult(
                    successful=False, reason="use_sim_time is fixed once the reflex is up (set it at start)"
                )
        return SetParametersResult(successful=True)

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
        for i, cumulant, path in self.signals[topic]:
            try:
                value = cumulant.apply(path.resolve(msg))
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
        if self.state.stopped and not 0.0 <= time.monotonic() - self.sent_at < self.hold_period_s:
            self._send_hold()  # a silent operator cannot leave a goal in force

    def decide(self, resend: bool = True) -> None:
        """Update the rules; publish an event per switch, and re-send the last command after one."""
        now, was_stopped = self._now(), self.state.stopped
        stalled = self.clock_guard.stalled(now, time.monotonic())
        if stalled and not self.clock_stalled:
            self.counts["clock_stalls"] += 1
            self.get_logger().error(
                f"the clock has not advanced for {self.rule_set.stale_after_s:g} s of steady time (at {now:.3f} s): "
                "every input is stale"
            )
        elif self.clock_stalled and not stalled:
            self.get_logger().info("the clock advances again")
        self.clock_stalled = stalled
        changes = self.state.decide(now, clock_stalled=stalled)
        if self.state.stopped and not was_stopped:
            self.get_logger().warning(f"stale input for rules {self.state.stale}: fail-safe stop, every joint held")
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
        if resend and any(c.on for c in changes) and not self.state.stopped:
            # What earlier commands left in force at the robot (the shoulder, when the last named the elbow).
            exclude = self.last[0].names if self.last is not None else ()
            present = self.present.known(now)
            for out in self.state.restricted(changes, present, now=now, stale_s=self.command_stale_s, exclude=exclude):
                self.commands.publish(self.form.write(out))
                self.sent_at = time.monotonic()
                self.counts["commands"] += 1
                self.counts["scaled"] += 1

    def _send(self, command, msg) -> None:
        now = self._now()
        outputs = self.state.outputs(command, self.present.known(now), now=now)
        if outputs.held:
            return self._publish_hold(outputs, msg, "commands")
        if not outputs.commands:
            self.counts["unsent"] += 1
            self.get_logger().warning(
                "no fresh joint_states: a position goal is not forwarded", throttle_duration_sec=5.0
            )
            return
        (out,) = outputs.commands
        self.commands.publish(self.form.write(out, msg))
        self.sent_at = time.monotonic()
        self.counts["commands"] += 1
        if not all(np.array_equal(getattr(out, f), getattr(command, f)) for f in command.fields):
            self.counts["scaled"] += 1

    def _send_hold(self) -> None:
        self._publish_hold(self.state.hold_all(self.present.known(self._now())), None, "held")

    def _publish_hold(self, outputs: Outputs, msg, count: str) -> None:
        """Send a hold of every known joint; a joint it cannot hold (no present position) is counted and named."""
        for out in outputs.commands:
            self.commands.publish(self.form.write(out, msg))
        if outputs.commands:  # counted by message, as a listener receives them
            self.sent_at = time.monotonic()
            self.counts[count] += len(outputs.commands)
            if self.state.stopped and count == "commands":
                self.counts["stopped"] += len(outputs.commands)
        if outputs.unheld:
            self.counts["unheld"] += 1
            self.get_logger().warning(
                f"joints {list(outputs.unheld)} not held: no fresh joint_states for their position",
                throttle_duration_sec=5.0,
            )
        if not outputs.commands and count == "commands":
            self.counts["unsent"] += 1

    def _health(self) -> Health:
        return rules_health(self.state, self.rule_set, self.counts, clock_stalled=self.clock_stalled)


def main(args=None) -> int:
    return run_node(Reflex, args)


if __name__ == "__main__":
    sys.exit(main())
