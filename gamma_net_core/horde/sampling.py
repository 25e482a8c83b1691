"""A recording's topics sampled as the horde node samples them live: the latest message of each, on a fixed clock.

Every topic the questions name is read from a rosbag2 (or rosbag1) with the `rosbags` library
(any message type the bag's connections define), each field resolved with
:mod:`gamma_net_core.horde.fields` (REP 117 infinities read as the node reads them) and
transformed as the node transforms it. The clock ticks every 1 / rate_hz seconds of the bag's
receive time, from the first moment every topic has published to the last message. At each
tick every signal takes its topic's latest message at or before the tick.

Staleness is judged per topic as the node judges it (:meth:`HordeSpec.stale_after`): a topic
whose latest message is older than its limit stops the questions that read it, all of them if a
state input reads it (the state is shared), and so does a value that is not finite.
``usable_questions`` [T, Q] says where each question is usable; a question's transition into and
out of a tick where it is not is not learned (the node restarts it there). ``usable`` [T] is
where every question is. A topic absent from the recording is refused (the node, live, waits for
it and stops only its questions).
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass

import numpy as np

from gamma_net_core.data.bags import BagError, open_reader, read_messages
from gamma_net_core.data.joints import NANOSECONDS
from gamma_net_core.horde.questions import HordeSpec


@dataclass(frozen=True)
class SampledSignals:
    """The signals on the clock.

    Attributes:
      times: [T] s, the ticks.
      inputs: [T, n_inputs] state inputs in their units (the learner normalizes them).
      cumulants: [T, Q] each question's transformed cumulant in the latest messages.
      continuations: [T, Q] 0 where a question's termination holds, else 1.
      usable: [T] the tick is fresh and finite for every question.
      messages: {topic: messages read}.
      skips: {"stale": ticks, "non_finite": ticks}: ticks where some topic is stale, and where
        none is but some value is not finite.
      usable_questions: [T, Q] the tick is fresh and finite for question q (its topics and the state's).
      stale_topics: {topic: ticks where it is stale}.
      policy: [T, 3, Q] the off-policy questions' readings, as :class:`~gamma_net_core.horde.policies.PolicyReadings`
        holds them (action, equals reference, behaviour's probability; NaN where a question has none); None
        where no question has a policy. A reading a question has but that is not finite stops it at that tick.
    """

    times: np.ndarray
    inputs: np.ndarray
    cumulants: np.ndarray
    continuations: np.ndarray
    usable: np.ndarray
    messages: dict[str, int]
    skips: dict[str, int]
    usable_questions: np.ndarray | None = None
    stale_topics: dict[str, int] | None = None
    policy: np.ndarray | None = None

    def transitions(self) -> np.ndarray:
        """Indices t whose transition (tick t -> tick t + 1) is learned: both ticks usable."""
        ok = self.usable[:-1] & self.usable[1:]
        return np.flatnonzero(ok)


def read_signals(path: str | pathlib.Path, spec: HordeSpec) -> SampledSignals:
    """Sample a recording's topics for ``spec`` (see the module docstring).

    Raises:
      FileNotFoundError: nothing at ``path``.
      BagError: not a bag, a topic missing or of another type.
      ValueError: a field that does not exist or is not numeric (naming path and type), or too
        few ticks.
    """
    path = pathlib.Path(path)
    topics = spec.topics()
    signals = spec.signals()
    times, values = _read_topics(path, topics, signals)
    empty = sorted(t for t, ts in times.items() if not ts)
    if empty:
        raise BagError(f"{path}: topics {empty} have no messages")
    start = max(ts[0] for ts in times.values())
    stop = max(ts[-1] for ts in times.values())
    ticks = start + np.arange(int(np.floor((stop - start) * spec.rate_hz)) + 1) / spec.rate_hz
    if ticks.shape[0] < 2:
        raise ValueError(f"{path}: the topics overlap for {stop - start:.3f} s, under two ticks at {spec.rate_hz} Hz")
    fresh: dict[str, np.ndarray] = {}
    latest: dict[str, np.ndarray] = {}
    for topic, ts in times.items():
        t = np.asarray(ts)
        idx = np.searchsorted(t, ticks, side="right") - 1
        latest[topic] = idx
        fresh[topic] = ticks - t[idx] <= spec.stale_after(topic)
    stale = ~np.logical_and.reduce(list(fresh.values()))
    sampled = [np.asarray(values[i])[latest[s.topic]] for i, s in enumerate(signals)]
    n_state = len(spec.state)
    inputs = np.stack([[s.apply(v) for v in sampled[i]] for i, s in enumerate(spec.state)], axis=1)
    cumulants = np.empty((ticks.shape[0], len(spec.questions)))
    continuations = np.ones_like(cumulants)
    policy = np.full((ticks.shape[0], 3, len(spec.questions)), np.nan) if any(spec.policies) else None
    k = n_state
    for q, question in enumerate(spec.questions):
        cumulants[:, q] = [question.cumulant.apply(v) for v in sampled[k]]
        k += 1
        if question.termination is not None:
            continuations[:, q] = [question.termination.continuation(v) for v in sampled[k]]
            k += 1
        p = question.policy
        for i, signal in enumerate(() if p is None else (p.action, p.reference, p.probability)):
            if signal is not None:
                policy[:, i, q] = [signal.apply(v) for v in sampled[k]]
                k += 1
    state_ok = np.all(np.isfinite(inputs), axis=1)
    for topic in spec.state_topics():
        state_ok &= fresh[topic]
    usable_questions = np.isfinite(cumulants) & state_ok[:, None]
    if policy is not None:  # a question's reading not finite: no rho, the question stops there (as the node does)
        for q, p in enumerate(spec.policies):
            if p is not None:
                has = [s is not None for s in (p.action, p.reference, p.probability)]
                usable_questions[:, q] &= np.all(np.isfinite(policy[:, has, q]), axis=1)
    for q, topics in enumerate(spec.question_topics()):
        for topic in topics:
            usable_questions[:, q] &= fresh[topic]
    finite = np.all(np.isfinite(inputs), axis=1) & np.all(np.isfinite(cumulants), axis=1)
    return SampledSignals(
        times=ticks,
        inputs=inputs,
        cumulants=cumulants,
        continuations=continuations,
        usable=usable_questions.all(axis=1),
        messages={t: len(ts) for t, ts in times.items()},
        skips={"stale": int(stale.sum()), "non_finite": int((~finite & ~stale).sum())},
        usable_questions=usable_questions,
        stale_topics={topic: int((~f).sum()) for topic, f in fresh.items()},
        policy=policy,
    )


def _read_topics(path: pathlib.Path, topics, signals) -> tuple[dict[str, list[float]], dict[int, list[float]]]:
    """Each topic's receive times (s) and each signal's value per message of its topic, checked against the bag."""
    reader = open_reader(path)
    try:
        found = {c.topic: c.msgtype for c in reader.connections}
        # Every signal, not only the first of each topic: a second one naming another (or no real)
        # type would otherwise be read as the first one's type.
        for signal in signals:
            if signal.topic not in found:
                raise BagError(
                    f"{path} has no topic {signal.topic!r} (the questions need it); its topics: {found or 'none'}"
                )
            if found[signal.topic] != signal.type:
                raise BagError(
                    f"topic {signal.topic!r} in {path} carries {found[signal.topic]}, not {signal.type} as the "
                    f"questions say for field {signal.field!r}"
                )
        by_topic = {t: [(i, s) for i, s in enumerate(signals) if s.topic == t] for t in topics}
        times: dict[str, list[float]] = {t: [] for t in topics}
        values: dict[int, list[float]] = {i: [] for i in range(len(signals))}
        connections = [c for c in reader.connections if c.topic in topics]
        for connection, receive_ns, message in read_messages(reader, connections, path):
            times[connection.topic].append(receive_ns / NANOSECONDS)
            for i, signal in by_topic[connection.topic]:
                values[i].append(signal.resolve(message))
    finally:
        reader.close()
    return times, values
