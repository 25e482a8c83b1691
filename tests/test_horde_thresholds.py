"""Events, alarms, lead times and false alarms (gamma_net_core/horde/thresholds.py): hand-computed cases,
and a loop written for clarity as the oracle of the vectorized scoring."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gamma_net_core.horde.thresholds import crossings, quantile_thresholds, score_threshold


def test_crossings_are_the_onsets_past_the_level_with_both_steps_valid():
    x = [0.0, 2.0, 2.0, 0.0, 3.0, 1.0, 5.0]
    assert crossings(x, 1.5).tolist() == [1, 4, 6]  # a run past the level is one crossing, at its start
    assert crossings(x, 1.5, direction="below").tolist() == [3, 5]
    valid = [True, True, True, True, False, True, True]
    assert crossings(x, 1.5, valid=valid).tolist() == [1, 6]  # step 4 is not valid
    assert crossings([0.0, 1.5, 2.0], 1.5).tolist() == [2]  # at the level is not past it
    assert crossings([0.0, np.nan, 2.0], 1.5).tolist() == []  # no crossing out of a gap: its start is unseen
    assert crossings([2.0, 2.0, 0.0], 1.5).tolist() == []  # already past at the first step: no onset seen
    with pytest.raises(ValueError, match="direction must be one of"):
        crossings(x, 1.0, direction="up")


def test_a_threshold_is_scored_on_its_alarms_and_the_events():
    #           0  1  2  3  4  5  6  7  8  9 10 11 12 13 14 15 16 17 18 19
    p = np.array([0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1], dtype=float)
    s = score_threshold(p, [5, 14], 0.5, window=3)
    # alarms at 2, 9, 17; event 5 has alarm 2 in [2, 5]: lead 3; event 14 none in [11, 14]
    assert (s.alarms, s.events, s.caught, s.leads.tolist()) == (3, 2, 1, [3])
    # alarm 2 is followed by event 5; alarm 9 by none in [9, 12]: false; alarm 17's window passes the end
    assert (s.false_alarms, s.unscored_alarms) == (1, 1)
    assert (s.alarm_steps, s.valid_steps) == (6, 20)
    assert s.caught_fraction == 0.5 and s.median_lead_steps == 3.0
    assert s.median_lead_s(10.0) == pytest.approx(0.3)
    assert s.false_alarms_per_minute(10.0) == pytest.approx(30.0)  # one in 2 s
    assert s.alarm_fraction == pytest.approx(0.3)


def test_the_lead_is_from_the_earliest_alarm_in_the_window_and_an_alarm_at_the_event_catches_it():
    p = np.array([0, 0, 0, 1, 0, 1, 1, 0, 0, 0], dtype=float)
    s = score_threshold(p, [6], 0.5, window=4)  # alarms 3 and 5 in [2, 6]
    assert s.leads.tolist() == [3] and s.false_alarms == 0
    s = score_threshold(p, [6], 0.5, window=2)  # only alarm 5 in [4, 6]; alarm 3's [3, 5] has no event
    assert s.leads.tolist() == [1] and s.false_alarms == 1
    s = score_threshold(p, [5], 0.5, window=0)  # alarm and event at the same step: caught, lead 0
    assert s.caught == 1 and s.leads.tolist() == [0]


def test_below_mirrors_above_and_invalid_steps_neither_alarm_nor_count():
    p = -np.array([0, 0, 1, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1], dtype=float)
    s = score_threshold(p, [5, 14], -0.5, window=3, direction="below")
    assert (s.alarms, s.caught, s.false_alarms, s.unscored_alarms) == (3, 1, 1, 1)
    valid = np.ones(20, dtype=bool)
    valid[9] = False  # the false alarm's step is stale: no alarm there, and a step less watched
    s = score_threshold(p, [5, 14], -0.5, window=3, direction="below", valid=valid)
    assert (s.alarms, s.false_alarms, s.valid_steps, s.alarm_steps) == (2, 0, 19, 5)


def test_no_events_and_no_alarms_give_nan_not_a_number_made_up():
    s = score_threshold(np.zeros(10), [], 0.5, window=3)
    assert (s.events, s.caught, s.alarms, s.false_alarms) == (0, 0, 0, 0)
    assert np.isnan(s.caught_fraction) and np.isnan(s.median_lead_steps)
    with pytest.raises(ValueError, match="events must be increasing steps in"):
        score_threshold(np.zeros(10), [3, 3], 0.5, window=3)
    with pytest.raises(ValueError, match="window must be a whole number of steps >= 0; got -1"):
        score_threshold(np.zeros(10), [], 0.5, window=-1)


def test_quantile_thresholds_run_from_the_median_to_the_tail():
    x = np.arange(201.0)
    assert quantile_thresholds(x, 2).tolist() == [100.0, 199.0]  # the 50th and 99.5th percentiles
    assert quantile_thresholds(x, 2, direction="below").tolist() == [1.0, 100.0]
    assert quantile_thresholds(x, 1).tolist() == [100.0]
    levels = quantile_thresholds(x, 12)
    assert levels.size == 12 and np.all(np.diff(levels) > 0) and np.all(np.diff(levels)[1:] <= np.diff(levels)[:-1])
    assert quantile_thresholds(np.ones(50), 12).tolist() == [1.0]  # a constant prediction: one candidate
    assert quantile_thresholds([np.nan, 1.0, 3.0], 1).tolist() == [2.0]  # NaN (unpredicted steps) left out
    with pytest.raises(ValueError, match="no finite prediction"):
        quantile_thresholds([np.nan], 3)


def reference_score(p, events, h, window):
    """The definitions, one alarm and one event at a time."""
    alarms = [t for t in range(1, len(p)) if p[t] > h and not p[t - 1] > h]
    leads = []
    for e in events:
        before = [a for a in alarms if e - window <= a <= e]
        if before:
            leads.append(e - min(before))
    false = unscored = 0
    for a in alarms:
        if not any(a <= e <= a + window for e in events):
            if a + window > len(p) - 1:
                unscored += 1
            else:
                false += 1
    return len(alarms), leads, false, unscored


@settings(max_examples=200, deadline=None)
@given(
    p=st.lists(st.sampled_from([0.0, 1.0, 2.0]), min_size=2, max_size=40),
    event_mask=st.lists(st.booleans(), min_size=40, max_size=40),
    h=st.sampled_from([0.5, 1.5]),
    window=st.integers(0, 6),
)
def test_the_vectorized_scoring_agrees_with_the_definitions(p, event_mask, h, window):
    events = [t for t in range(len(p)) if event_mask[t]]
    s = score_threshold(np.array(p), events, h, window=window)
    alarms, leads, false, unscored = reference_score(p, events, h, window)
    assert (s.alarms, s.leads.tolist(), s.false_alarms, s.unscored_alarms) == (alarms, leads, false, unscored)
    assert s.caught == len(leads) and all(0 <= lead <= window for lead in leads)


def test_a_debounce_keeps_one_event_per_burst_of_chatter():
    # A bumper that chatters on contact: onsets at 2, 4, 6, then a bump of its own at 20.
    x = np.zeros(30)
    x[[2, 4, 6, 20, 21]] = 1.0
    assert crossings(x, 0.5).tolist() == [2, 4, 6, 20]
    assert crossings(x, 0.5, min_gap=5).tolist() == [2, 20]
    assert crossings(x, 0.5, min_gap=4).tolist() == [2, 6, 20]  # 6 is 4 steps after 2: its own event
    assert crossings(x, 0.5, min_gap=0).tolist() == crossings(x, 0.5).tolist()
    with pytest.raises(ValueError, match="min_gap must be >= 0 steps; got -1"):
        crossings(x, 0.5, min_gap=-1)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.booleans(), min_size=2, max_size=80), st.integers(min_value=0, max_value=12))
def test_debounced_events_are_the_onsets_at_least_min_gap_apart_from_the_last_kept(on, min_gap):
    x = np.asarray(on, dtype=np.float64)
    onsets = crossings(x, 0.5).tolist()
    kept = crossings(x, 0.5, min_gap=min_gap).tolist()
    assert set(kept) <= set(onsets) and kept[:1] == onsets[:1]
    assert all(b - a >= min_gap for a, b in itertools.pairwise(kept))
    for step in set(onsets) - set(kept):  # each dropped onset falls within min_gap of the last kept before it
        assert step - max(k for k in kept if k < step) < min_gap
