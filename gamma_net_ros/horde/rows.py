"""The horde node's rows: the latest messages turned into the learner's inputs, cumulants and continuations.

Each question is judged on its own (:class:`Reading`): a question is usable where the state is
(every state input fresh, readable and finite: the state is shared, so a state input that is not
stops every question) and its own cumulant and termination are. A stale or silent topic leaves
its fields unread; a field that cannot be read (a joint the messages lack) or is not finite
after REP 117 (a NaN beam: no reading; an infinity no range limit or ``inf_as`` reads), or whose
transform is not finite, stops the questions that read it, and the reason is kept for the node
to say once.
"""

from __future__ import annotations

import array
import math
from dataclasses import dataclass, field

import numpy as np
from gamma_net_msgs.msg import PredictionArray, RealizedReturns

from gamma_net_core.horde.online_error import RealizedReturns as Realized
from gamma_net_core.horde.policies import PolicyReadings
from gamma_net_core.horde.questions import HordeSpec
from gamma_net_ros.horde.topics import check_field, message_class


def doubles(values) -> array.array:
    # array.array is taken by rclpy as is; a list would be checked element by element.
    return array.array("d", np.ascontiguousarray(values, dtype=np.float64).tobytes())


@dataclass
class Reading:
    """One tick's row: NaN where a value could not be read; ``usable`` [Q] says which questions learn.

    ``errors``: {signal label: why its field could not be read}, a label being ``state`` or a
    question's name.
    """

    inputs: np.ndarray
    cumulants: np.ndarray
    continuations: np.ndarray
    usable: np.ndarray
    state_ok: bool
    errors: dict[str, str] = field(default_factory=dict)
    policy: PolicyReadings | None = None  # the off-policy questions' action readings (None: no question has one)


class Row:
    """Turns the latest message of each topic into the learner's row: inputs, cumulants, continuations.

    Each distinct field source (topic, field, REP 117 values) is read once per tick, and each
    distinct cumulant and termination computed once, however many questions use it (thousands of
    questions share a few dozen). Every value is read as :meth:`Transformed.read` reads it (the
    field per REP 117, then the transform): the reflex reads its present signals the same way.
    """

    def __init__(self, spec: HordeSpec) -> None:
        sources: dict[tuple, int] = {}
        signals = []  # one signal per source: the one that reads it

        def slot(signal) -> int:
            if signal.source not in sources:
                sources[signal.source] = len(signals)
                signals.append(signal)
            return sources[signal.source]

        self.names = spec.names
        self.state = [(slot(s), s) for s in spec.state]
        self.cumulants = [(slot(q.cumulant), q.cumulant.apply) for q in spec.questions]
        self.terminations = [
            (slot(q.termination), q.termination.continuation) if q.termination is not None else None
            for q in spec.questions
        ]
        cumulants, ends = {}, {}  # each distinct signal -> its place; a question without termination: the last
        of = [cumulants.setdefault(q.cumulant, len(cumulants)) for q in spec.questions]
        self.cumulant_of = np.array(of, dtype=np.intp)
        self.distinct_cumulants = [(slot(c), c) for c in cumulants]
        ends_of = [-1 if q.termination is None else ends.setdefault(q.termination, len(ends)) for q in spec.questions]
        self.termination_of = np.array([len(ends) if e < 0 else e for e in ends_of], dtype=np.intp)
        self.distinct_terminations = [(slot(t), t.continuation) for t in ends]
        # each question's policy signals: (slot, signal) of its action, reference and behaviour probability
        self.policies = [
            None if q.policy is None else [None if s is None else (slot(s), s) for s in
                                           (q.policy.action, q.policy.reference, q.policy.probability)]
            for q in spec.questions
        ]  # fmt: skip
        self.reads = [(signal.topic, signal) for signal in signals]
        self.cumulant_slots = np.array([k for k, _ in self.cumulants], dtype=np.intp)
        self.terminated = np.array([t is not None for t in self.terminations])
        self.termination_slots = np.array([t[0] if t else 0 for t in self.terminations], dtype=np.intp)

    def __call__(self, messages: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The row of every question. ValueError naming the first field that cannot be read or is not finite."""
        reading = self.read(messages)
        if reading.errors:
            raise ValueError(next(iter(reading.errors.values())))
        return reading.inputs, reading.cumulants, reading.continuations

    def read(self, messages: dict) -> Reading:
        """The row of ``messages`` ({topic: latest fresh message}; a topic left out is stale or silent)."""
        read, why = [], {}  # a Python list: each value is used as a float below, not as an array element
        for topic, signal in self.reads:
            message = messages.get(topic)
            if message is None:
                read.append(math.nan)
                continue
            try:
                read.append(signal.resolve(message))
            except ValueError as exc:
                why[len(read)] = str(exc)
                read.append(math.nan)
        values = np.array(read)
        finite = np.isfinite(values)
        if not finite.all():
            for k in np.flatnonzero(~finite):
                topic, signal = self.reads[k]
                if k not in why and topic in messages:
                    why[int(k)] = _not_finite(signal, topic, read[k])
        inputs = np.array([s.apply(read[k]) for k, s in self.state])
        state_ok = bool(np.isfinite(inputs).all())
        errors = {}
        if not state_ok:  # the first input's reason; none where its topic is stale or silent (counted apart)
            reasons = [
                why.get(k) if not math.isfinite(read[k]) else _not_finite_after(s, read[k])
                for (k, s), v in zip(self.state, inputs)
                if not math.isfinite(v)
            ]
            if any(reasons):
                errors["state"] = next(r for r in reasons if r)
        # a signal that cannot be read gives NaN, and so does its transform: NaN is "no value" everywhere
        kinds = np.array([c.apply(read[k]) for k, c in self.distinct_cumulants])
        ends = np.array([continuation(read[k]) for k, continuation in self.distinct_terminations] + [1.0])
        usable = np.isfinite(kinds[self.cumulant_of]) & (finite[self.termination_slots] | ~self.terminated) & state_ok
        cumulants = np.where(usable, kinds[self.cumulant_of], np.nan)
        continuations = np.where(usable, ends[self.termination_of], 1.0)
        policy = self._policy(read) if any(self.policies) else None
        if policy is not None:  # an action (or its reference, or b) not read: no rho, the question stops
            for q, signals in enumerate(self.policies):
                why_not = _unread_policy(policy, q, signals or (), read, why)
                if why_not is not None and usable[q]:
                    usable[q] = False
                    if why_not:  # "": a stale or silent topic (counted apart)
                        errors[self.names[q]] = why_not
            cumulants = np.where(usable, cumulants, np.nan)
            continuations = np.where(usable, continuations, 1.0)
        for q in np.flatnonzero(~usable).tolist():
            if self.names[q] in errors:
                continue
            (k, _), termination = self.cumulants[q], self.terminations[q]
            slots = [k] if termination is None else [k, termination[0]]
            errors.update({self.names[q]: why[j] for j in slots[::-1] if j in why})  # noqa: B035 - the first
            if self.names[q] not in errors and k not in why and math.isfinite(read[k]):
                cumulant = self.distinct_cumulants[self.cumulant_of[q]][1]
                errors[self.names[q]] = _not_finite_after(cumulant, read[k])
        return Reading(inputs, cumulants, continuations, usable, state_ok, errors, policy)

    def _policy(self, read: list) -> PolicyReadings:
        """[Q] action, reference and behaviour probability of each question (NaN: none, or not readable)."""
        out = np.full((3, len(self.names)), np.nan)
        for q, signals in enumerate(self.policies):
            for i, pair in enumerate(signals or ()):
                if pair is not None:
                    out[i, q] = pair[1].apply(read[pair[0]])
        return PolicyReadings(*out)


def _unread_policy(policy: PolicyReadings, q: int, signals, read: list, why: dict) -> str | None:
    """Why question ``q``'s rho cannot be formed ("" for a stale topic), or None where it can."""
    for i, (values, pair) in enumerate(zip(policy, signals)):
        if pair is None:
            continue
        k, signal = pair
        value = values[q]
        if i == 2 and math.isfinite(value) and not 0.0 < value <= 1.0:
            return f"behaviour probability {signal.field!r} on {signal.topic} is {value!r}, not in (0, 1]"
        if not math.isfinite(value):
            if k in why:
                return why[k]
            return _not_finite_after(signal, read[k]) if math.isfinite(read[k]) else ""
    return None


def _not_finite(signal, topic: str, value: float) -> str:
    """Why a field's value is not usable, with what would make an infinity one."""
    line = f"field {signal.field!r} on {topic} is {value}"
    if math.isinf(value):
        key = "inf_as" if value > 0 else "minus_inf_as"
        line += f" (no REP 117 range limit beside it: name what it reads as with {key})"
    return line


def _not_finite_after(signal, value: float) -> str:
    return f"field {signal.field!r} on {signal.topic}: transform {signal.transform} of {value!r} is not finite"


def check_signals(spec: HordeSpec) -> None:
    """What could never be read, refused before the first tick: ValueError naming the question and field.

    A type that is not installed, a field it lacks, an index beyond a fixed-size array, or a
    topic given a second type (one subscription carries one type: the signals naming the other
    could never be read).
    """
    labelled = [(f"state[{i}]", s) for i, s in enumerate(spec.state)]
    for q in spec.questions:
        labelled.append((f"question {q.name!r} cumulant", q.cumulant))
        if q.termination is not None:
            labelled.append((f"question {q.name!r} termination", q.termination))
        if q.policy is not None:
            labelled.extend((f"question {q.name!r} policy", s) for s in q.policy.signals())
    first: dict[str, tuple[str, str]] = {}  # topic -> (label, type) of the first signal on it
    for label, signal in labelled:
        try:
            cls = message_class(signal.type)
            check_field(cls, signal.field)
        except ValueError as exc:
            raise ValueError(f"{label} on {signal.topic}: {exc}") from None
        label_then, type_then = first.setdefault(signal.topic, (label, signal.type))
        if cls is not message_class(type_then):  # pkg/Type and pkg/msg/Type name one class
            raise ValueError(
                f"{label} on {signal.topic}: type {signal.type}, but {label_then} on the same topic says "
                f"{type_then}; a topic carries one type"
            )


def stamp_of(msg):
    """The header stamp of ``msg``, or None where it has no header or an unset (zero) stamp."""
    header = getattr(msg, "header", None)
    stamp = getattr(header, "stamp", None)
    if stamp is None or (stamp.sec == 0 and stamp.nanosec == 0):
        return None
    return stamp


def prediction_array(names, gammas, readout_names, table: np.ndarray, stamp, update_count: int) -> PredictionArray:
    """The PredictionArray of ``table`` [Q, G + R]: the published gammas, then the readouts (NaN: stopped)."""
    n = len(gammas)
    msg = PredictionArray()
    msg.header.stamp = stamp
    msg.questions = list(names)
    msg.gammas = doubles(gammas)
    msg.values = doubles(table[:, :n].reshape(-1))
    msg.readouts = list(readout_names)
    msg.readout_values = doubles(table[:, n:].reshape(-1))
    msg.update_count = int(update_count)
    return msg


def returns_msg(names, gammas, readout_names, realized: Realized, stamp, update_count: int) -> RealizedReturns:
    """The RealizedReturns of this tick (``horde/returns``): [Q x (G + R)], row-major, NaN where none completed."""
    msg = RealizedReturns()
    msg.header.stamp = stamp
    msg.questions = list(names)
    msg.gammas = doubles(gammas)
    msg.readouts = list(readout_names)
    msg.returns = doubles(realized.returns.reshape(-1))
    msg.predictions = doubles(realized.predictions.reshape(-1))
    msg.steps_ago = array.array("I", np.ascontiguousarray(realized.steps_ago, dtype=np.uint32).tobytes())
    msg.update_count = int(update_count)
    return msg


def freeze_start_up_objects() -> None:
    """Move every object alive now (modules, numba's compiled kernels, the learner) out of the collector's reach.

    A full collection walks every tracked object; after start-up that is some hundreds of
    thousands (numpy, numba, rclpy), so each one held the node for milliseconds, and the ticks
    that arrived meanwhile came out late together. Frozen, the collector walks only what was
    made since. Nothing frozen is freed (it lives as long as the node anyway).
    """
    import gc

    gc.collect()  # what start-up left as garbage is freed first, not frozen
    gc.freeze()


def prediction_table(learner, inputs: np.ndarray, gammas: np.ndarray) -> np.ndarray:
    """[Q, G + R]: each question's prediction at ``gammas``, then under each of the learner's readouts."""
    values = learner.predict(inputs, gammas)
    readouts = [learner.readout(inputs, name) for name in learner.readout_names]
    return np.column_stack([values, *readouts])


def question_index(names: list[str], name: str) -> int:
    """The index of question ``name`` ('' for the only one); ValueError naming the questions there are."""
    if not name:
        if len(names) == 1:
            return 0
        raise ValueError(f"name a question: one of {names}")
    if name not in names:
        raise ValueError(f"no question {name!r}; questions: {names}")
    return names.index(name)


def answer(response, learner, question: int, gammas, inputs, stamp):
    """``response`` (a PredictAt reply) filled with ``question``'s prediction at ``gammas`` from the latest state."""
    if inputs is None:
        raise ValueError("no sampled state yet: every topic must publish first")
    response.values = doubles(learner.predict(inputs, gammas)[question])
    response.success = True
    response.header.stamp = stamp
    response.question = learner.names[question]
    response.gammas = doubles(gammas)
    response.update_count = int(learner.update_count)
    return response
