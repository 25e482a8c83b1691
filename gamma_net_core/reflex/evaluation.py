"""Evaluating reflex rules: hysteresis, minimum hold, stale inputs, and the commands that result.

Pure logic on numbers and times (seconds on any one clock), so it is tested without ROS::

    reflex = ReflexState(rule_set)
    reflex.observe(i, value, now)            # a new value of rule i's input, arrived at ``now``
    changes = reflex.decide(now)             # [Change] rules switched since the last decide
    velocity = reflex.apply(names, velocity) # the commands, scaled by the rules that are on

:func:`prediction_value` reads a rule's value out of a Horde's published predictions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

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
    """

    def __init__(self, rule_set: RuleSet) -> None:
        self.rule_set = rule_set
        self.status = [RuleStatus() for _ in rule_set.rules]
        self.stopped = False  # a stale rule whose fail-safe is stop holds every joint still

    def observe(self, index: int, value: float, now: float) -> None:
        """A new value of rule ``index``'s input (a non-finite one is ignored: it says nothing)."""
        if math.isfinite(value):
            status = self.status[index]
            status.value, status.seen = float(value), float(now)

    def decide(self, now: float) -> list[Change]:
        """Update every rule at time ``now``; return a :class:`Change` for each that switched.

        A rule switches on when its value passes the threshold, and off once the value is back
        past the release level and it has been on at least ``hold_s``. While its input is stale
        (never seen, or older than ``stale_after_s``) its fail-safe decides: ``hold`` keeps it
        as it is, ``pass`` switches it off, ``stop`` switches it off and stops every joint.
        """
        changes = []
        stopped = False
        for rule, status in zip(self.rule_set.rules, self.status):
            status.stale = now - status.seen > self.rule_set.stale_after_s
            on, reason = status.on, ""
            if status.stale:
                if rule.fail_safe in ("pass", "stop"):
                    on, reason = False, "stale"
                stopped = stopped or rule.fail_safe == "stop"
            elif not status.on and rule.is_met(status.value):
                on, reason = True, "threshold"
            elif status.on and rule.is_released(status.value) and now - status.since >= rule.hold_s:
                on, reason = False, "release"
            if on != status.on:
                status.on = on
                if on:
                    status.since = now
                changes.append(Change(rule, on, status.value, reason))
        self.stopped = stopped
        return changes

    def apply(self, names: Sequence[str], velocity) -> np.ndarray:
        """Velocity commands for joints ``names`` after the responses of the rules that are on.

        Joints no rule names pass unchanged; while a stale rule's fail-safe is ``stop``, every
        command is zero.
        """
        out = np.array(velocity, dtype=np.float64)
        if self.stopped:
            return np.zeros_like(out)
        for rule, status in zip(self.rule_set.rules, self.status):
            response = rule.response
            if not status.on or response.event:
                continue
            for i, name in enumerate(names):
                if name not in response.joints:
                    continue
                moving = out[i] > 0 if response.direction == "positive" else out[i] < 0
                if response.direction == "both" or moving:
                    out[i] *= response.scale
        return out

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
    """
    if rule.question not in questions:
        return None
    q = list(questions).index(rule.question)
    if rule.readout is not None:
        if rule.readout not in readouts:
            return None
        r = list(readouts).index(rule.readout)
        return float(readout_values[q * len(readouts) + r])
    gammas = np.asarray(gammas, dtype=np.float64)
    if gammas.size == 0:
        return None
    row = np.asarray(values, dtype=np.float64)[q * gammas.size : (q + 1) * gammas.size]
    taus = 1.0 / (1.0 - gammas)
    order = np.argsort(taus)
    taus, scaled = taus[order], (row * (1.0 - gammas))[order]
    tolerance = 1e-9 * rule.tau
    if rule.tau < taus[0] - tolerance or rule.tau > taus[-1] + tolerance:
        return None
    return float(np.interp(rule.tau, taus, scaled))
