"""Staleness per topic in the core: the file's limits, the learner's and the error's per-question skips, the sampler."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_horde_learner import CONFIG, SAMPLING, stream
from test_horde_questions import spec_doc
from test_horde_train import JS, questions, write_bag

from gamma_net_core.horde.learner import HordeLearner
from gamma_net_core.horde.online_error import OnlineError, PlainOnlineError
from gamma_net_core.horde.questions import AdaptationConfig, load_questions
from gamma_net_core.horde.sampling import read_signals


def test_each_topic_has_its_own_stale_limit_and_its_questions():
    spec = load_questions(
        spec_doc(stale_after_s=0.5, topics={"/battery": {"stale_after_s": 3.0}, "/joint_states": {"rate_hz": 50.0}})
    )
    assert spec.stale_after("/battery") == 3.0 and spec.stale_after("/joint_states") == pytest.approx(0.06)
    assert load_questions(spec_doc(stale_after_s=0.7)).stale_after("/battery") == 0.7  # no topics: the file's
    assert spec.state_topics() == {"/joint_states"}
    assert spec.question_topics() == [{"/joint_states"}, {"/battery"}, {"/joint_states"}]


@pytest.mark.parametrize(
    ("topics", "says"),
    [
        (
            {"/imu": {"stale_after_s": 1.0}},
            "topics./imu: no signal reads topic '/imu'; the questions read ['/battery', ",
        ),
        ({"/battery": {"stale": 1.0}}, "topics./battery: unknown keys ['stale']; known: ['rate_hz', 'stale_after_s']"),
        ({"/battery": {"stale_after_s": -1}}, "topics./battery.stale_after_s: must be in [1e-06, 1e+06]; got -1"),
        ({"/battery": 3.0}, "topics./battery: must be a mapping; got 3.0"),
        ([1], "topics: must be a mapping; got [1]"),
    ],
)
def test_a_bad_topics_section_is_refused_in_one_line(topics, says):
    with pytest.raises(ValueError) as caught:
        load_questions(spec_doc(topics=topics))
    assert says in str(caught.value) and "\n" not in str(caught.value)


ADAPTATIONS = [AdaptationConfig(), AdaptationConfig(method="autostep", meta_step_size=0.01)]


@pytest.mark.slow
@pytest.mark.parametrize("adaptation", ADAPTATIONS, ids=["constant", "autostep"])
def test_a_skipped_question_keeps_its_weights_and_restarts_while_the_others_learn_as_ever(adaptation):
    Q, T = 3, 40
    states, cumulants, continuations = stream(T, Q)
    names = [f"q{i}" for i in range(Q)]

    def learner():
        return HordeLearner(
            CONFIG, names=names, timescales=SAMPLING, adaptation=adaptation, rng=np.random.default_rng(2)
        )

    before_the_gap = None
    masked, full, oracle = learner(), learner(), learner()  # oracle: question 1 never sees ticks 10..19
    g = np.array([0.0, 0.5, 0.9])
    usable = np.ones((T + 1, Q), dtype=bool)
    usable[10:20, 1] = False
    for t in range(T + 1):
        c = cumulants[t - 1] if t else cumulants[0]
        cont = continuations[t - 1] if t else continuations[0]
        broken = np.where(usable[t], c, np.nan)  # a stopped question's cumulant is not read
        deltas = masked.step(states[t], broken, cont, usable=usable[t], gammas=g)
        full.step(states[t], c, cont, gammas=g)
        if t and not (usable[t, 1] and usable[t - 1, 1]):
            assert np.all(np.isnan(deltas[1])) and np.all(np.isfinite(deltas[[0, 2]]))
        if t == 9:
            before_the_gap = masked.weights[1].copy()
        if t == 20:
            np.testing.assert_array_equal(masked.weights[1], before_the_gap)
    # the others learned exactly what they learn with every question
    np.testing.assert_allclose(masked.weights[[0, 2]], full.weights[[0, 2]], rtol=1e-12, atol=1e-12)
    # question 1 learned ticks 0..9 and 20..T as two stretches: no transition 9 -> 10 nor 19 -> 20
    for t in range(T + 1):
        if t == 10:
            oracle.restart()
        if 10 <= t < 20:
            continue
        c = cumulants[t - 1] if t else cumulants[0]
        oracle.step(states[t], c, continuations[t - 1] if t else continuations[0], gammas=g)
    assert not np.allclose(masked.weights[1], full.weights[1])
    if adaptation.method == "constant":  # Autostep's step sizes follow every update the others made
        np.testing.assert_allclose(masked.weights[1], oracle.weights[1], rtol=1e-9, atol=1e-12)


def test_with_traces_a_skipped_question_keeps_its_weights():
    config = dataclasses.replace(CONFIG, lam=0.8, lambda_view="backward")
    states, cumulants, _ = stream(20, 2)
    horde = HordeLearner(config, names=["a", "b"], timescales=SAMPLING, rng=np.random.default_rng(2))
    horde.step(states[0], cumulants[0], usable=[True, False])
    horde.step(states[1], cumulants[1], usable=[True, False])
    for t in range(2, 8):
        horde.step(states[t], [cumulants[t, 0], np.nan], usable=[True, False])
    assert np.any(horde.weights[0]) and not np.any(horde.weights[1])
    assert horde.step(states[8], cumulants[8], usable=[False, False]) is None  # nothing learned: no deltas


def test_a_restart_of_some_questions_drops_only_their_pending_returns_and_nan_predictions_are_not_scored():
    rng = np.random.default_rng(4)
    T, Q = 120, 3
    gammas = [0.0, 0.8]
    readouts = {"two": (np.array([0.5, 0.9]), np.array([0.3, 0.7]))}
    fast, plain = (cls(gammas=gammas, n_questions=Q, readouts=readouts) for cls in (OnlineError, PlainOnlineError))
    stopped = np.zeros((T, Q), dtype=bool)
    stopped[40:55, 1] = True
    for t in range(T):
        c = rng.normal(size=Q)
        cont = (rng.random(Q) > 0.05).astype(float)
        predictions = rng.normal(size=(Q, 3))
        predictions[stopped[t]] = np.nan
        for errors in (fast, plain):
            if stopped[t].any():
                errors.restart(stopped[t])
            errors.observe(np.where(stopped[t], 0.0, c), cont, predictions)
    np.testing.assert_allclose(fast.rmse(), plain.rmse(), rtol=1e-9)
    np.testing.assert_array_equal(fast.counts, plain.counts)
    # question 1 lost the predictions pending at the gap and those made in it; the others lost none
    assert np.all(fast.counts[1] < fast.counts[0]) and np.all(fast.counts[1] < fast.counts[2])


@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    return write_bag(tmp_path_factory.mktemp("bag") / "two_topics")


def test_the_sampler_stops_only_the_questions_of_a_stale_topic_as_the_node_does(bag, tmp_path):
    spec = load_questions(questions(tmp_path))  # voltage reads /battery, silent from 29.8 s to 31 s
    signals = read_signals(bag, spec)
    t = signals.times - signals.times[0]
    stale = (t > 30.3 + 1e-6) & (t < 31.0 - 1e-6)  # older than 0.5 s, the node's test: now - arrived > limit
    assert signals.usable_questions.shape == (t.shape[0], 3)
    assert np.array_equal(signals.usable_questions[:, 1], ~stale)  # voltage
    assert signals.usable_questions[:, [0, 2]].all()  # the joints' questions never stop
    assert signals.stale_topics == {"/joint_states": 0, "/battery": int(stale.sum())}
    # /battery's own limit, longer than its silence: nothing stops
    relaxed = read_signals(bag, load_questions(questions(tmp_path, topics={"/battery": {"stale_after_s": 1.5}})))
    assert relaxed.usable_questions.all() and relaxed.usable.all()


def test_a_stale_state_topic_stops_every_question_in_the_sampler(bag, tmp_path):
    battery = {"topic": "/battery", "type": "sensor_msgs/msg/BatteryState", "field": "voltage", "low": 11, "high": 13}
    state = [{**JS, "field": "position[elbow]", "low": 0.0, "high": 3.0}, battery]
    spec = load_questions(questions(tmp_path, state=state))
    signals = read_signals(bag, spec)
    t = signals.times - signals.times[0]
    stale = (t > 30.3 + 1e-6) & (t < 31.0 - 1e-6)
    assert np.array_equal(signals.usable_questions, np.repeat(~stale[:, None], 3, axis=1))


def test_the_guides_questions_with_a_topics_section_load_as_written():
    import pathlib
    import re

    import yaml

    guide = (pathlib.Path(__file__).parent.parent / "docs" / "horde.md").read_text()
    doc = yaml.safe_load(re.search(r"```yaml\n(.*?)```", guide, re.S)[1])
    spec = load_questions(doc)
    assert spec.stale_after("/battery_state") == 3.0 and spec.stale_after("/joint_states") == 0.5
