"""Shares of a Horde's questions: a partition by name, and a split that learns what the whole Horde learns."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gamma_net_core.horde.learner import HordeLearner
from gamma_net_core.horde.questions import load_questions
from gamma_net_core.horde.shares import share_names, share_spec

JS = {"topic": "/joint_states", "type": "sensor_msgs/msg/JointState"}


@given(
    names=st.lists(st.text("abcxyz_0123", min_size=1, max_size=6), min_size=1, max_size=40, unique=True),
    n=st.integers(1, 6),
    seed=st.integers(0, 10),
)
def test_i_of_n_shares_put_every_question_in_exactly_one_share_whatever_the_order(names, n, seed):
    shuffled = list(np.random.default_rng(seed).permutation(names))
    shares = [share_names(names, f"{i}/{n}") if i <= len(names) else () for i in range(1, n + 1)]
    assert sorted(q for share in shares for q in share) == sorted(names)
    assert max(map(len, shares)) - min(map(len, shares)) <= 1
    for i, share in enumerate(shares, start=1):
        if share:  # the same names in another file order: the same share, in that order
            again = share_names(shuffled, f"{i}/{n}")
            assert set(again) == set(share) and list(again) == [q for q in shuffled if q in set(share)]
            assert list(share) == [q for q in names if q in set(share)]


@pytest.mark.parametrize(
    ("share", "message"),
    [
        ("0/2", "share '0/2': must be i/n with 1 <= i <= n"),
        ("3/2", "share '3/2': must be i/n with 1 <= i <= n"),
        ("3/3", "share '3/3' is empty: 2 questions make fewer than 3 shares"),
        ("a,zz", "share 'a,zz': no question 'zz' in the questions file"),
        ("a,,b", "share 'a,,b': give i/n or distinct question names separated by commas"),
    ],
)
def test_a_bad_share_is_refused_in_one_line_naming_it(share, message):
    with pytest.raises(ValueError) as info:
        share_names(["a", "b"], share)
    assert str(info.value) == message


def test_an_empty_share_is_every_question_and_a_list_keeps_the_file_order():
    assert share_names(["b", "a", "c"], "") == ("b", "a", "c")
    assert share_names(["b", "a", "c"], " c, b ") == ("b", "c")


def spec(adaptation="constant", lam=0.0):
    """Seven questions, two terminating on the same event (they share TD(lambda) traces)."""
    questions = []
    for i in range(7):
        q = {"name": f"q{i}", "cumulant": {**JS, "field": f"velocity[{i % 2}]", "transform": "abs"}}
        if i % 3 == 2:
            q["termination"] = {**JS, "field": "position[1]", "threshold": 0.8}
        questions.append(q)
    return load_questions(
        {
            "seed": 4,
            "state": [{**JS, "field": f"position[{d}]", "low": 0.0, "high": 1.0} for d in range(2)],
            "learner": {"tilings": [8], "memory_size": 256, "step_size": 0.3, "lam": lam, "lambda_view": "backward"},
            "timescales": {"n_gamma": 1, "n_tau": 4, "tau_max": 20},
            "adaptation": {"method": adaptation, "meta_step_size": 0.05, "trace_tau": 100.0},
            "questions": questions,
        }
    )


def play(learner: HordeLearner, whole_names, steps: int = 120) -> np.ndarray:
    """Steps ``learner`` along one fixed stream of the whole Horde's questions; its predictions [T, Q, G]."""
    rng = np.random.default_rng(11)
    states = np.clip(0.5 + np.cumsum(rng.normal(0, 0.06, (steps, 2)), axis=0), 0, 1)
    cumulants = rng.normal(0, 1, (steps, len(whole_names))) * np.arange(1, len(whole_names) + 1)
    ended = (states[:, 1] > 0.8).astype(float)  # every terminating question's one event
    rows = [whole_names.index(name) for name in learner.names]
    terminating = np.array([int(name[1:]) % 3 == 2 for name in learner.names])
    out = []
    for t in range(steps):
        continuations = np.where(terminating, 1.0 - ended[t], 1.0)
        learner.step(states[t], cumulants[t, rows], continuations)
        out.append(learner.predict(states[t], taus=[1.0, 3.0, 10.0]))
    return np.array(out)


@pytest.mark.slow
@pytest.mark.parametrize(("adaptation", "lam"), [("constant", 0.0), ("autostep", 0.0), ("constant", 0.9)])
def test_a_split_horde_predicts_each_question_exactly_as_the_whole_horde(adaptation, lam):
    whole_spec = spec(adaptation, lam)
    whole = play(HordeLearner.from_spec(whole_spec), list(whole_spec.names))
    seen = set()
    for share in ("1/3", "2/3", "3/3", "q5,q0"):
        part_spec = share_spec(whole_spec, share)
        part = play(HordeLearner.from_spec(part_spec), list(whole_spec.names))
        rows = [whole_spec.names.index(name) for name in part_spec.names]
        np.testing.assert_array_equal(part, whole[:, rows])  # bit for bit: no question depends on another
        seen.update(part_spec.names if share != "q5,q0" else ())
    assert seen == set(whole_spec.names)
    assert np.abs(whole[-1]).max() > 0.1  # they did learn
