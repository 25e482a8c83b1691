"""Which joints a Γ-net sees and predicts, and which JointState messages it may learn from.

The offline reader of bags and the online predictor node both pass each JointState
message's plain fields through one :class:`JointSelector`: joints are found by name
(whatever their order, however many other joints the message carries), the inputs are
normalized to [0, 1], and the cumulant is taken (the paper predicts the shoulder's speed,
the absolute value of its velocity). A message that cannot be used is answered with a
:class:`Skip` naming why, counted by kind, and never reaches a learner.

Time is judged here too, so that a bag read offline and the same bag played to the node
are cut into the same episodes from the same messages. Against the last sample's stamp:

- a step back of at most ``max_gap`` s is a bad message (a late or misstamped reading):
  skipped and counted as ``stamp_backwards``;
- a jump back of more than ``max_gap`` s is a replay restart (a bag played again): the
  sample is used and starts a new episode;
- a step forward of more than ``max_gap`` s is a pause: the sample starts a new episode.

Usage::

    selector = JointSelector(load_config(JointsConfig, "config/arm.yaml", "predictor", "joints"))
    result = selector.select(stamp=t, names=msg.name, position=msg.position,
                             velocity=msg.velocity, effort=msg.effort)
    if isinstance(result, Skip):
        ...  # result.reason, result.detail; selector.skips counts them
    else:
        ...  # result.stamp, result.inputs, result.cumulant
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gamma_net_core.config import setting, validate

NANOSECONDS = 1_000_000_000
#: s between samples (forward, or back) beyond which the stream starts a new episode.
DEFAULT_MAX_GAP = 1.0
#: The JointState arrays a joint's signal can come from.
FIELDS = ("position", "velocity", "effort")


def stamp_seconds(sec, nanosec):
    """Seconds from a ROS stamp's (sec, nanosec); every reader and writer here converts this one way."""
    return sec + nanosec * 1e-9


def values_by_name(names: Sequence[str], values: Sequence[float], wanted: Sequence[str]) -> np.ndarray | None:
    """``values`` of the joints ``wanted``, in that order; None if one is missing or the lengths differ.

    For nodes that need raw joint values rather than a learner's sample (e.g. the scripted
    operator reading shoulder and elbow positions from JointState).
    """
    if len(values) != len(names):
        return None
    where = {name: i for i, name in enumerate(names)}
    if any(joint not in where for joint in wanted):
        return None
    return np.array([values[where[joint]] for joint in wanted], dtype=np.float64)


@dataclass(frozen=True)
class JointsConfig:
    """The Γ-net's inputs and cumulant, by joint name (defaults: the paper's robot-arm study)."""

    input_joints: tuple[str, ...] = setting(
        ("shoulder", "elbow"), "joints whose signals are the inputs (paper: shoulder and elbow positions)"
    )
    input_fields: tuple[str, ...] = setting(
        ("position", "position"), "which signal of each input joint (paper: positions)", choices=FIELDS
    )
    input_low: tuple[float, ...] = setting(
        (-1.4, 1.1), "value of each input mapped to 0, in its units (rad for positions)"
    )
    input_high: tuple[float, ...] = setting(
        (-0.1, 2.3), "value of each input mapped to 1 (beyond the range inputs are clipped)"
    )
    cumulant_joint: str = setting("shoulder", "joint whose signal is predicted (paper: the shoulder)")
    cumulant_field: str = setting("velocity", "which signal of that joint (paper: velocity)", choices=FIELDS)
    cumulant_absolute: bool = setting(True, "predict its magnitude (paper: the shoulder's speed)")

    def __post_init__(self) -> None:
        validate(self)
        n = len(self.input_joints)
        for name in ("input_fields", "input_low", "input_high"):
            if len(getattr(self, name)) != n:
                raise ValueError(
                    f"JointsConfig.{name} has {len(getattr(self, name))} values for {n} input_joints "
                    f"{list(self.input_joints)}"
                )
        names = (*self.input_joints, self.cumulant_joint)
        if not all(isinstance(j, str) and j for j in names):
            raise ValueError(f"JointsConfig: joint names must be non-empty strings; got {list(names)}")
        pairs = list(zip(self.input_joints, self.input_fields))
        if len(set(pairs)) != len(pairs):
            raise ValueError(f"JointsConfig: an input is listed twice in {pairs}")
        for joint, low, high in zip(self.input_joints, self.input_low, self.input_high):
            if not low < high:
                raise ValueError(f"JointsConfig: input {joint!r} has input_low {low} not below input_high {high}")

    @property
    def cumulant_name(self) -> str:
        """The cumulant as a Prediction message names it, e.g. ``|shoulder.velocity|``."""
        signal = f"{self.cumulant_joint}.{self.cumulant_field}"
        return f"|{signal}|" if self.cumulant_absolute else signal


class SkipReason(str, enum.Enum):
    """Why a JointState message was not used."""

    NON_FINITE = "non_finite"  # a NaN or infinite stamp, input or cumulant
    LENGTH_MISMATCH = "length_mismatch"  # a non-empty position/velocity/effort whose length differs from name's
    MISSING_JOINT = "missing_joint"  # a selected joint is not among the names
    DUPLICATE_JOINT = "duplicate_joint"  # a selected joint is named twice: which value is meant is unknown
    EMPTY_FIELD = "empty_field"  # the velocity (or position, effort) array is empty but a selected signal needs it
    STAMP_BACKWARDS = "stamp_backwards"  # stamped earlier than the last used, by max_gap or less


@dataclass(frozen=True)
class Skip:
    """A message not used: why, and a detail naming the value (for a throttled warning)."""

    reason: SkipReason
    detail: str


@dataclass(frozen=True)
class JointSample:
    """One usable message, ready for a learner."""

    stamp: float  # s
    inputs: np.ndarray  # [n_inputs] float64 in [0, 1]
    cumulant: float  # in the signal's units (rad/s for a velocity)
    episode_start: bool = False  # nothing may be learned across from the previous sample


class SkipCounts:
    """How many messages were skipped, by kind (every kind present, zeros included)."""

    def __init__(self) -> None:
        self._counts = dict.fromkeys(SkipReason, 0)

    def add(self, reason: SkipReason) -> None:
        self._counts[reason] += 1

    def __getitem__(self, reason: SkipReason | str) -> int:
        return self._counts[SkipReason(reason)]

    @property
    def total(self) -> int:
        return sum(self._counts.values())

    def as_dict(self) -> dict[str, int]:
        """``{kind: count}`` with the kinds' string values, for JSON and diagnostics."""
        return {reason.value: count for reason, count in self._counts.items()}

    def __repr__(self) -> str:
        return f"SkipCounts({self.as_dict()})"


_LAYOUT_CACHE_SIZE = 64


class JointSelector:
    """Selects the configured joints from JointState messages' plain fields, or says why it cannot.

    Args:
      config: the joints selected.
      max_gap: s; a stamp further than this from the last sample's, back or forward, starts an
        episode; a step back of no more than this is skipped (see the module's docstring).

    Attributes:
      config: the joints selected.
      max_gap: s, as given.
      accepted: messages turned into samples.
      skips: messages skipped, by kind.
      episodes: samples that started an episode (the first, restarts and pauses).
      last_stamp: s, the stamp of the last sample (None before the first, or after :meth:`reset`).
    """

    def __init__(self, config: JointsConfig, *, max_gap: float = DEFAULT_MAX_GAP) -> None:
        if not (isinstance(max_gap, (int, float)) and math.isfinite(max_gap) and max_gap > 0):
            raise ValueError(f"max_gap must be a positive number of seconds; got {max_gap!r}")
        self.config = config
        self.max_gap = float(max_gap)
        self.accepted = 0
        self.episodes = 0
        self.skips = SkipCounts()
        self.last_stamp: float | None = None
        self._low = np.asarray(config.input_low, dtype=np.float64)
        self._span = np.asarray(config.input_high, dtype=np.float64) - self._low
        self._wanted = (*config.input_joints, config.cumulant_joint)
        self._labels = [f"{j}.{f}" for j, f in zip(config.input_joints, config.input_fields)]
        self._labels.append(f"{config.cumulant_joint}.{config.cumulant_field}")
        self._needed = sorted({*config.input_fields, config.cumulant_field}, key=FIELDS.index)
        # Messages from one source repeat one name list: look each list up once.
        self._layouts: dict[tuple[str, ...], tuple[int, ...] | Skip] = {}

    def reset(self) -> None:
        """Forget the last stamp: the next message starts a new episode (e.g. a bag playing again)."""
        self.last_stamp = None

    def _layout(self, names: Sequence[str]) -> tuple[int, ...] | Skip:
        key = tuple(names)
        layout = self._layouts.get(key)
        if layout is None:
            layout = self._find(key)
            if len(self._layouts) >= _LAYOUT_CACHE_SIZE:
                self._layouts.clear()
            self._layouts[key] = layout
        return layout

    def _find(self, names: tuple[str, ...]) -> tuple[int, ...] | Skip:
        where: dict[str, int] = {}
        duplicated = set()
        for i, name in enumerate(names):
            if name in where:
                duplicated.add(name)
            where[name] = i
        for joint in self._wanted:
            if joint not in where:
                return Skip(SkipReason.MISSING_JOINT, f"joint {joint!r} is not among the names {list(names)}")
            if joint in duplicated:
                return Skip(SkipReason.DUPLICATE_JOINT, f"joint {joint!r} is named more than once in {list(names)}")
        return tuple(where[j] for j in self._wanted)

    def _skip(self, reason: SkipReason, detail: str) -> Skip:
        self.skips.add(reason)
        return Skip(reason, detail)

    def select(
        self,
        *,
        stamp: float,
        names: Sequence[str],
        position: Sequence[float] = (),
        velocity: Sequence[float] = (),
        effort: Sequence[float] = (),
    ) -> JointSample | Skip:
        """A sample from one JointState message, or why it cannot be used (counted in :attr:`skips`).

        Args:
          stamp: s, the message's time (header stamp, or arrival time).
          names, position, velocity, effort: the message's arrays (any sequences; numpy or array.array).

        Returns:
          a :class:`JointSample`, or a :class:`Skip` with its reason.
        """
        c = self.config
        if not math.isfinite(stamp):
            return self._skip(SkipReason.NON_FINITE, f"stamp is {stamp!r}")
        arrays = {"position": position, "velocity": velocity, "effort": effort}
        n = len(names)
        for field, values in arrays.items():
            if len(values) not in (0, n):
                return self._skip(SkipReason.LENGTH_MISMATCH, f"{field} has {len(values)} values for {n} names")
        layout = self._layout(names)
        if isinstance(layout, Skip):
            self.skips.add(layout.reason)
            return layout
        for field in self._needed:
            if len(arrays[field]) == 0:
                return self._skip(SkipReason.EMPTY_FIELD, f"{field} is empty but selected joints need it")
        raw = [float(arrays[field][i]) for field, i in zip(c.input_fields, layout)]
        cumulant = float(arrays[c.cumulant_field][layout[-1]])
        for label, value in zip(self._labels, (*raw, cumulant)):
            if not math.isfinite(value):
                return self._skip(SkipReason.NON_FINITE, f"{label} is {value!r}")
        last = self.last_stamp
        if last is not None and last - self.max_gap <= stamp < last:
            return self._skip(
                SkipReason.STAMP_BACKWARDS,
                f"stamp {stamp!r} s is earlier than the last used, {last!r} s, by no more than max_gap "
                f"{self.max_gap:g} s",
            )
        # Further back is a replay restart, further forward a pause: either way a new episode.
        episode_start = last is None or abs(stamp - last) > self.max_gap
        self.last_stamp = stamp
        self.accepted += 1
        self.episodes += episode_start
        inputs = np.clip((np.array(raw) - self._low) / self._span, 0.0, 1.0)
        return JointSample(
            stamp=stamp,
            inputs=inputs,
            cumulant=abs(cumulant) if c.cumulant_absolute else cumulant,
            episode_start=episode_start,
        )
