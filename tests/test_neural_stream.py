"""TransitionStream: a learner fed message by message, receiving apart from training.

The oracle is :meth:`NeuralLearner.observe`: a stream whose worker keeps up must learn
exactly what the learner learns from the same steps one call at a time.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from gamma_net_core.checkpoint import CheckpointError
from gamma_net_core.neural.learner import NeuralConfig, NeuralLearner
from gamma_net_core.neural.online import SkipReason, TransitionStream, updates_due

pytestmark = pytest.mark.usefixtures("one_torch_thread")

D = 6


def small(**changes) -> NeuralConfig:
    base = dict(
        feature_size=D,
        hidden_sizes=(16, 8),
        batch_size=8,
        n_step=3,
        replay_capacity=300,
        min_replay_history=20,
        update_period=2,
        target_sync_period=5,
        step_size=1e-3,
        seed=3,
    )
    return NeuralConfig(**{**base, **changes})


def episodes(lengths, *, seed=0, truncate_last=False):
    """Messages of consecutive episodes: (features, cumulant, terminal, truncated, episode, step)."""
    rng = np.random.default_rng(seed)
    rows = []
    for e, length in enumerate(lengths):
        for s in range(length):
            end = s == length - 1
            truncated = end and truncate_last and e == len(lengths) - 1
            rows.append((rng.random(D).astype(np.float32), float(rng.normal()), end and not truncated, truncated, e, s))
    return rows


def feed(stream, rows, *, work=True):
    for phi, c, term, trunc, e, s in rows:
        assert stream.receive(phi, c, terminal=term, truncated=trunc, episode=e, step=s, stamp=e + s / 100) is None
        if work:
            while stream.work(max_updates=100):
                pass


def test_updates_due_counts_the_learners_schedule():
    learner = NeuralLearner(small(min_replay_history=7, update_period=3))
    for t in range(1, 40):
        learner.observe(np.zeros(D, np.float32), 0.0)
        assert learner.updates == updates_due(t, min_replay_history=7, update_period=3), t
    assert updates_due(5, min_replay_history=0, update_period=2) == 2


def test_a_stream_that_keeps_up_learns_what_the_learner_learns():
    rows = episodes([30, 45, 25])  # every episode ends: nothing is held back at the end
    stream = TransitionStream(NeuralLearner(small()))
    feed(stream, rows)
    oracle = NeuralLearner(small())
    for phi, c, term, trunc, _, _ in rows:
        oracle.observe(phi, c, terminal=term, truncated=trunc)
    assert stream.learner.transitions == oracle.transitions == len(rows)
    assert stream.learner.updates == oracle.updates > 0
    for mine, theirs in zip(stream.learner.online.parameters(), oracle.online.parameters(), strict=True):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=0)
    assert stream.gaps == 0 and stream.owed_updates == 0


def test_the_newest_step_is_held_back_until_the_next_message_says_whether_it_continues():
    stream = TransitionStream(NeuralLearner(small(min_replay_history=10**6)))
    rows = episodes([10])[:5]  # steps 0..4 of an episode that goes on
    feed(stream, rows)
    assert stream.learner.transitions == 4  # step 4 is held back
    assert stream.latest.step == 4  # but predictions are about it already
    values, state, updates = stream.predict([0.0, 0.9])
    assert values.shape == (2,) and state.step == 4 and updates == 0


def test_a_gap_ends_the_episode_there_and_no_window_crosses_it():
    stream = TransitionStream(NeuralLearner(small(min_replay_history=10**6)))
    rows = episodes([12])
    kept = rows[:4] + rows[6:]  # steps 4 and 5 are lost
    feed(stream, kept)
    replay = stream.learner.replay
    assert stream.gaps == 1
    truncated = replay.truncateds[: replay.added]
    assert truncated.tolist() == [False, False, False, True] + [False] * (replay.added - 4)
    # The window from step 1 ends at step 3 and bootstraps from φ(S_3), never from step 6.
    batch = replay.assemble([1])
    assert batch.lengths.tolist() == [2] and batch.bootstrap.tolist() == [True]
    np.testing.assert_array_equal(batch.bootstrap_features[0], rows[3][0])
    np.testing.assert_allclose(batch.cumulants[0, :2], [rows[1][1], rows[2][1]])
    with pytest.raises(ValueError, match="no sampleable window"):
        replay.assemble([3])  # cut at its own step: nothing to learn from it
    # After the gap the episode goes on: steps 6, 7, ... are consecutive again.
    np.testing.assert_array_equal(replay.assemble([4]).bootstrap_features[0], rows[9][0])


def test_lost_messages_between_episodes_are_counted_and_cut_nothing():
    stream = TransitionStream(NeuralLearner(small(min_replay_history=10**6)))
    rows = episodes([5, 5, 5])
    feed(stream, rows[:5] + rows[10:])  # episode 1 lost whole
    assert stream.gaps == 1
    assert not stream.learner.replay.truncateds[: stream.learner.replay.added].any()


def test_bad_messages_are_skipped_counted_and_never_reach_the_replay():
    stream = TransitionStream(NeuralLearner(small(min_replay_history=10**6)))
    good = np.ones(D, np.float32)
    nan = good.copy()
    nan[2] = math.nan
    assert stream.receive(np.ones(D + 1), 0.0, terminal=False, truncated=False, episode=0, step=0) == (
        SkipReason.WRONG_SIZE,
        f"{D + 1} features, the network takes {D}",
    )
    assert stream.receive(nan, 0.0, terminal=False, truncated=False, episode=0, step=0)[1] == "feature 2 is nan"
    assert stream.receive(good, math.inf, terminal=False, truncated=False, episode=0, step=0)[1] == "cumulant is inf"
    assert stream.receive([], 0.0, terminal=False, truncated=False, episode=0, step=0)[0] is SkipReason.WRONG_SIZE
    assert stream.skipped == {"wrong_size": 2, "non_finite": 2}
    assert stream.queued == 0 and stream.taken == 4
    while stream.work():
        pass
    assert stream.learner.transitions == 0 and stream.latest is None
    with pytest.raises(ValueError, match="no transition received yet"):
        stream.predict([0.5])


def test_a_lagging_worker_keeps_the_ratio_and_max_update_lag_holds_intake_back():
    rows = episodes([200])
    stream = TransitionStream(NeuralLearner(small()))
    feed(stream, rows, work=False)  # everything arrives before any training
    stream.work(max_updates=0)
    assert stream.learner.transitions == 200 and stream.learner.updates == 0
    assert stream.owed_updates == updates_due(200, min_replay_history=20, update_period=2) == 91
    while stream.work(max_updates=7):
        pass
    assert stream.learner.updates == 91 and stream.owed_updates == 0

    bounded = TransitionStream(NeuralLearner(small()), max_update_lag=5)
    feed(bounded, rows[:40], work=False)
    bounded.work(max_updates=0)  # 39 steps in: 10 updates owed, more than 5
    assert bounded.owed_updates == 10 and bounded.backpressured
    feed(bounded, rows[40:60], work=False)
    assert bounded.work(max_updates=0) == 0 and bounded.queued == 20  # nothing taken in while behind
    bounded.work(max_updates=6)
    assert bounded.owed_updates == 4 and not bounded.backpressured
    bounded.work(max_updates=0)
    assert bounded.queued == 0


def test_checkpoint_resumes_the_stream_exactly(tmp_path):
    rows = episodes([40, 50])
    path = tmp_path / "stream.pt"
    first = TransitionStream(NeuralLearner(small()))
    feed(first, rows[:25])  # stops mid-episode: step 24 is held back
    first.receive(np.ones(D + 2), 0.0, terminal=False, truncated=False, episode=0, step=25)  # a skip, counted
    first.save(path)

    again = TransitionStream.resume(path, config=small())
    assert again.latest.step == 24 and again.skipped["wrong_size"] == 1
    feed(again, rows[25:])
    straight = TransitionStream(NeuralLearner(small()))
    feed(straight, rows)
    assert again.gaps == straight.gaps == 0
    assert again.learner.updates == straight.learner.updates
    for mine, theirs in zip(again.learner.online.parameters(), straight.learner.online.parameters(), strict=True):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=0)

    # Resumed, but the stream goes on elsewhere: the held-back step is cut, not joined.
    cut = TransitionStream.resume(path, config=small())
    feed(cut, rows[60:62])  # episode 1
    assert cut.gaps == 1 and bool(cut.learner.replay.truncateds[24])
    assert NeuralLearner.load(path, config=small()).transitions == 24  # the learner reads it as a plain checkpoint


def test_checkpoints_that_cannot_continue_are_refused(tmp_path):
    path = tmp_path / "plain.pt"
    learner = NeuralLearner(small())
    rows = episodes([30])[:20]
    learner.observe_many(np.stack([r[0] for r in rows]), [r[1] for r in rows])
    learner.save(path)
    with pytest.raises(CheckpointError, match="last stored step does not end an episode"):
        TransitionStream.resume(path, config=small())
    ended = NeuralLearner(small())
    ended.observe_many(np.stack([r[0] for r in rows]), [r[1] for r in rows], terminals=[False] * 19 + [True])
    ended.save(path)
    resumed = TransitionStream.resume(path, config=small())
    assert resumed.owed_updates == 0 and resumed.learner.transitions == 20
    with pytest.raises(CheckpointError, match=r"step_size: file has 0\.001, expected 0\.01"):
        TransitionStream.resume(path, config=small(step_size=1e-2))


@pytest.mark.parametrize(
    "damage, says",
    [
        (lambda s: s.pop("config"), r"without \['config'\]"),
        (lambda s: s.update(config="{not json"), "its 'config' entry is not a configuration"),
        (lambda s: s["online"].popitem(), "does not fit this learner: Error"),
        (lambda s: s["stream"].pop("counters"), r"its stream position is damaged \(KeyError"),
    ],
    ids=["no-config", "config-not-json", "network-short", "stream-short"],
)
def test_a_node_checkpoint_missing_an_entry_is_refused_naming_it(tmp_path, damage, says):
    """A checkpoint as the neural predictor node writes it, one entry gone: refused, not a KeyError traceback."""
    from gamma_net_core.checkpoint import load_torch, save_torch

    path = tmp_path / "node.pt"
    stream = TransitionStream(NeuralLearner(small()))
    feed(stream, episodes([30])[:20])
    stream.save(path)
    state = load_torch(path)
    damage(state)
    save_torch(path, state)
    with pytest.raises(CheckpointError, match=says):
        TransitionStream.resume(path, config=small())
