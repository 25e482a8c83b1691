"""A hold covers the robot, not the last message: the joints the reflex knows and the commands that hold them.

A stop (a rule's fail-safe ``stop``, or a command the reflex cannot trust) must leave no joint
moving, whatever the last command happened to name. :class:`KnownJoints` keeps every joint (or
axis) the robot has as far as the reflex can tell (the configured names, the joints seen on
``joint_states``, every joint a command has named since start) and the fields its commands use;
:func:`hold_commands` builds the commands that hold them all::

    joints = KnownJoints(["shoulder", "elbow"], HoldRule(fields=("velocity",), fields_from_commands=True))
    joints.saw_states(names)             # a well-formed joint_states reading
    joints.saw_command(command)          # a readable command (a JointCommand)
    commands, unheld = hold_commands(joints, positions)

Each hold value is the form's: zero for velocity, acceleration and effort; the present position
for a position goal. A position goal cannot be held where the present position is not known:
such a joint is held by its motion fields alone (zero velocity) in a message of its own, or,
where the form has no motion field (or its receiver takes no point without positions), it is
not held and is named in ``unheld`` (sending it its last goal, or any guess, could move it).
Joints never seen on ``joint_states`` go in a message of their own too: a controller that
refuses a command naming a joint it does not have (ros2_control's joint_trajectory_controller,
this package's driver) then refuses only that message, and a name some sender got wrong cannot
keep the robot's own joints from being held.

:class:`ClockGuard` watches a clock that others drive (``/clock`` under ``use_sim_time``) on a
steady clock: frozen, stopped or stepping back for longer than a limit, it is no clock to time
staleness on.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from gamma_net_core.reflex.commands import FIELDS, MOTION, JointCommand


@dataclass(frozen=True)
class HoldRule:
    """How a command form holds (each form registers its own).

    Attributes:
      fields: the fields every hold gives (a forward controller's interface; a trajectory's
        position and velocity; a twist's velocity; none for a JointState path, whose commands say).
      layout: the form's joints are a fixed layout (a Float64MultiArray's data, a Twist's axes):
        a hold names exactly them, in one message, and no joint joins them.
      fields_from_commands: a hold also gives every field a command has given (a JointState
        path says by its commands whether it moves joints by position or by velocity).
      motion_alone: a joint whose position goal cannot be held (its present position not known)
        is held by its motion fields alone (zero velocity) in a message of its own; False where
        the receiver refuses a message without positions (joint_trajectory_controller refuses a
        point without them unless it integrates), so that message would only be noise.
    """

    fields: tuple[str, ...]
    layout: bool = False
    fields_from_commands: bool = False
    motion_alone: bool = True


class KnownJoints:
    """Every joint (or axis) the reflex knows the robot has, in the order it learnt them, and the fields in use.

    Args:
      names: the configured joints (a form's layout, or ``joint_names``).
      rule: the form's :class:`HoldRule`.
    """

    def __init__(self, names: Iterable[str], rule: HoldRule) -> None:
        self.rule = rule
        self._names: dict[str, None] = dict.fromkeys(names)
        self._fields: set[str] = set(rule.fields)
        self.on_states: set[str] = set()

    @property
    def names(self) -> tuple[str, ...]:
        """Every joint known."""
        return tuple(self._names)

    @property
    def fields(self) -> tuple[str, ...]:
        """The fields a hold gives, in :data:`FIELDS` order."""
        return tuple(f for f in FIELDS if f in self._fields)

    def saw_states(self, names: Iterable[str]) -> None:
        """The joints of a well-formed ``joint_states`` reading (the robot's own joints)."""
        names = [n for n in names if isinstance(n, str) and n]
        self.on_states.update(names)
        self._join(names)

    def saw_command(self, command: JointCommand) -> None:
        """A readable command: its joints and fields are in force at the robot from now on."""
        self._join(command.names)
        if self.rule.fields_from_commands:
            self._fields.update(command.fields)

    def only(self, names: Iterable[str]) -> KnownJoints:
        """Those of the joints known that are in ``names`` (in the order known), with the same fields and hold."""
        keep = set(names)
        out = KnownJoints((n for n in self._names if n in keep), self.rule)
        out._fields, out.on_states = set(self._fields), self.on_states & keep
        return out

    def _join(self, names: Iterable[str]) -> None:
        if not self.rule.layout:
            self._names.update(dict.fromkeys(names))


def hold_commands(
    joints: KnownJoints, positions: Mapping[str, float] | None
) -> tuple[list[JointCommand], tuple[str, ...]]:
    """The commands that hold every joint of ``joints``: one point each, no motion, positions where they are.

    Args:
      joints: the joints known and the form's hold.
      positions: where each joint is (finite values; a joint missing is not known), or None.

    Returns:
      ``(commands, unheld)``: the commands to send, in order (usually one: every joint, seen on
      ``joint_states`` with its position known; then, where any, those never seen there, then
      those whose position is not known, by motion fields alone), and the joints no command
      holds (a position-only form without their present position; a fixed layout with any).
    """
    positions = {n: float(x) for n, x in (positions or {}).items() if math.isfinite(x)}
    fields = joints.fields
    if not fields:  # a path whose commands have said nothing yet: nothing the reflex passed is in force
        return [], ()
    motion = tuple(f for f in fields if f in MOTION) if joints.rule.motion_alone else ()
    needs_position = "position" in fields
    known = lambda name: not needs_position or name in positions  # noqa: E731
    if joints.rule.layout:
        if all(known(n) for n in joints.names):
            return [_hold(joints.names, fields, positions)], ()
        return [], joints.names
    groups: dict[tuple[bool, bool], list[str]] = {}
    for name in joints.names:
        groups.setdefault((not known(name), name not in joints.on_states), []).append(name)
    commands, unheld = [], []
    for key in sorted(groups):  # position known before not; seen on joint_states before not
        names = groups[key]
        given = motion if key[0] else fields
        if given:
            commands.append(_hold(names, given, positions))
        else:
            unheld.extend(names)
    return commands, tuple(unheld)


def _hold(names, fields: tuple[str, ...], positions: Mapping[str, float]) -> JointCommand:
    arrays = {f: np.zeros((1, len(names))) for f in fields}
    if "position" in arrays:
        arrays["position"] = np.array([[positions[n] for n in names]], dtype=np.float64)
    return JointCommand(tuple(names), **arrays)


class InForce:
    """Each joint's last one-point command that went out (as commanded, by field) and when: what the robot is doing.

    A command naming the shoulder and one naming the elbow after it leave both in force at a robot
    that takes partial commands; a rule switching on restricts both, not only the last message.
    """

    def __init__(self) -> None:
        self._last: dict[str, tuple[float, dict[str, float]]] = {}

    def saw(self, command: JointCommand, now: float) -> None:
        """A command that went out at ``now`` (a trajectory of several points replaces a whole trajectory: not kept)."""
        if command.points == 1:
            for j, name in enumerate(command.names):
                self._last[name] = (now, {f: float(getattr(command, f)[0, j]) for f in command.fields})

    def clear(self) -> None:
        """A hold went out: nothing commanded before it is in force."""
        self._last.clear()

    def drop(self, names: Iterable[str]) -> None:
        """A hold of ``names`` went out: nothing commanded to them before it is in force."""
        for name in names:
            self._last.pop(name, None)

    def commands(self, names: Iterable[str], *, now: float, stale_s: float) -> list[JointCommand]:
        """The commands in force for ``names``, one per set of fields.

        A position goal stays in force however old; a motion command only while at most ``stale_s``
        old (past that, its receiver's own timeout is the one to count on).
        """
        groups: dict[tuple[str, ...], list[tuple[str, dict[str, float]]]] = {}
        for name in dict.fromkeys(names):
            if name in self._last:
                at, values = self._last[name]
                if "position" in values or 0.0 <= now - at <= stale_s:
                    groups.setdefault(tuple(values), []).append((name, values))
        return [
            JointCommand(tuple(n for n, _ in members), **{f: np.array([[v[f] for _, v in members]]) for f in fields})
            for fields, members in groups.items()
            if fields
        ]


class ClockGuard:
    """A clock others drive (``/clock``), watched on a steady one: not advancing for too long is staleness.

    Args:
      limit_s: steady seconds the watched clock may stand still (or step back) before it stalls.
    """

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s
        self.last = -math.inf  # the watched clock's last reading
        self.advanced_at: float | None = None  # steady time of its last advance (None: not watched yet)

    def stalled(self, now: float, steady: float) -> bool:
        """Whether the watched clock, reading ``now`` at steady time ``steady``, has stood still past the limit.

        An advance is a reading later than the one before; a reading equal to it (frozen) or
        earlier (stepped back) is none. The first reading starts the watch.
        """
        if self.advanced_at is None or now > self.last:
            self.advanced_at = steady
        self.last = now
        return not 0.0 <= steady - self.advanced_at <= self.limit_s
