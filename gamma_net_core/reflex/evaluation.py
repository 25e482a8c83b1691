"""Evaluating reflex rules: hysteresis, minimum hold, stale inputs, and the commands that result.

Pure logic on numbers and times (seconds on any one clock), so it is tested without ROS::

    reflex = ReflexState(rule_set)
    reflex.observe(i, value, now)            # a new value of rule i's input, arrived at ``now``
    changes = reflex.decide(now)             # [Change] rules switched since the last decide
    out = reflex.filter(command, present)    # a JointCommand after the responses (None: not forwarded)
    velocity = reflex.apply(names, velocity) # velocity commands only, as the reflex study steps them
    sent = reflex.outputs(command, present)  # what the node sends for a command: filtered, or every joint held

What ``filter`` guarantees, whatever it is given (property-tested in tests/test_reflex_safety.py):
the output is finite; a joint a rule that is on names moves toward the rule's direction at most
``scale`` times as much as commanded (a velocity, acceleration or effort toward it is scaled; a
position goal's step from the present position toward it is scaled); while a stale rule's
fail-safe is ``stop``, or for a command with a non-finite value (its sender is broken: nothing in
it is trusted), every joint of the command is held (:meth:`ReflexState.hold`); while the stop
names joints (``{stop: [linear.x]}``), those joints of the command are held and the others go
through the rules as they would without it. A position goal whose present position is unknown
cannot be scaled or held: ``filter`` returns None (not forwarded), never the goal.

What the node sends is :meth:`ReflexState.outputs`: the command filtered, or, while stopped and
for a command not trusted, the hold of every joint the reflex knows (:mod:`.holds`), not only
the command's; while a stop names joints, the command filtered and the hold of the stop's joints
it does not name (property-tested in tests/test_reflex_axes.py). :meth:`ReflexState.decide`
takes whether the clock is trusted: a stalled clock
(:class:`~gamma_net_core.reflex.holds.ClockGuard`) leaves every input stale.

:func:`prediction_value` reads a rule's value out of a Horde's published predictions.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from gamma_net_core.horde.reading import PublishedPredictions
from gamma_net_core.reflex.commands import MOTION, JointCommand, present_of, toward
from gamma_net_core.reflex.holds import HoldRule, InForce, KnownJoints, hold_commands
from gamma_net_core.reflex.rules import Rule, RuleSet


@dataclass
class RuleStatus:
    """One rule's state.

    Attributes:
      on: whether the response is applied.
      since: when it last switched on, s.
      value: the latest input value (NaN before the first).
      seen: when that value arrived, s (-inf before the first).
      stale: whether the input was stale at the last decision.
    """

    on: bool = False
    since: float = -math.inf
    value: float = math.nan
    seen: float = -math.inf
    stale: bool = True


@dataclass(frozen=True)
class Outputs:
    """What goes out for one command.

    Attributes:
      commands: the commands to send, in order (none: a position goal not forwarded).
      held: they are the hold of every joint (stopped, or the command not trusted), not the
        command filtered.
      unheld: joints the hold could not hold (a position goal's, without its present position).
      holds: while a stop names joints, the holds of those the command does not name, sent after
        ``commands`` (the robot may still be moving them on an earlier command).
    """

    commands: list[JointCommand]
    held: bool = False
    unheld: tuple[str, ...] = ()
    holds: list[JointCommand] = dataclasses.field(default_factory=list)


@dataclass(frozen=True)
class Change:
    """A rule switching: ``on`` or off, at ``value``, for ``reason`` (threshold, release or stale)."""

    rule: Rule
    on: bool
    value: float
    reason: str


class ReflexState:
    """The rules of a :class:`RuleSet` and their state; decides which responses apply when.

    Args:
      rule_set: the parsed rules.
      joints: the joints a hold covers (default: those commands name, in the fields commands
        give, as a JointState path holds).
    """

    def __init__(self, rule_set: RuleSet, joints: KnownJoints | None = None) -> None:
        self.rule_set = rule_set
        self.joints = joints or KnownJoints((), HoldRule((), fields_from_commands=True))
        self.in_force = InForce()  # what went out, by joint: a rule switching on restricts it all
        self.status = [RuleStatus() for _ in rule_set.rules]
        self.stopped = False  # a stale rule whose fail-safe is stop holds its joints still
        self.stop_joints: tuple[str, ...] | None = None  # while stopped, the joints held (None: every joint)
        self.held: dict[str, float] = {}  # the positions a stop holds, latched at its start (no drift)

    def observe(self, index: int, value: float, now: float) -> None:
        """A new value of rule ``index``'s input (a non-finite one is ignored: it says nothing)."""
        if math.isfinite(value):
            status = self.status[index]
            status.value, status.seen = float(value), float(now)

    def decide(self, now: float, *, clock_stalled: bool = False, stop: bool = False) -> list[Change]:
        """Update every rule at time ``now``; return a :class:`Change` for each that switched.

        A rule switches on when its value passes the threshold, and off once the value is back
        past the release level and it has been on at least ``hold_s``. While its input is stale
        (never seen, older than ``stale_after_s``, or seen after ``now``: the clock stepped back;
        or every input, while ``clock_stalled``: a clock that stood still says nothing of age)
        its fail-safe decides: ``hold`` keeps it
        as it is, ``pass`` switches it off, ``stop`` switches it off and stops its
        ``stop_joints`` (every joint, or those it names: :attr:`stop_joints` is their union).
        ``stop`` stops every joint whatever the rules say (an input not to be trusted: a stranger
        publishing on it).
        """
        changes = []
        stop_all, stopping = stop, {}
        for rule, status in zip(self.rule_set.rules, self.status):
            # A value from the future (the clock stepped back) is not fresh either: the fail-safe acts.
            fresh = 0.0 <= now - status.seen <= self.rule_set.stale_after_s
            status.stale = clock_stalled or not fresh
            on, reason = status.on, ""
            if status.stale:
                if rule.fail_safe in ("pass", "stop"):
                    on, reason = False, "stale"
                if rule.fail_safe == "stop" and rule.stop_joints is None:
                    stop_all = True
                elif rule.fail_safe == "stop":
                    stopping.update(dict.fromkeys(rule.stop_joints))
            elif not status.on and rule.is_met(status.value):
                on, reason = True, "threshold"
            elif status.on and rule.is_released(status.value) and now - status.since >= rule.hold_s:
                on, reason = False, "release"
            if on != status.on:
                status.on = on
                if on:
                    status.since = now
                changes.append(Change(rule, on, status.value, reason))
        self.stopped = stop_all or bool(stopping)
        self.stop_joints = None if stop_all or not stopping else tuple(stopping)
        if not self.stopped:
            self.held.clear()
        elif self.stop_joints is not None:  # a joint free again is latched afresh when next held
            self.held = {n: x for n, x in self.held.items() if n in stopping}
        return changes

    @property
    def stops_all(self) -> bool:
        """Whether a stop holds every joint (not only those a ``{stop: [...]}`` fail-safe names)."""
        return self.stopped and self.stop_joints is None

    def apply(self, names: Sequence[str], velocity) -> np.ndarray:
        """Velocity commands for joints ``names`` after the responses of the rules that are on.

        Joints no rule names pass unchanged; while a stale rule's fail-safe is ``stop``, or if a
        command is not finite, every command is zero (only the stop's joints, where it names them).
        """
        command = JointCommand(tuple(names), velocity=np.array([velocity], dtype=np.float64))
        return self.filter(command).velocity[0]

    def filter(self, command: JointCommand, present: Mapping[str, float] | None = None) -> JointCommand | None:
        """``command`` after the rules that are on and the fail-safe (the guarantees: module docstring).

        Args:
          command: a validated command.
          present: the joints' present positions (fresh), or None where not known.

        Returns:
          The command to send, or None where it has a position goal that cannot be decided
          (a rule or the fail-safe concerns the joint and its present position is not known).
        """
        if self.stops_all or not command.is_finite():
            return self.hold(command, present)
        fields = {f: getattr(command, f).copy() for f in command.fields}
        here = present_of(command.names, present) if "position" in fields else None
        for rule, status in zip(self.rule_set.rules, self.status):
            response = rule.response
            if not status.on or response.event:
                continue
            for j, name in enumerate(command.names):
                if name not in response.joints:
                    continue
                for field in MOTION:
                    if field in fields:
                        column = fields[field][:, j]
                        column[toward(column, response.direction)] *= response.scale
                if "position" in fields:
                    if here is None:
                        return None
                    step = fields["position"][:, j] - here[j]
                    moving = toward(step, response.direction)
                    step[moving] *= response.scale
                    fields["position"][:, j] = np.where(moving, here[j] + step, fields["position"][:, j])
        if self.stopped and not self._hold_columns(command.names, fields, present):
            return None
        return command.with_fields(**fields)

    def _hold_columns(self, names: Sequence[str], fields: dict[str, np.ndarray], present) -> bool:
        """Hold, in place, the columns of ``fields`` of the joints the stop names; False where a position is not known.

        Every point keeps the held joint still (no motion, its latched position), so a trajectory
        moving the free joints still goes out whole.
        """
        held = [j for j, name in enumerate(names) if name in (self.stop_joints or ())]
        if not held:
            return True
        for f in MOTION:
            if f in fields:
                fields[f][:, held] = 0.0
        if "position" in fields:
            known = {**{n: x for n, x in (present or {}).items() if math.isfinite(x)}, **self.held}
            if any(names[j] not in known for j in held):
                return False
            for j in held:
                self.held.setdefault(names[j], known[names[j]])
                fields["position"][:, j] = self.held[names[j]]
        return True

    def hold(self, command: JointCommand, present: Mapping[str, float] | None = None) -> JointCommand | None:
        """Every joint of ``command`` held: one point, no motion, position goals at the present position.

        While stopped, the positions held are the ones at the stop's start, so a hold re-sent does
        not follow a drift. Returns None where the command has a position goal and a present
        position is not known.
        """
        names = command.names
        fields: dict[str, np.ndarray | None] = {f: None for f in command.fields}
        for field in fields:
            fields[field] = np.zeros((1, len(names)))
        if "position" in fields:
            known = {**(present or {}), **self.held}
            here = present_of(names, known)
            if here is None:
                return None
            if self.stopped:
                self.held.update((n, float(x)) for n, x in zip(names, here) if n not in self.held)
            fields["position"] = here[np.newaxis, :]
        return command.with_fields(**fields)

    def outputs(
        self, command: JointCommand, present: Mapping[str, float] | None = None, *, now: float | None = None
    ) -> Outputs:
        """What to send for ``command``: filtered (:meth:`filter`), or every known joint held (:meth:`hold_all`).

        The command's joints and fields join :attr:`joints`; one that goes out at ``now`` is in force
        (:attr:`in_force`) until a hold. While a stop names joints, those the command does not name
        are held as well (:attr:`Outputs.holds`).
        """
        self.joints.saw_command(command)
        if self.stops_all or not command.is_finite():
            return self.hold_all(present)
        out = self.filter(command, present)
        if out is not None and now is not None:
            self.in_force.saw(command, now)
        if not self.stopped:
            return Outputs([] if out is None else [out])
        self.in_force.drop(self.stop_joints)  # what went out to them was their hold
        rest = self.hold_stopped(present, exclude=command.names)
        return Outputs([] if out is None else [out], unheld=rest.unheld, holds=rest.commands)

    def restricted(
        self, changes: Sequence[Change], present: Mapping[str, float] | None, *, now: float, stale_s: float,
        exclude: Sequence[str] = (),
    ) -> list[JointCommand]:  # fmt: skip
        """What rules switching on must re-send beyond the last command (whose joints are ``exclude``).

        Each joint a rule that switched on names whose command in force (:meth:`InForce.commands`)
        the rules now restrict, at its restricted value: a stop (no motion left) however old the
        command, a slowed motion only if at most ``stale_s`` old (re-sent, an older one would live
        on past its receiver's timeout). A joint the rules leave as commanded is not re-sent (that
        would only keep an old command alive), nor a position goal without its present position.
        """
        names = [n for c in changes if c.on for n in c.rule.response.joints if n not in exclude]
        recent = {n for c in self.in_force.commands(names, now=now, stale_s=stale_s) for n in c.names}
        out = []
        for command in self.in_force.commands(names, now=now, stale_s=math.inf):
            filtered = self.filter(command, present)
            if filtered is None:
                continue
            same = np.all([getattr(filtered, f) == getattr(command, f) for f in command.fields], axis=(0, 1))
            motion = [getattr(filtered, f) != 0 for f in filtered.fields if f in MOTION]
            stopped = ~np.any(motion, axis=(0, 1)) if motion else np.zeros(len(command.names), dtype=bool)
            kept = stopped | ("position" in command.fields) | np.isin(command.names, list(recent))
            changed = [j for j in range(len(command.names)) if not same[j] and kept[j]]
            if changed:
                fields = {f: getattr(filtered, f)[:, changed] for f in filtered.fields}
                out.append(JointCommand(tuple(command.names[j] for j in changed), **fields))
        return out

    def hold_all(self, present: Mapping[str, float] | None = None) -> Outputs:
        """Every joint the reflex knows held (:func:`~gamma_net_core.reflex.holds.hold_commands`).

        While stopped, positions are latched at the stop's start (a hold re-sent does not follow
        a drift); a joint first known during the stop is latched where it is then.
        """
        known = {**{n: x for n, x in (present or {}).items() if math.isfinite(x)}, **self.held}
        if self.stopped and "position" in self.joints.fields:
            self.held.update((n, known[n]) for n in self.joints.names if n in known and n not in self.held)
        commands, unheld = hold_commands(self.joints, known)
        self.in_force.clear()
        return Outputs(commands, held=True, unheld=unheld)

    def hold_stopped(self, present: Mapping[str, float] | None = None, *, exclude: Sequence[str] = ()) -> Outputs:
        """The hold of the joints the stop names (every joint: :meth:`hold_all`), less ``exclude``.

        A form whose messages name every joint (a Twist, a forward controller's array) cannot
        leave one out: with no command to take the free joints' values from, its hold is every
        joint's (a base's free axes at zero, as its own ``cmd_vel`` timeout would leave them).
        """
        if self.stop_joints is None or (self.joints.rule.layout and not exclude):
            return self.hold_all(present)
        names = [n for n in self.joints.names if n in self.stop_joints and n not in exclude]
        if self.joints.rule.layout or not names:
            return Outputs([], held=True)
        known = {**{n: x for n, x in (present or {}).items() if math.isfinite(x)}, **self.held}
        if "position" in self.joints.fields:
            self.held.update((n, known[n]) for n in names if n in known and n not in self.held)
        commands, unheld = hold_commands(self.joints.only(names), known)
        self.in_force.drop(names)
        return Outputs(commands, held=True, unheld=unheld)

    @property
    def active(self) -> list[str]:
        """Names of the rules that are on."""
        return [r.name for r, s in zip(self.rule_set.rules, self.status) if s.on]

    @property
    def stale(self) -> list[str]:
        """Names of the rules whose input was stale at the last decision."""
        return [r.name for r, s in zip(self.rule_set.rules, self.status) if s.stale]


def prediction_value(
    rule: Rule,
    *,
    questions: Sequence[str],
    gammas: Sequence[float],
    values: Sequence[float],
    readouts: Sequence[str] = (),
    readout_values: Sequence[float] = (),
) -> float | None:
    """A prediction rule's value from a Horde's published predictions (a PredictionArray's fields).

    For a timescale: ``(1 - gamma) V_gamma``, in the cumulant's units, interpolated linearly
    in tau between the two published timescales around the rule's (exact where it is published).

    Returns:
      The value, or None where the predictions do not hold it (the question or readout not
      published, or the rule's tau outside the published timescales).

    Raises:
      ValueError: a malformed message (:class:`~gamma_net_core.horde.reading.PublishedPredictions`).
    """
    published = PublishedPredictions(questions, gammas, values, readouts, readout_values)
    return rule_value(rule, published)


def rule_value(rule: Rule, published: PublishedPredictions) -> float | None:
    """A prediction rule's value from validated predictions (None where they do not hold it)."""
    if rule.question not in published.questions:
        return None
    if rule.readout is not None:
        if rule.readout not in published.readouts:
            return None
        return published.readout(rule.question, rule.readout)
    try:
        return published.value(rule.question, tau=rule.tau, scaled=True)[0]
    except ValueError:  # outside the published timescales: no value, never a guess
        return None
