"""Field paths: a numeric field of any message, named by a path parsed once and resolved per message.

A path is dot-separated attributes, each optionally followed by indexes, optionally wrapped in
an aggregate over a sequence::

    voltage                      msg.voltage
    linear_acceleration.z        msg.linear_acceleration.z
    position[0]                  msg.position[0]
    velocity[elbow]              msg.velocity[msg.name.index("elbow")]
    status[0].values[1].value    nested messages and sequences
    min(ranges[0:5])             the smallest of the first five beams of a LaserScan
    mean(ranges[-5:])            the mean of the last five
    max(ranges)                  the largest of them all
    argmin(ranges[100:260])      where the smallest is, counted from the slice's first element

``[k]`` (an integer, negative from the end) indexes a sequence; ``[word]`` indexes a sequence
by the position of ``word`` in the ``name`` list of the message holding that sequence (a
JointState's ``velocity[elbow]``); ``[a:b]`` is a slice as Python's (either end may be left out
or negative), and only under an aggregate, as the last index (a slice reads many numbers; a
state input or a cumulant is one). The aggregates are a registry (:data:`AGGREGATES`):

- ``min``, ``max``, ``mean``: of the slice's readings, in the field's units.
- ``argmin``, ``argmax``: the position of the smallest (largest) reading within the slice, 0 at
  the slice's first element, the first one on ties: a beam number relative to the slice, so the
  same path means the same beam whatever the scan's length (``ranges[-5:]``'s 0 is the fifth
  beam from the end). Its bearing is ``angle_min + (first + position) * angle_increment``.

An aggregate skips the elements that have no reading (NaN), and is NaN only when none has one;
an empty slice is refused (ValueError naming it).

REP 117 (ranges): ``+inf`` is "nothing within range_max" and ``-inf`` "too close", NaN "no
reading". A field named ``ranges`` beside ``range_min``/``range_max`` (LaserScan), or ``range``
beside ``min_range``/``max_range`` (Range), reads ``+inf`` as the message's maximum and ``-inf``
as its minimum, element by element before any aggregate; ``inf_as`` and ``minus_inf_as`` (given
to :meth:`FieldPath.resolve`, from the questions file) name the value instead, on any field.
Elsewhere an infinity is returned as it is, and NaN always: the caller decides (the Horde stops
what reads it, naming the field; the reflex takes it as no news).

Resolution reads attributes only, so it works on rclpy messages and on rosbags' deserialized
ones alike, and this module imports no ROS.

Usage::

    speed = parse_field("velocity[elbow]")        # ValueError for a malformed path
    value = speed.resolve(joint_state)            # float; ValueError naming path and type

A bool field reads as 0.0 or 1.0.
"""

from __future__ import annotations

import functools
import math
import numbers
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gamma_net_core.horde.registry import Registry

_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)((?:\[[^\[\]]+\])*)$")
_INDEX = re.compile(r"\[([^\[\]]+)\]")
_INTEGER = re.compile(r"-?[0-9]+$")
_SLICE = re.compile(r"(-?[0-9]+)?\s*:\s*(-?[0-9]+)?$")
_AGGREGATE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)$")

#: REP 117: a range field's name -> the names of (its minimum, its maximum) beside it in the message.
RANGE_LIMITS = {"ranges": ("range_min", "range_max"), "range": ("min_range", "max_range")}

#: Aggregates over a sequence: name -> f(readings [n], float64, NaN where no reading, not all NaN) -> float.
AGGREGATES: Registry[Callable[[np.ndarray], float]] = Registry("aggregate")


def register_aggregate(name: str):
    """Register ``f(readings) -> float`` as the aggregate ``name`` (a decorator).

    ``readings`` is a non-empty float64 array, infinities already read per REP 117, with NaN
    where an element has no reading (never all NaN): use NaN-aware reductions.
    """

    def add(function: Callable[[np.ndarray], float]) -> Callable[[np.ndarray], float]:
        return AGGREGATES.add(name, function)

    return add


register_aggregate("min")(lambda v: float(np.nanmin(v)))
register_aggregate("max")(lambda v: float(np.nanmax(v)))
register_aggregate("mean")(lambda v: float(np.nanmean(v)))
register_aggregate("argmin")(lambda v: float(np.nanargmin(v)))
register_aggregate("argmax")(lambda v: float(np.nanargmax(v)))


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
    """A parsed field path.

    Attributes:
      path: the path as written.
      steps: ("attr", name), ("index", k), ("name", word) or ("slice", (start, stop)), in order.
      aggregate: the aggregate's name (in :data:`AGGREGATES`), or None for a single number.
    """

    path: str
    steps: tuple[tuple[str, str | int | tuple[int | None, int | None]], ...]
    aggregate: str | None = None

    def resolve(self, message, *, inf_as: float | None = None, minus_inf_as: float | None = None) -> float:
        """The field's value in ``message``, as a float, infinities read per REP 117.

        Args:
          message: any attribute-style message object (rclpy, rosbags, a dataclass).
          inf_as: what ``+inf`` reads as (None: the message's range maximum, where it has one).
          minus_inf_as: what ``-inf`` reads as (None: the message's range minimum, where it has one).

        Returns:
          The value; bools read as 0.0 / 1.0; NaN where nothing has a reading.

        Raises:
          ValueError: naming the path and the message type, when an attribute or a name does not
            exist, an index is out of range, a slice is empty, or the value is not a number (or,
            under an aggregate, not a sequence of numbers).
        """
        value = message
        holder = message
        owner, name = message, ""  # the message whose attribute was read last, and that attribute
        for kind, key in self.steps:
            if kind == "attr":
                if not hasattr(value, key) or key.startswith("_"):
                    where = "" if value is message else f" in {message_type_name(value)}"
                    raise self._error(message, f"no field {key!r}{where}")
                holder = owner = value
                name = key
                value = getattr(value, key)
                continue
            if isinstance(value, (str, bytes)) or not hasattr(value, "__getitem__") or not hasattr(value, "__len__"):
                raise self._error(message, f"cannot index {type(value).__name__} with [{_key_text(kind, key)}]")
            if kind == "slice":
                value = value[slice(*key)]
                if len(value) == 0:
                    raise self._error(message, f"the slice [{_key_text(kind, key)}] is empty")
                continue
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
        low, high = _limits(owner, name)
        low = low if minus_inf_as is None else minus_inf_as
        high = high if inf_as is None else inf_as
        if self.aggregate is not None:
            return self._aggregate(message, value, low, high)
        if isinstance(value, bool):
            return 1.0 if value else 0.0
        if not isinstance(value, numbers.Real):
            raise self._error(message, f"is a {message_type_name(value)}, not a number")
        value = float(value)
        if value == math.inf and high is not None:
            return high
        if value == -math.inf and low is not None:
            return low
        return value

    def _aggregate(self, message, value, low: float | None, high: float | None) -> float:
        if isinstance(value, (str, bytes)) or not hasattr(value, "__len__"):
            raise self._error(message, f"{self.aggregate}() needs a sequence; this is a {message_type_name(value)}")
        if len(value) == 0:
            raise self._error(message, f"{self.aggregate}() of an empty sequence")
        try:
            readings = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            raise self._error(message, f"{self.aggregate}() needs numbers; the sequence holds other things") from None
        if readings.ndim != 1:
            raise self._error(message, f"{self.aggregate}() needs a sequence of numbers")
        if high is not None:
            readings = np.where(readings == np.inf, high, readings)
        if low is not None:
            readings = np.where(readings == -np.inf, low, readings)
        if np.isnan(readings).all():
            return math.nan  # no element has a reading: neither has the aggregate
        return AGGREGATES[self.aggregate](readings)

    def check(self, message) -> None:
        """Raise the ValueError :meth:`resolve` would raise on this message (a first message's check)."""
        self.resolve(message)

    def _error(self, message, what: str) -> ValueError:
        return ValueError(f"field {self.path!r} of {message_type_name(message)}: {what}")


def _key_text(kind: str, key) -> str:
    if kind != "slice":
        return str(key)
    start, stop = key
    return f"{'' if start is None else start}:{'' if stop is None else stop}"


def _limits(owner, name: str) -> tuple[float | None, float | None]:
    """REP 117: (the range minimum, the range maximum) beside a range field, each None where unknown."""
    names = RANGE_LIMITS.get(name)
    if names is None:
        return None, None
    out = []
    for limit in names:
        value = getattr(owner, limit, None)
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
        out.append(float(value) if ok else None)
    return out[0], out[1]


def parse_field(path: str) -> FieldPath:
    """Parse a field path once (see the module docstring for the syntax); the same path, the same object.

    Raises:
      ValueError: naming the path and the part that is malformed (an unknown aggregate names
        the known ones).
    """
    if not isinstance(path, str) or not path.strip():
        raise ValueError(f"field path must be a non-empty string; got {path!r}")
    return _parse(path)


@functools.lru_cache(maxsize=4096)
def _parse(path: str) -> FieldPath:
    text = path.strip()
    aggregate = None
    if (match := _AGGREGATE.match(text)) is not None:
        aggregate = match.group(1)
        if aggregate not in AGGREGATES:
            raise ValueError(f"field path {text!r}: unknown aggregate {aggregate!r}; known: {AGGREGATES.names()}")
        text = match.group(2).strip()
        if not text:
            raise ValueError(f"field path {path.strip()!r}: {aggregate}() of nothing (name a sequence inside)")
    steps: list[tuple[str, str | int | tuple[int | None, int | None]]] = []
    for segment in text.split("."):
        match = _SEGMENT.match(segment)
        if match is None:
            raise ValueError(f"field path {path.strip()!r}: malformed part {segment!r} (expected name or name[index])")
        steps.append(("attr", match.group(1)))
        for index in _INDEX.findall(match.group(2)):
            index = index.strip()
            if steps[-1][0] == "slice":
                raise ValueError(f"field path {path.strip()!r}: a slice must be the last index")
            if _INTEGER.match(index):
                steps.append(("index", int(index)))
            elif (bounds := _SLICE.match(index)) is not None:
                start, stop = (None if b is None else int(b) for b in bounds.groups())
                steps.append(("slice", (start, stop)))
            elif index:
                steps.append(("name", index))
            else:
                raise ValueError(f"field path {path!r}: empty index in {segment!r}")
    if any(kind == "slice" for kind, _ in steps[:-1]):
        raise ValueError(f"field path {path.strip()!r}: a slice must be the last index")
    if steps[-1][0] == "slice" and aggregate is None:
        raise ValueError(
            f"field path {path.strip()!r}: a slice reads many numbers; wrap it in an aggregate, one of "
            f"{AGGREGATES.names()} (e.g. min({text}))"
        )
    return FieldPath(path=path.strip(), steps=tuple(steps), aggregate=aggregate)
