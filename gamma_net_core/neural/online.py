"""Online learning from a stream of transitions: what the neural predictor node runs.

A stream delivers one message per step (``gamma_net_msgs/Transition``: φ(S_t), C_{t+1},
terminal, truncated, episode, step) faster than a learner at the paper's sizes can train
(an update every 4 steps costs several milliseconds on a CPU). :class:`TransitionStream`
therefore splits the work between two threads:

- :meth:`~TransitionStream.receive` (the subscription's thread): validates a message and
  appends it to a queue. Microseconds; never waits for the learner.
- :meth:`~TransitionStream.work` (one worker thread, in a loop): moves the queued steps
  into the learner's prioritized replay and makes the updates owed. The schedule is the
  learner's: one update per ``update_period`` steps once ``min_replay_history`` steps have
  been observed, counted on the steps observed. A worker that keeps up makes exactly the
  updates of :meth:`NeuralLearner.observe` (tested); one that lags keeps the ratio in the
  long run, its late updates sampling a replay that already holds newer steps.
  ``max_update_lag`` bounds that lag: while more updates are owed, nothing more is moved
  into the replay, so the queue (and, through the reports a node sends of what it has
  taken, the sender) waits for training.

The loop that uses it::

    stream = TransitionStream(NeuralLearner(config))
    stream.receive(phi, cumulant, terminal=False, truncated=False, episode=e, step=s, stamp=t)  # per message
    while running:                                  # the worker thread
        if not stream.work():
            stream.wait(0.05)
    values, latest, updates = stream.predict(gammas)  # any thread: at the latest state

Episode boundaries. Consecutive messages of one episode form the transitions; a message's
own ``terminal``/``truncated`` flags end an episode. A lost or skipped message must not
join two states that are not consecutive, but whether a step continues is known only
when the next message arrives. So the newest step is held back (``pending``) until then:
if the next message is the same episode's next step, it goes into the replay as it is;
otherwise (a gap in the (episode, step) numbering) it goes in marked ``truncated``, so
the replay bootstraps from it but never across the gap. A step that ends its episode goes
in at once. Each gap is counted.

Checkpoints are :meth:`NeuralLearner.state_dict` plus a ``stream`` entry (the held-back
step, the schedule's dropped updates, the counters), so :meth:`NeuralLearner.load` reads
the node's checkpoints too, and resuming continues the stream exactly: the held-back step
is joined to the next message only if that message continues it.
"""

from __future__ import annotations

import collections
import enum
import json
import math
import os
import pathlib
import threading
from typing import NamedTuple

import numpy as np

from gamma_net_core.checkpoint import CheckpointError, load_torch, save_torch
from gamma_net_core.neural.learner import NeuralConfig, NeuralLearner, TrainingDiverged

#: Queued messages moved into the replay per :meth:`TransitionStream.work` call at most.
DRAIN_BATCH = 4096


class SkipReason(str, enum.Enum):
    """Why a transition message was not used."""

    WRONG_SIZE = "wrong_size"  # features of another length than the network's input
    NON_FINITE = "non_finite"  # a NaN or infinite feature or cumulant


class Step(NamedTuple):
    """One received step: the state S_t it is about and what followed it."""

    features: np.ndarray  # float32 [feature_size], φ(S_t)
    cumulant: float  # C_{t+1}
    terminal: bool
    truncated: bool
    episode: int
    step: int
    stamp: float  # s, the message's header stamp

    @property
    def ended(self) -> bool:
        return self.terminal or self.truncated


def updates_due(transitions: int, *, min_replay_history: int, update_period: int) -> int:
    """How many updates the learner's schedule makes over the first ``transitions`` steps.

    Step t (counted from 1) triggers one when t >= min_replay_history and t % update_period == 0,
    exactly as :meth:`NeuralLearner.observe` does.
    """
    first = max(int(min_replay_history), 1)
    if transitions < first:
        return 0
    return transitions // update_period - (first - 1) // update_period


class TransitionStream:
    """A :class:`NeuralLearner` fed from a message stream, with receiving decoupled from training.

    Args:
      learner: the learner to fill and train (new, or restored by :meth:`resume`).
      max_update_lag: updates that may be owed before the stream stops taking steps into the
        replay (0: no bound; training then catches up whenever the stream pauses).

    :meth:`receive` must be called from one thread at a time, :meth:`work` from one (other)
    thread; :meth:`predict`, :meth:`save` and the counters from any thread.
    """

    def __init__(self, learner: NeuralLearner, *, max_update_lag: int = 0) -> None:
        if max_update_lag < 0:
            raise ValueError(f"max_update_lag must be >= 0; got {max_update_lag!r}")
        self.learner = learner
        self.config: NeuralConfig = learner.config
        self.max_update_lag = int(max_update_lag)
        #: Guards the learner: held by the worker per drain and per update, and by predict/save.
        self.lock = threading.RLock()
        self._queue: collections.deque[Step] = collections.deque()
        self._wake = threading.Event()
        self._pending: Step | None = None
        self._last: Step | None = None
        #: The newest step moved into the replay (or held back): the state predictions are about.
        self.latest: Step | None = None
        #: Messages accepted into the queue, and those skipped, by reason.
        self.received = 0
        self.skipped = dict.fromkeys((r.value for r in SkipReason), 0)
        #: Messages moved from the queue into the learner (held back or added).
        self.drained = 0
        #: Discontinuities in the (episode, step) numbering: lost or skipped messages.
        self.gaps = 0
        #: Owed updates given up because the replay held no complete window (as the learner does).
        self.dropped = 0

    # ------------------------------------------------------------------ receiving

    def receive(
        self,
        features,
        cumulant: float,
        *,
        terminal: bool,
        truncated: bool,
        episode: int,
        step: int,
        stamp: float = 0.0,
    ) -> tuple[SkipReason, str] | None:
        """Validate one message and queue it for the worker; cheap, never waits for training.

        Args:
          features: φ(S_t), [feature_size] numbers (e.g. a message's float32 array).
          cumulant: C_{t+1}.
          terminal, truncated: the episode ended after this step (see ``gamma_net_msgs/Transition``).
          episode, step: the message's numbering, checked for gaps.
          stamp: s, when the step was recorded (stamps the predictions about this state).

        Returns:
          None when queued; else (reason, detail) of a skipped message, which is counted in
          :attr:`skipped` and never learned from.
        """
        phi = np.asarray(features, dtype=np.float32)
        size = self.config.feature_size
        if phi.shape != (size,):
            return self._skip(SkipReason.WRONG_SIZE, f"{phi.size} features, the network takes {size}")
        if not np.isfinite(phi).all():
            j = int(np.flatnonzero(~np.isfinite(phi))[0])
            return self._skip(SkipReason.NON_FINITE, f"feature {j} is {float(phi[j])!r}")
        if not math.isfinite(cumulant):
            return self._skip(SkipReason.NON_FINITE, f"cumulant is {float(cumulant)!r}")
        self._queue.append(
            Step(phi, float(cumulant), bool(terminal), bool(truncated), int(episode), int(step), float(stamp))
        )
        self.received += 1
        self._wake.set()
        return None

    def _skip(self, reason: SkipReason, detail: str) -> tuple[SkipReason, str]:
        self.skipped[reason.value] += 1
        return reason, detail

    @property
    def skipped_total(self) -> int:
        return sum(self.skipped.values())

    @property
    def taken(self) -> int:
        """Messages fully handled: moved into the learner, or skipped (what a node acknowledges)."""
        return self.drained + self.skipped_total

    @property
    def queued(self) -> int:
        return len(self._queue)

    # ------------------------------------------------------------------- training

    @property
    def owed_updates(self) -> int:
        """Updates the schedule has called for and that are not made yet (the training lag)."""
        c = self.config
        due = updates_due(
            self.learner.transitions, min_replay_history=c.min_replay_history, update_period=c.update_period
        )
        return due - self.learner.updates - self.dropped

    @property
    def backpressured(self) -> bool:
        """True while training lags by more than ``max_update_lag``: no steps are taken in."""
        return bool(self.max_update_lag) and self.owed_updates >= self.max_update_lag and not self.learner.stopped

    def wake(self) -> None:
        """Let a waiting worker return at once (e.g. to stop it)."""
        self._wake.set()

    def wait(self, timeout: float) -> None:
        """Block the worker until a message arrives or ``timeout`` seconds pass."""
        self._wake.wait(timeout)
        self._wake.clear()

    def work(self, *, max_updates: int = 1) -> int:
        """Move queued steps into the replay and make at most ``max_updates`` owed updates.

        Steps go in up to each point where the schedule calls for an update, and the update is
        made there while the budget lasts, so a worker that keeps up makes exactly the updates
        :meth:`NeuralLearner.observe` would, from the same replay contents. Past the budget the
        steps still go in (receiving never waits for training, unless ``max_update_lag`` says so)
        and the updates are owed.

        Returns:
          Steps taken from the queue plus updates made (0: nothing to do).

        Raises:
          TrainingDiverged: the loss became NaN or infinite; training stops, receiving goes on.
        """
        items = []
        if not self.backpressured:
            while self._queue and len(items) < DRAIN_BATCH:
                items.append(self._queue.popleft())
        records = [r for s in items for r in self._continue(s)]
        budget, done, start = max_updates, len(items), 0
        while True:
            made = self._train(budget)
            budget, done = budget - made, done + made
            if start == len(records):
                break
            stop = start + self._steps_to_next_due()
            self._add(records[start:stop])
            start = min(stop, len(records))
        if items:
            with self.lock:
                self.latest = items[-1]
                self.drained += len(items)
        return done

    def _train(self, budget: int) -> int:
        made = 0
        while made < budget and self.owed_updates > 0 and self.learner.stopped is None:
            with self.lock:
                if not self.learner.replay.can_sample:
                    self.dropped += self.owed_updates  # skipped for good, as the learner does
                    break
                self.learner.update()
            made += 1
        return made

    def _steps_to_next_due(self) -> int:
        c, t = self.config, self.learner.transitions
        first = max(t + 1, c.min_replay_history)
        return -(-first // c.update_period) * c.update_period - t

    def _add(self, records: list[Step]) -> None:
        with self.lock:
            self.learner.replay.add(
                np.stack([r.features for r in records]),
                [r.cumulant for r in records],
                [r.terminal for r in records],
                [r.truncated for r in records],
            )
            self.learner.transitions += len(records)

    def _continue(self, s: Step) -> list[Step]:
        """The records that step ``s`` releases into the replay (see the module docstring)."""
        records = []
        pending, last = self._pending, self._last
        if pending is not None:
            if s.episode == pending.episode and s.step == pending.step + 1:
                records.append(pending)
            else:
                records.append(pending._replace(truncated=True))  # never bootstrap across the gap
                self.gaps += 1
        elif last is not None and not (s.episode == last.episode + 1 and s.step == 0):
            self.gaps += 1  # steps lost between episodes: counted, nothing to cut
        if s.ended:
            records.append(s)
            self._pending = None
        else:
            self._pending = s
        self._last = s
        return records

    # ----------------------------------------------------------------- predicting

    def predict(self, gammas) -> tuple[np.ndarray, Step, int]:
        """Predictions at the latest state: (values [G] in the cumulant's units, that step, updates made).

        Raises:
          ValueError: a γ outside [0, 1) (named), or no step received yet.
        """
        with self.lock:
            latest = self.latest
            if latest is None:
                raise ValueError("no transition received yet: nothing to predict from")
            values = self.learner.predict(latest.features, gammas)[0]
            return values, latest, self.learner.updates

    # ---------------------------------------------------------------- checkpoints

    def state_dict(self) -> dict:
        """The learner's :meth:`~NeuralLearner.state_dict` plus this stream's position and counters."""
        import torch

        with self.lock:
            state = self.learner.state_dict()
            last = self._last
            state["stream"] = {
                # The newest step received, and whether it is held back (not in the replay yet).
                "last": json.dumps(None if last is None else [*last[1:]]),
                "last_features": torch.from_numpy(np.array(last.features if last is not None else [], np.float32)),
                "pending": self._pending is not None,
                "counters": json.dumps(
                    {"dropped": self.dropped, "gaps": self.gaps, "skipped": self.skipped, "drained": self.drained}
                ),
            }
        return state

    def save(self, path: str | os.PathLike) -> pathlib.Path:
        """Atomically write the learner and the stream's position to ``path`` (training waits meanwhile).

        Raises:
          TrainingDiverged: training stopped on a diverged loss; the file at ``path`` is left as it was.
        """
        with self.lock:  # the networks' tensors are written as they are: no update in between
            if self.learner.stopped is not None:
                raise TrainingDiverged(f"not saving to {path}: {self.learner.stopped}")
            return save_torch(path, self.state_dict())

    @classmethod
    def resume(cls, path: str | os.PathLike, *, config: NeuralConfig, max_update_lag: int = 0) -> TransitionStream:
        """A stream restored from :meth:`save`'s file (or a plain :meth:`NeuralLearner.save` file).

        Raises:
          FileNotFoundError: no such file.
          CheckpointError: not a learner checkpoint, another configuration (each differing setting
            named), or a plain learner checkpoint whose last step does not end an episode (the
            next message would be joined to it).
        """
        learner = NeuralLearner.load(path, config=config)
        stream = cls(learner, max_update_lag=max_update_lag)
        state = load_torch(path).get("stream")
        if state is None:
            replay = learner.replay
            last = (replay.added - 1) % replay.capacity
            if replay.added and not (replay.terminals[last] or replay.truncateds[last]):
                raise CheckpointError(
                    f"{path} is a learner checkpoint without a stream position, and its last stored step does "
                    "not end an episode: resuming would join it to the next message (a transition that never "
                    "happened). Use a checkpoint written by the neural predictor node, or start without resuming"
                )
            due = updates_due(
                learner.transitions, min_replay_history=config.min_replay_history, update_period=config.update_period
            )
            stream.dropped = due - learner.updates  # nothing owed: the schedule goes on from here
            return stream
        try:
            last = json.loads(state["last"])
            if last is not None:
                stream._last = stream.latest = Step(state["last_features"].numpy().copy(), *last)
                if state["pending"]:
                    stream._pending = stream._last
            counters = json.loads(state["counters"])
            stream.dropped = int(counters["dropped"])
            stream.gaps = int(counters["gaps"])
            stream.skipped.update({k: int(v) for k, v in counters["skipped"].items() if k in stream.skipped})
            stream.drained = int(counters["drained"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise CheckpointError(f"{path}: its stream position is damaged ({type(exc).__name__}: {exc})") from None
        return stream
