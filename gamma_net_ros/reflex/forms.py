"""The command forms the reflex filters: one small adapter each, a message in and out of a JointCommand.

``command_type`` picks one (each robot's command path speaks one):

- ``joint_state``: ``sensor_msgs/JointState`` by name, its position and/or velocity (and effort).
- ``float64_multi_array``: ``std_msgs/Float64MultiArray``, as ros2_control's forward command
  controllers take it: ``data[i]`` is joint ``joints[i]``'s ``interface`` (position, velocity or
  effort).
- ``joint_trajectory``: ``trajectory_msgs/JointTrajectory`` (joint_trajectory_controller's topic).
- ``twist`` / ``twist_stamped``: ``geometry_msgs/Twist`` or ``TwistStamped`` (a mobile base's
  ``cmd_vel``); the "joints" are the axes ``linear.x`` ... ``angular.z``, held at zero velocity.

``read`` validates (ValueError on a malformed message); ``write`` builds the outgoing message from
the filtered command and the incoming one (its header and timing kept), or from none (a hold).
Each form's ``holding`` (:class:`~gamma_net_core.reflex.holds.HoldRule`) says how it holds: a
JointState path every field its commands gave (from the first command on), a forward controller its
interface over its joints, a trajectory one point of positions and zero velocities, a base zero
velocity on every axis.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence

from gamma_net_core.horde.registry import Registry
from gamma_net_core.reflex.commands import TWIST_AXES, JointCommand, joint_command
from gamma_net_core.reflex.holds import HoldRule

#: The command forms by ``command_type``: each a class with ``message``, ``holding``, ``read`` and ``write``
#: (:func:`register_form`); docs/extending.md adds one.
COMMAND_FORMS: Registry[type] = Registry("command form")
INTERFACES = ("position", "velocity", "effort")
#: s; a hold point's time_from_start where the incoming trajectory gives none: reaching the present
#: position asks for no motion, so any short time will do.
HOLD_TIME_S = 0.1


def register_form(command_type: str):
    """Class decorator: the class is the reflex's form for ``command_type`` (a name not taken yet).

    The class is built as ``cls(joint_names, interface)`` and has ``names`` (the joints or axes it
    commands), ``cls`` (the message class), ``holding`` (a :class:`~gamma_net_core.reflex.holds.HoldRule`),
    ``read(msg) -> JointCommand`` (ValueError on a malformed message) and ``write(command, msg=None)``.
    """

    def add(cls):
        return COMMAND_FORMS.add(command_type, cls)

    return add


def _message(name: str):
    package, _, cls = name.partition("/")
    try:
        return getattr(importlib.import_module(f"{package}.msg"), cls)
    except ImportError:
        raise ImportError(f"command_type needs {package} (pip package ros-{package.replace('_', '-')})") from None


def _rows(command: JointCommand, field: str) -> list[float]:
    values = getattr(command, field)
    return [] if values is None else values[0].tolist()


@register_form("joint_state")
class JointStateForm:
    message = "sensor_msgs/JointState"
    # The fields its commands gave (none before the first: nothing the reflex passed is in force yet).
    holding = HoldRule((), fields_from_commands=True)

    def __init__(self, joints: Sequence[str], interface: str) -> None:
        self.names, self.cls = tuple(joints), _message(self.message)

    def read(self, msg) -> JointCommand:
        fields = {f: [list(getattr(msg, f))] for f in ("position", "velocity", "effort") if len(getattr(msg, f))}
        if not fields:
            raise ValueError(f"malformed command: no position, velocity or effort for {list(msg.name)}")
        return joint_command(msg.name, **fields)

    def write(self, command: JointCommand, msg=None):
        out = self.cls(name=list(command.names))
        if msg is not None:
            out.header = msg.header
        out.position, out.velocity, out.effort = (_rows(command, f) for f in ("position", "velocity", "effort"))
        return out


@register_form("float64_multi_array")
class MultiArrayForm:
    message = "std_msgs/Float64MultiArray"

    def __init__(self, joints: Sequence[str], interface: str) -> None:
        self.names, self.interface, self.cls = tuple(joints), interface, _message(self.message)
        self.holding = HoldRule((interface,), layout=True)  # the controller takes every joint or none

    def read(self, msg) -> JointCommand:
        return joint_command(self.names, **{self.interface: [list(msg.data)]})

    def write(self, command: JointCommand, msg=None):
        out = self.cls(data=_rows(command, self.interface))
        if msg is not None:
            out.layout = msg.layout
        return out


@register_form("twist")
class TwistForm:
    message = "geometry_msgs/Twist"
    holding = HoldRule(("velocity",), layout=True)

    def __init__(self, joints: Sequence[str], interface: str) -> None:
        self.names, self.cls = TWIST_AXES, _message(self.message)

    def _twist(self, msg):
        return msg

    def read(self, msg) -> JointCommand:
        twist = self._twist(msg)
        values = [getattr(getattr(twist, part), axis) for part, _, axis in (a.partition(".") for a in self.names)]
        return joint_command(self.names, velocity=[values])

    def write(self, command: JointCommand, msg=None):
        out = self.cls()
        if msg is not None and hasattr(msg, "header"):
            out.header = msg.header
        twist = self._twist(out)
        for name, value in zip(self.names, _rows(command, "velocity")):
            part, _, axis = name.partition(".")
            setattr(getattr(twist, part), axis, float(value))
        return out


@register_form("twist_stamped")
class TwistStampedForm(TwistForm):
    message = "geometry_msgs/TwistStamped"

    def _twist(self, msg):
        return msg.twist


@register_form("joint_trajectory")
class TrajectoryForm:
    message = "trajectory_msgs/JointTrajectory"
    holding = HoldRule(("position", "velocity"), motion_alone=False)  # a point needs its positions

    def __init__(self, joints: Sequence[str], interface: str) -> None:
        self.names, self.cls = tuple(joints), _message(self.message)
        self.point = _message("trajectory_msgs/JointTrajectoryPoint")

    def read(self, msg) -> JointCommand:
        fields = {}
        for field, key in (("position", "positions"), ("velocity", "velocities"), ("acceleration", "accelerations")):
            rows = [list(getattr(p, key)) for p in msg.points]
            given = [bool(r) for r in rows]
            if any(given) and not all(given):
                raise ValueError(f"malformed trajectory: {key} given in some points, not in others")
            if rows and all(given):
                fields[field] = rows
        if msg.points and not fields:
            raise ValueError("malformed trajectory: points without positions or velocities")
        if any(len(p.effort) for p in msg.points):
            raise ValueError("malformed trajectory: effort in a trajectory is not filtered; send none")
        return joint_command(msg.joint_names, **fields)

    def write(self, command: JointCommand, msg=None):
        out = self.cls(joint_names=list(command.names))
        same = msg is not None and len(msg.points) == command.points
        if same:  # a hold keeps a zero stamp: it starts now, not when the goal it replaces was stamped
            out.header = msg.header
        for k in range(command.points):
            point = self.point()
            for field, key in (
                ("position", "positions"),
                ("velocity", "velocities"),
                ("acceleration", "accelerations"),
            ):
                values = getattr(command, field)
                if values is not None:
                    setattr(point, key, values[k].tolist())
            if same:
                point.time_from_start = msg.points[k].time_from_start
            else:  # a hold: one point, when the incoming first point was due (or soon)
                first = msg.points[0].time_from_start if msg is not None and msg.points else None
                seconds = first.sec + first.nanosec * 1e-9 if first is not None else 0.0
                seconds = seconds if seconds > 0 else HOLD_TIME_S
                point.time_from_start.sec, point.time_from_start.nanosec = int(seconds), int(seconds % 1 * 1e9)
            out.points.append(point)
        return out


def make_form(kind: str, interface: str, joint_names):
    """The adapter for ``command_type`` ``kind``; ValueError naming a bad value (one line, at start)."""
    if kind not in COMMAND_FORMS:
        raise ValueError(f"parameter command_type must be one of {COMMAND_FORMS.names()}; got {kind!r}")
    if interface not in INTERFACES:
        raise ValueError(f"parameter interface must be one of {list(INTERFACES)}; got {interface!r}")
    if not isinstance(joint_names, list) or not joint_names or not all(isinstance(n, str) and n for n in joint_names):
        raise ValueError(f"parameter joint_names must be a non-empty list of joint names; got {joint_names or []!r}")
    return COMMAND_FORMS[kind](joint_names, interface)
