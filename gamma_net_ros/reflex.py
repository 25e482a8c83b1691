"""Node: fixed responses driven by predictions, in the command path (``joint_commands_in`` -> ``joint_commands``).

    ros2 run gamma_net_ros teleop --ros-args --params-file config/arm.yaml -r joint_commands:=joint_commands_in
    ros2 run gamma_net_ros reflex --ros-args --params-file config/reflex.yaml
    ros2 topic echo /reflex/events

It sits between teleop and the driver, as a safety limiter does: every ``sensor_msgs/JointState``
command on ``joint_commands_in`` goes out on ``joint_commands`` with the velocities of the joints
named by the rules that are on scaled (or zeroed). The rules (``rules_file``;
:mod:`gamma_net_core.reflex.rules`) read the Horde's predictions (``horde/predictions``, a
PredictionArray) or, with ``source: signal``, the question's cumulant in the present message of
its topic; a rule ``from: predictor`` reads the predictor node's ``predictions`` (Prediction)
instead. Every rule
switching on or off is a ``gamma_net_msgs/ReflexEvent`` on ``reflex/events``, and a switch
re-sends the last command at once, so the response does not wait for teleop's next one.

Fail-safe: a rule whose input is older than the file's ``stale_after_s`` (or never came)
applies its ``fail_safe``: ``hold`` (as it was), ``pass`` (off) or ``stop`` (every command
zero); which rules are stale is on ``/diagnostics``. A rules file naming an unknown question,
readout or joint, a timescale outside the learner's range, or missing a key, is refused at
start in one line (exit 1).
"""

from __future__ import annotations

import pathlib
import sys

from gamma_net_msgs.msg import Prediction, PredictionArray, ReflexEvent
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from sensor_msgs.msg import JointState

from gamma_net_core.horde.questions import load_questions
from gamma_net_core.reflex.evaluation import ReflexState, prediction_value
from gamma_net_core.reflex.rules import load_rules
from gamma_net_ros.conversions import clock_seconds
from gamma_net_ros.diagnostics import OK, WARN, Diagnostics, Health
from gamma_net_ros.horde_topics import check_field, message_class
from gamma_net_ros.node_main import run_node
from gamma_net_ros.params import declare
from gamma_net_ros.paths import config_file


class Reflex(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("reflex", **kwargs)
        rules_path = declare(self, "rules_file", "", "the rules YAML ('' = config/reflex_rules.yaml)", read_only=True)
        questions_path = declare(
            self, "questions_file", "", "the Horde's questions YAML ('' = config/horde.yaml)", read_only=True
        )
        self.joint_names = list(
            declare(self, "joint_names", ["shoulder", "elbow"], "the commanded joints", read_only=True)
        )
        rate = declare(
            self,
            "decide_rate_hz",
            100.0,
            "rules re-checked this often without input, 1/s",
            low=1.0,
            high=1000.0,
            read_only=True,
        )
        self.command_stale_s = declare(
            self,
            "command_stale_s",
            0.5,
            "a switch re-sends the last command if this recent, s",
            low=0.0,
            high=60.0,
            read_only=True,
        )
        period = declare(
            self, "diagnostics_period_s", 1.0, "period of /diagnostics, s", low=0.1, high=60.0, read_only=True
        )
        spec = load_questions(pathlib.Path(questions_path).expanduser() if questions_path else config_file("horde"))
        rules_file = pathlib.Path(rules_path).expanduser() if rules_path else config_file("reflex_rules")
        self.rule_set = load_rules(rules_file, questions=spec, joint_names=self.joint_names)
        self.state = ReflexState(self.rule_set)
        self.commands = self.create_publisher(JointState, "joint_commands", 10)
        self.events = self.create_publisher(ReflexEvent, "reflex/events", 10)
        self.create_subscription(JointState, "joint_commands_in", self.on_command, 10)
        rules = self.rule_set.rules
        self.predicted = [i for i, r in enumerate(rules) if r.source == "prediction" and r.origin == "horde"]
        self.predictor = [i for i, r in enumerate(rules) if r.origin == "predictor"]
        if self.predicted:
            self.create_subscription(PredictionArray, "horde/predictions", self.on_predictions, 10)
        if self.predictor:
            self.create_subscription(Prediction, "predictions", self.on_prediction, 10)
        questions = {q.name: q for q in spec.questions}
        self.signals: dict[str, list] = {}  # topic -> [(rule index, cumulant, its field path)]
        for i, rule in enumerate(rules):
            if rule.source == "signal":
                cumulant = questions[rule.question].cumulant
                check_field(message_class(cumulant.type), cumulant.field)
                self.signals.setdefault(cumulant.topic, []).append((i, cumulant, cumulant.path))
        for topic, readers in self.signals.items():
            cls = message_class(readers[0][1].type)
            self.create_subscription(cls, topic, lambda msg, t=topic: self.on_signal(t, msg), qos_profile_sensor_data)
        self.last_command: JointState | None = None
        self.last_command_at = -float("inf")
        self.counts = {"commands": 0, "scaled": 0, "stopped": 0, "events": 0}
        self.create_timer(1.0 / rate, self.decide)
        self.health = Diagnostics(self, "rules", self._health, period=period)
        self.get_logger().info(
            f"{len(rules)} rules {[r.name for r in rules]} from {rules_file}: {self.commands.topic_name} "
            f"from joint_commands_in; events on {self.events.topic_name}"
        )

    _now = clock_seconds  # self._now(): the node's clock in seconds

    # -- inputs

    def on_predictions(self, msg: PredictionArray) -> None:
        now = self._now()
        for i in self.predicted:
            value = prediction_value(
                self.rule_set.rules[i],
                questions=msg.questions,
                gammas=msg.gammas,
                values=msg.values,
                readouts=msg.readouts,
                readout_values=msg.readout_values,
            )
            if value is not None:
                self.state.observe(i, value, now)
        self.decide()

    def on_prediction(self, msg: Prediction) -> None:
        now = self._now()
        for i in self.predictor:
            value = prediction_value(
                self.rule_set.rules[i], questions=[msg.cumulant], gammas=msg.gammas, values=msg.values
            )
            if value is not None:
                self.state.observe(i, value, now)
        self.decide()

    def on_signal(self, topic: str, msg) -> None:
        now = self._now()
        for i, cumulant, path in self.signals[topic]:
            try:
                value = cumulant.apply(path.resolve(msg))
            except (ValueError, IndexError, KeyError) as exc:
                self.get_logger().warning(f"{topic}: {exc}", throttle_duration_sec=5.0)
                continue
            self.state.observe(i, value, now)
        self.decide()

    def on_command(self, msg: JointState) -> None:
        self.last_command, self.last_command_at = msg, self._now()
        self.decide(resend=False)  # a command never goes out on a decision older than itself
        self._send(msg)

    # -- decisions

    def decide(self, resend: bool = True) -> None:
        """Update the rules; publish an event per switch, and re-send the last command after one."""
        now = self._now()
        was_stopped = self.state.stopped
        changes = self.state.decide(now)
        if self.state.stopped != was_stopped:
            if self.state.stopped:
                self.get_logger().warning(f"stale input for rules {self.state.stale}: fail-safe stop, every joint held")
            else:
                self.get_logger().info("inputs fresh again: commands pass through the rules")
        for change in changes:
            event = ReflexEvent(rule=change.rule.name, value=change.value, active=change.on, reason=change.reason)
            event.header.stamp = self.get_clock().now().to_msg()
            self.events.publish(event)
            self.counts["events"] += 1
            level = self.get_logger().warning if change.reason == "stale" else self.get_logger().info
            level(f"rule {change.rule.name} {'on' if change.on else 'off'} ({change.reason}, value {change.value:.4g})")
        if resend and changes and self.last_command is not None and now - self.last_command_at <= self.command_stale_s:
            self._send(self.last_command)

    def _send(self, msg: JointState) -> None:
        if len(msg.velocity) != len(msg.name):
            self.commands.publish(msg)  # not a velocity command: a position goal passes as it came
            return
        velocity = self.state.apply(msg.name, msg.velocity)
        out = JointState(header=msg.header, name=msg.name, position=msg.position, effort=msg.effort)
        out.velocity = velocity.tolist()
        self.commands.publish(out)
        self.counts["commands"] += 1
        if self.state.stopped:
            self.counts["stopped"] += 1
        elif list(out.velocity) != list(msg.velocity):
            self.counts["scaled"] += 1

    def _health(self) -> Health:
        stale = self.state.stale
        values = {"active": ",".join(self.state.active) or "none", "stale": ",".join(stale) or "none", **self.counts}
        if stale:
            fail_safes = sorted({r.fail_safe for r in self.rule_set.rules if r.name in stale})
            return Health(WARN, f"stale input for rules {stale}: fail-safe {'/'.join(fail_safes)}", values)
        return Health(OK, f"{len(self.state.active)} of {len(self.rule_set.rules)} rules on", values)


def main(args=None) -> int:
    return run_node(Reflex, args)


if __name__ == "__main__":
    sys.exit(main())
