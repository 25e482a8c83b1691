"""Choosing an alert's threshold from data: events, alarms, lead times and false alarms.

An alert compares a prediction with a threshold: (1 - gamma) V at one timescale tau, the
weighted average of the signal over about the next tau steps, in the signal's units
(:mod:`gamma_net_core.horde.reading`, ``scaled=True``). On a recording, each candidate threshold
is scored against the events the alert is meant to foresee, all on one clock of steps::

    events = crossings(signal, 1.5, direction="above", valid=usable)     # the event onsets
    scores = [score_threshold(prediction, events, h, window=60, direction="above", valid=usable)
              for h in thresholds]

- An **event** is a signal crossing a level: the step where it is past the level and the step
  before was not (both valid). A signal that stays past the level is one event, at its onset.
- An **alarm** is the prediction crossing the threshold the same way: the step where it is past
  the threshold and the step before was not.
- An event is **caught** when an alarm was raised at most ``window`` steps before it (at the
  event's own step included); its **lead** is the time from the earliest such alarm to the event.
- An alarm is **false** when no event follows within ``window`` steps (its own step included).
  An alarm whose window runs past the recording's end with no event yet is left unscored: the
  event may have come after it.

Everything is in steps; :class:`ThresholdScore` converts to seconds and per minute at a rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DIRECTIONS = ("above", "below")


def _past(x: np.ndarray, level: float, direction: str) -> np.ndarray:
    """Where ``x`` is past ``level`` (strictly); NaN never is."""
    with np.errstate(invalid="ignore"):
        return x > level if direction == "above" else x < level


def _check_direction(direction: str) -> None:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {DIRECTIONS}; got {direction!r}")


def crossings(x, level: float, *, direction: str = "above", valid=None, min_gap: int = 0) -> np.ndarray:
    """The steps where ``x`` crosses ``level``: past it there, not past it the step before.

    Args:
      x: [T] a signal (or a prediction) on the clock.
      level: the level, in ``x``'s units.
      direction: ``"above"`` (rises past the level) or ``"below"`` (falls past it).
      valid: [T] bool, the steps that count (e.g. the recording's fresh ticks); a crossing needs
        both its step and the one before valid. Default: where ``x`` is finite.
      min_gap: a debounce, in steps: a crossing fewer than ``min_gap`` steps after the last one kept
        is the same event (a bumper that chatters on contact is one bump, not five).

    Returns:
      [K] int step indices, increasing.
    """
    _check_direction(direction)
    if min_gap < 0:
        raise ValueError(f"min_gap must be >= 0 steps; got {min_gap!r}")
    x = np.asarray(x, dtype=np.float64).ravel()
    ok = np.isfinite(x) if valid is None else np.asarray(valid, dtype=bool).ravel() & np.isfinite(x)
    if ok.shape != x.shape:
        raise ValueError(f"valid has {ok.size} steps, the signal {x.size}")
    past = _past(x, level, direction)
    onsets = np.flatnonzero(past[1:] & ~past[:-1] & ok[1:] & ok[:-1]) + 1
    if min_gap <= 1 or onsets.size < 2:
        return onsets
    kept = [int(onsets[0])]
    for step in onsets[1:]:  # each gap is measured from the last event kept, so a long chatter stays one event
        if step - kept[-1] >= min_gap:
            kept.append(int(step))
    return np.asarray(kept, dtype=onsets.dtype)


@dataclass(frozen=True)
class ThresholdScore:
    """How an alert at one threshold did on a recording (see the module docstring).

    Attributes:
      threshold: the threshold, in the prediction's units.
      events: the events scored.
      caught: the events with an alarm at most ``window`` steps before them.
      leads: [caught] steps from the earliest such alarm to each caught event.
      alarms: the alarms raised.
      false_alarms: the alarms with no event within ``window`` steps after them.
      unscored_alarms: alarms too close to the recording's end to tell (no event followed yet).
      alarm_steps: the valid steps where the prediction is past the threshold.
      valid_steps: the valid steps of the recording (the time watched).
    """

    threshold: float
    events: int
    caught: int
    leads: np.ndarray
    alarms: int
    false_alarms: int
    unscored_alarms: int
    alarm_steps: int
    valid_steps: int

    @property
    def caught_fraction(self) -> float:
        """Events caught / events; NaN without events."""
        return self.caught / self.events if self.events else float("nan")

    @property
    def median_lead_steps(self) -> float:
        """The median lead over the caught events, in steps; NaN when none was caught."""
        return float(np.median(self.leads)) if self.leads.size else float("nan")

    @property
    def alarm_fraction(self) -> float:
        """The fraction of the watched time with the prediction past the threshold."""
        return self.alarm_steps / self.valid_steps if self.valid_steps else float("nan")

    def median_lead_s(self, rate_hz: float) -> float:
        return self.median_lead_steps / rate_hz

    def false_alarms_per_minute(self, rate_hz: float) -> float:
        """False alarms per minute of watched (valid) time; NaN when nothing was watched."""
        minutes = self.valid_steps / rate_hz / 60.0
        return self.false_alarms / minutes if minutes > 0 else float("nan")


def score_threshold(
    prediction, events, threshold: float, *, window: int, direction: str = "above", valid=None
) -> ThresholdScore:
    """Score an alert that raises an alarm where ``prediction`` crosses ``threshold``.

    Args:
      prediction: [T] the compared prediction on the clock ((1 - gamma) V, in the signal's units).
      events: [K] the event steps, increasing (from :func:`crossings`).
      threshold: the alert's threshold.
      window: steps: an alarm at most this long before an event catches it.
      direction: ``"above"``: alarm when the prediction rises past the threshold; ``"below"``.
      valid: [T] bool, the steps that count (default: where the prediction is finite).

    Returns:
      The :class:`ThresholdScore`.
    """
    if not (isinstance(window, (int, np.integer)) and window >= 0):
        raise ValueError(f"window must be a whole number of steps >= 0; got {window!r}")
    prediction = np.asarray(prediction, dtype=np.float64).ravel()
    ok = np.isfinite(prediction) if valid is None else np.asarray(valid, dtype=bool).ravel() & np.isfinite(prediction)
    events = np.asarray(events, dtype=np.int64).ravel()
    if events.size and (np.any(np.diff(events) <= 0) or events[0] < 0 or events[-1] >= prediction.size):
        raise ValueError(f"events must be increasing steps in [0, {prediction.size}); got {events.tolist()}")
    alarms = crossings(prediction, threshold, direction=direction, valid=ok)
    # Each event's earliest alarm in [event - window, event].
    first = np.searchsorted(alarms, events - window, side="left")
    caught = first < alarms.size
    caught[caught] = alarms[first[caught]] <= events[caught]
    leads = events[caught] - alarms[first[caught]]
    # Each alarm's first event in [alarm, alarm + window].
    nxt = np.searchsorted(events, alarms, side="left")
    followed = nxt < events.size
    followed[followed] = events[nxt[followed]] <= alarms[followed] + window
    open_ended = alarms + window > prediction.size - 1
    return ThresholdScore(
        threshold=float(threshold),
        events=int(events.size),
        caught=int(caught.sum()),
        leads=leads,
        alarms=int(alarms.size),
        false_alarms=int((~followed & ~open_ended).sum()),
        unscored_alarms=int((~followed & open_ended).sum()),
        alarm_steps=int((_past(prediction, threshold, direction) & ok).sum()),
        valid_steps=int(ok.sum()),
    )


def score_thresholds(
    prediction, events, thresholds: Sequence[float], *, window: int, direction: str = "above", valid=None
) -> list[ThresholdScore]:
    """:func:`score_threshold` at each of ``thresholds``, in their order."""
    return [score_threshold(prediction, events, h, window=window, direction=direction, valid=valid) for h in thresholds]


#: Quantile levels of the candidate thresholds, from the median towards the tail the alarms are on.
TAIL_FRACTIONS = (0.5, 0.005)


def quantile_thresholds(prediction, n: int, *, direction: str = "above", valid=None) -> np.ndarray:
    """``n`` candidate thresholds at quantiles of the prediction, denser towards its tail.

    An alert is useful where it is rarely on, so the candidates run from the prediction's median
    to its 99.5th percentile (``"below"``: to its 0.5th), at quantile levels whose distance from
    the tail shrinks geometrically; repeated values (a prediction that is often constant) once.

    Args:
      prediction: [T] the compared prediction.
      n: how many candidates (>= 1).
      direction: the alarm's direction.
      valid: [T] bool, the steps that count (default: where the prediction is finite).

    Returns:
      [<= n] increasing thresholds.
    """
    _check_direction(direction)
    if not (isinstance(n, (int, np.integer)) and n >= 1):
        raise ValueError(f"the number of thresholds must be >= 1; got {n!r}")
    x = np.asarray(prediction, dtype=np.float64).ravel()
    ok = np.isfinite(x) if valid is None else np.asarray(valid, dtype=bool).ravel() & np.isfinite(x)
    if not ok.any():
        raise ValueError("no finite prediction to take thresholds from")
    tail = np.geomspace(*TAIL_FRACTIONS, n) if n > 1 else np.array([TAIL_FRACTIONS[0]])
    levels = 1.0 - tail if direction == "above" else tail
    return np.unique(np.quantile(x[ok], levels))
