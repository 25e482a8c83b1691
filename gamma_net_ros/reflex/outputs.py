"""What the reflex sends on ``joint_commands``, counted as a listener receives it, and what it cannot hold, said.

The node decides (:class:`~gamma_net_core.reflex.evaluation.ReflexState`); :class:`CommandOut`
writes each decision in the node's command form and keeps the counts ``/diagnostics`` shows:
``commands`` (the commands filtered, and holds sent in a command's place), ``held`` (holds sent on
their own: on the timer, after an unreadable command or an error), ``stopped`` (commands answered
by a stop's hold), ``scaled``, ``unsent`` (nothing could go out for a command) and ``unheld``. The
time of the last output is steady time: the hold's re-sends are timed on it.
"""

from __future__ import annotations

import time

import numpy as np
from rclpy.node import Node

from gamma_net_core.reflex.commands import JointCommand
from gamma_net_core.reflex.evaluation import Outputs

COUNTS = ("commands", "held", "scaled", "stopped", "unsent", "unheld")


class CommandOut:
    """The node's ``joint_commands`` publisher in its command ``form``, with ``counts``."""

    def __init__(self, node: Node, form, counts: dict) -> None:
        self.node, self.form, self.counts = node, form, counts
        self.publisher = node.create_publisher(form.cls, "joint_commands", 10)
        self.sent_at = -float("inf")  # steady time of the last output

    def _publish(self, out: JointCommand, msg=None) -> None:
        self.publisher.publish(self.form.write(out, msg))
        self.sent_at = time.monotonic()

    def command(self, outputs: Outputs, command: JointCommand, msg, *, stopped: bool) -> None:
        """What went out for ``command`` (its message ``msg``): filtered, or a hold in its place."""
        if outputs.held:
            return self.hold(outputs, msg, count="commands", stopped=stopped)
        if not outputs.commands:
            self.counts["unsent"] += 1
            self.node.get_logger().warning(
                "no fresh joint_states: a position goal is not forwarded", throttle_duration_sec=5.0
            )
            if outputs.holds or outputs.unheld:
                self.hold(Outputs(outputs.holds, held=True, unheld=outputs.unheld))
            return
        (out,) = outputs.commands
        self._publish(out, msg)
        self.counts["commands"] += 1
        if not all(np.array_equal(getattr(out, f), getattr(command, f)) for f in command.fields):
            self.counts["scaled"] += 1
        if outputs.holds or outputs.unheld:  # a stop of some joints: those the command did not name
            self.hold(Outputs(outputs.holds, held=True, unheld=outputs.unheld))

    def hold(self, outputs: Outputs, msg=None, *, count: str = "held", stopped: bool = False) -> None:
        """A hold of every known joint; a joint it cannot hold (no present position) is counted and named."""
        for out in outputs.commands:
            self._publish(out, msg)
        self.counts[count] += len(outputs.commands)  # by message, as a listener receives them
        if stopped and count == "commands":
            self.counts["stopped"] += len(outputs.commands)
        if outputs.unheld:
            self.counts["unheld"] += 1
            self.node.get_logger().warning(
                f"joints {list(outputs.unheld)} not held: no fresh joint_states for their position",
                throttle_duration_sec=5.0,
            )
        if not outputs.commands and count == "commands":
            self.counts["unsent"] += 1

    def restricted(self, commands: list[JointCommand]) -> None:
        """Commands in force that a rule switching on restricts (:meth:`ReflexState.restricted`)."""
        for out in commands:
            self._publish(out)
            self.counts["commands"] += 1
            self.counts["scaled"] += 1
