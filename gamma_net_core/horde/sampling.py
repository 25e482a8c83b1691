"""A recording's topics sampled as the horde node samples them live: the latest message of each, on a fixed clock.

Every topic the questions name is read from a rosbag2 (or rosbag1) with the `rosbags` library
(any message type the bag's connections define), each field resolved with
:mod:`gamma_net_core.horde.fields`. The clock ticks every 1 / rate_hz seconds of the bag's
receive time, from the first moment every topic has published to the last message. At each
tick every signal takes its topic's latest message at or before the tick; a tick where some
topic's latest message is older than ``stale_after_s`` (or a value is not finite) is skipped
and counted, and the transition into and out of it is not learned (the node restarts there).
"""

from __future__ import annotations

import pathlib
from dataclasses import dataclass

import numpy as np

from gamma_net_core.data.bags import BagError, open_reader, read_messages
from gamma_net_core.data.joints import NANOSECONDS
from gamma_net_core.horde.fields import parse_field
from gamma_net_core.horde.questions import HordeSpec


@dataclass(frozen=True)
class SampledSignals:
    """The signals on the clock.

    Attributes:
      times: [T] s, the ticks.
      inputs: [T, n_inputs] state inputs in their units (the learner normalizes them).
      cumulants: [T, Q] each question's transformed cumulant in the latest messages.
      continuations: [T, Q] 0 where a question's termination holds, else 1.
      usable: [T] the tick is fresh and finite.
      messages: {topic: messages read}.
      skips: {"stale": ticks, "non_finite": ticks}.
    """

    times: np.ndarray
    inputs: np.ndarray
    cumulants: np.ndarray
    continuations: np.ndarray
    usable: np.ndarray
    messages: dict[str, int]
    skips: dict[str, int]

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
    reader = open_reader(path)
    try:
        found = {c.topic: c.msgtype for c in reader.connections}
        signals = spec.signals()
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
        by_topic = {t: [(i, parse_field(s.field)) for i, s in enumerate(signals) if s.topic == t] for t in topics}
        times: dict[str, list[float]] = {t: [] for t in topics}
        values: dict[int, list[float]] = {i: [] for i in range(len(signals))}
        connections = [c for c in reader.connections if c.topic in topics]
        for connection, receive_ns, message in read_messages(reader, connections, path):
            times[connection.topic].append(receive_ns / NANOSECONDS)
            for i, field in by_topic[connection.topic]:
                values[i].append(field.resolve(message))
    finally:
        reader.close()
    empty = sorted(t for t, ts in times.items() if not ts)
    if empty:
        raise BagError(f"{path}: topics {empty} have no messages")
    start = max(ts[0] for ts in times.values())
    stop = max(ts[-1] for ts in times.values())
    ticks = start + np.arange(int(np.floor((stop - start) * spec.rate_hz)) + 1) / spec.rate_hz
    if ticks.shape[0] < 2:
        raise ValueError(f"{path}: the topics overlap for {stop - start:.3f} s, under two ticks at {spec.rate_hz} Hz")
    stale = np.zeros(ticks.shape[0], dtype=bool)
    latest: dict[str, np.ndarray] = {}
    for topic, ts in times.items():
        t = np.asarray(ts)
        idx = np.searchsorted(t, ticks, side="right") - 1
        latest[topic] = idx
        stale |= ticks - t[idx] > spec.stale_after_s
    sampled = [np.asarray(values[i])[latest[s.topic]] for i, s in enumerate(signals)]
    n_state = len(spec.state)
    inputs = np.stack(sampled[:n_state], axis=1)
    cumulants = np.empty((ticks.shape[0], len(spec.questions)))
    continuations = np.ones_like(cumulants)
    k = n_state
    for q, question in enumerate(spec.questions):
        cumulants[:, q] = [question.cumulant.apply(v) for v in sampled[k]]
        k += 1
        if question.termination is not None:
            continuations[:, q] = [question.termination.continuation(v) for v in sampled[k]]
            k += 1
    finite = np.all(np.isfinite(inputs), axis=1) & np.all(np.isfinite(cumulants), axis=1)
    return SampledSignals(
        times=ticks,
        inputs=inputs,
        cumulants=cumulants,
        continuations=continuations,
        usable=~stale & finite,
        messages={t: len(ts) for t, ts in times.items()},
        skips={"stale": int(stale.sum()), "non_finite": int((~finite & ~stale).sum())},
    )
