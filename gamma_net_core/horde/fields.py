"""Field paths: a numeric field of any message, named by a path parsed once and resolved per message.

A path is dot-separated attributes, each optionally followed by indexes::

    voltage                      msg.voltage
    linear_acceleration.z        msg.linear_acceleration.z
    position[0]                  msg.position[0]
    velocity[elbow]              msg.velocity[msg.name.index("elbow")]
    status[0].values[1].value    nested messages and sequences

``[k]`` (an integer, negative from the end) indexes a sequence; ``[word]`` indexes a sequence
by the position of ``word`` in the ``name`` list of the message holding that sequence (a
JointState's ``velocity[elbow]``). Resolution reads attributes only, so it works on rclpy
messages and on rosbags' deserialized ones alike, and this module imports no ROS.

Usage::

    speed = parse_field("velocity[elbow]")        # ValueError for a malformed path
    value = speed.resolve(joint_state)            # float; ValueError naming path and type

A bool field reads as 0.0 or 1.0; a non-finite float is returned as it is (the caller decides
whether to skip the step).
"""

from __future__ import annotations

import numbers
import re
from dataclasses import dataclass

_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[[^\[\]]+\])*)$")
_INDEX = re.compile(r"\[([^\[\]]+)\]")
_INTEGER = re.compile(r"-?[0-9]+$")


def message_type_name(message) -> str:
    """``pkg/msg/Type`` of an rclpy or rosbags message, else the Python type's name (for error lines)."""
    cls = type(message)
    rosbags_name = getattr(cls, "__msgtype__", None)
    if isinstance(rosbags_name, str):
        return rosbags_name
    parts = cls.__module__.split(".")
    if len(parts) >= 2 and parts[1] in ("msg", "srv", "action"):
        return f"{parts[0]}/{parts[1]}/{cls.__name__}"
    return cls.__name__


def prediction_question(message) -> str:
    """The question a Prediction (or PredictAt reply) names, from a recording of any age.

    The field was called ``cumulant`` before it was renamed ``question``; the wire format did
    not change, but rosbags deserializes a bag by the definition stored in it, so an old
    recording's messages carry ``cumulant``.

    Raises:
      ValueError: ``message`` has neither field.
    """
    for field in ("question", "cumulant"):
        name = getattr(message, field, None)
        if isinstance(name, str):
            return name
    raise ValueError(f"{message_type_name(message)} has neither a 'question' nor a 'cumulant' name")


@dataclass(frozen=True)
class FieldPath:
    """A parsed field path: ``steps`` are ("attr", name), ("index", k) or ("name", word)."""

    path: str
    steps: tuple[tuple[str, str | int], ...]

    def resolve(self, message) -> float:
        """The field's value in ``message``, as a float.

        Args:
          message: any attribute-style message object (rclpy, rosbags, a dataclass).

        Returns:
          The value; bools read as 0.0 / 1.0.

        Raises:
          ValueError: naming the path and the message type, when an attribute or a name does not
            exist, an index is out of range, or the value is not a number.
        """
        value = message
        holder = message
        for kind, key in self.steps:
            if kind == "attr":
                if not hasattr(value, key) or key.startswith("_"):
                    where = "" if value is message else f" in {message_type_name(value)}"
                    raise self._error(message, f"no field {key!r}{where}")
                holder = value
                value = getattr(value, key)
                continue
            if isinstance(value, (str, bytes)) or not hasattr(value, "__getitem__") or not hasattr(value, "__len__"):
                raise self._error(message, f"cannot index {type(value).__name__} with [{key}]")
            if kind == "name":
                names = getattr(holder, "name", None)
                if names is None or isinstance(names, str):
                    raise self._error(message, f"[{key}] needs a 'name' list beside the sequence")
                names = list(names)
                if key not in names:
                    raise self._error(message, f"no {key!r} in name {names}")
                index = names.index(key)
            else:
                index = key
            if not -len(value) <= index < len(value):
                raise self._error(message, f"index {index} out of range for a sequence of {len(value)}")
            holder = value
            value = value[index]
        if isinstance(value, bool):
            return 1.0 if value else 0.0
        if not isinstance(value, numbers.Real):
            raise self._error(message, f"is a {message_type_name(value)}, not a number")
        return float(value)

    def check(self, message) -> None:
        """Raise the ValueError :meth:`resolve` would raise on this message (a first message's check)."""
        self.resolve(message)

    def _error(self, message, what: str) -> ValueError:
        return ValueError(f"field {self.path!r} of {message_type_name(message)}: {what}")


def parse_field(path: str) -> FieldPath:
    """Parse a field path once (see the module docstring for the syntax).

    Raises:
      ValueError: naming the path and the part that is malformed.
    """
    if not isinstance(path, str) or not path.strip():
        raise ValueError(f"field path must be a non-empty string; got {path!r}")
    steps: list[tuple[str, str | int]] = []
    for segment in path.strip().split("."):
        match = _SEGMENT.match(segment)
        if match is None:
            raise ValueError(f"field path {path!r}: malformed part {segment!r} (expected name or name[index])")
        steps.append(("attr", match.group(1)))
        for index in _INDEX.findall(match.group(2)):
            index = index.strip()
            if _INTEGER.match(index):
                steps.append(("index", int(index)))
            elif index:
                steps.append(("name", index))
            else:
                raise ValueError(f"field path {path!r}: empty index in {segment!r}")
    return FieldPath(path=path.strip(), steps=tuple(steps))
