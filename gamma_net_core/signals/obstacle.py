"""A hard stop inside a joint's range: the hazard a reflex learns to avoid.

A region ``[low, high]`` (rad) of one joint that the joint cannot enter, as a rigid obstacle
or a mechanical stop would block it. Arriving at its edge, the joint stops dead (position held
at the edge, velocity 0); while the servo's goal still pushes into it, the servo's torque rises
toward its stall torque with a first-order lag (the velocity loop winding up against the stop),
and the time spent so is counted as contact. Leaving the edge (the goal no longer pushing
into it) ends the contact and the torque returns to the load model's.

:class:`ObstacleContact` holds one joint's contact state and is stepped after each servo step,
so the servo emulator and the offline arm simulation meet the same stop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: XM430-W350 stall torque at 12 V, N m (ROBOTIS e-manual): what a servo pushing into a stop reaches.
STALL_TORQUE_NM = 4.1
#: Edge tolerance, rad: a joint this close to an edge, pushing into it, is in contact.
EDGE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Obstacle:
    """A region of one joint's range that the joint cannot enter.

    Attributes:
      low, high: rad; the blocked interval (low < high).
      stall_torque: N m the servo's torque rises toward while it pushes into the stop.
      rise_s: s; time constant of that rise (and of its fall once the push ends).
    """

    low: float
    high: float
    stall_torque: float = STALL_TORQUE_NM
    rise_s: float = 0.1

    def __post_init__(self) -> None:
        for name in ("low", "high", "stall_torque", "rise_s"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"obstacle {name} must be finite; got {getattr(self, name)!r}")
        if not self.low < self.high:
            raise ValueError(f"obstacle low {self.low!r} must be below high {self.high!r}")
        if self.stall_torque <= 0 or self.rise_s <= 0:
            raise ValueError(
                f"obstacle stall_torque and rise_s must be positive; got {self.stall_torque!r}, {self.rise_s!r}"
            )


class ObstacleContact:
    """One joint meeting an :class:`Obstacle`: stops it, and counts contact time and contacts.

    Usage, after each servo step of ``dt`` seconds::

        position, velocity = contact.step(before, position, velocity, push=goal_velocity, dt=dt)
        if contact.in_contact:
            effort = contact.torque

    Attributes:
      in_contact: whether the joint is at an edge with its goal pushing into the obstacle.
      torque: N m, signed (positive pushes toward higher positions); meaningful in contact.
      contact_s: total seconds in contact.
      contacts: number of contacts begun.
      peak_torque: largest |torque| reached in contact, N m.
    """

    def __init__(self, obstacle: Obstacle) -> None:
        self.obstacle = obstacle
        self.in_contact = False
        self.torque = 0.0
        self.contact_s = 0.0
        self.contacts = 0
        self.peak_torque = 0.0
        self._edge: float | None = None  # the edge the joint rests on, if any

    def step(self, before: float, position: float, velocity: float, *, push: float, dt: float) -> tuple[float, float]:
        """Apply the stop to one servo step; return the joint's (position rad, velocity rad/s).

        Args:
          before: position at the start of the step, rad.
          position, velocity: where the unobstructed step took the joint, rad and rad/s.
          push: the servo's goal velocity, rad/s (position mode: gain x position error); its
            sign says which way the servo pushes.
          dt: the step's length, s.
        """
        low, high = self.obstacle.low, self.obstacle.high
        edge = None
        if before <= low + EDGE_TOLERANCE and position > low:
            edge = low  # arriving from below (or resting at the lower edge)
        elif before >= high - EDGE_TOLERANCE and position < high:
            edge = high
        if edge is not None:
            position, velocity = edge, 0.0
        pushing = edge is not None and (push > 0 if edge == low else push < 0)
        if pushing and not self.in_contact:
            self.contacts += 1
            self.torque = 0.0
        self.in_contact = pushing
        if pushing:
            target = math.copysign(self.obstacle.stall_torque, push)
            self.torque += (target - self.torque) * -math.expm1(-dt / self.obstacle.rise_s)
            self.contact_s += dt
            self.peak_torque = max(self.peak_torque, abs(self.torque))
        else:
            self.torque = 0.0
        return position, velocity

    def counters(self) -> dict:
        """Contact time (s), contacts, peak torque (N m) and whether in contact now, as plain data."""
        return {
            "in_contact": self.in_contact,
            "contact_s": self.contact_s,
            "contacts": self.contacts,
            "peak_torque": self.peak_torque,
            "low": self.obstacle.low,
            "high": self.obstacle.high,
        }
