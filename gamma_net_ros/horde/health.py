"""The horde node's health: which topics are stale or silent and which questions they stop, on /diagnostics.

:class:`Watch` is told each tick's sample and reading. It counts the ticks skipped for every
question (the state's topic stale, silent or unreadable: the state is shared by all questions),
the ticks each topic was stale and each question stopped, says once per question why a field
of it cannot be read (a joint the messages lack, naming the names there are), and finds a topic
published with another type than declared (its publishers' types, checked once a second): one
error line naming both, repeated throttled, and an ERROR on /diagnostics. Nothing of it stops
the node: the other questions keep learning.
"""

from __future__ import annotations

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from gamma_net_msgs.msg import PredictionErrors

from gamma_net_core.horde.questions import HordeSpec
from gamma_net_ros.conversions import clock_seconds
from gamma_net_ros.diagnostics import ERROR, OK, WARN, Health
from gamma_net_ros.horde.rows import Reading, doubles


def full_type_name(name: str) -> str:
    """``pkg/msg/Type`` for ``pkg/Type`` or ``pkg/msg/Type``."""
    parts = name.strip().split("/")
    return f"{parts[0]}/msg/{parts[1]}" if len(parts) == 2 else name.strip()


class Watch:
    """What the node reports of its topics and questions (see the module docstring)."""

    def __init__(self, node, spec: HordeSpec, sampler, settings) -> None:
        self.node = node
        self.sampler = sampler
        self.settings = settings
        self.started = clock_seconds(node)
        self.tick_rate = (self.started, 0)  # (since, ticks then): the measured tick rate on /diagnostics
        self.last_error_statuses: float | None = None
        self.names = list(spec.names)
        self.state_topics = spec.state_topics()
        self.readers = {
            topic: sorted(n for n, ts in zip(self.names, spec.question_topics()) if topic in ts)
            for topic in spec.topics()
        }
        self.skipped = {"silent": 0, "stale": 0, "unreadable": 0, "refused": 0, "warming_up": 0}
        self.stale_topics: dict[str, int] = {}
        self.stopped: dict[str, int] = {}  # ticks each question did not learn (while others did)
        self.said: set[str] = set()  # the questions whose unreadable field was reported
        self.wrong_types: dict[str, str] = {}  # topic -> the type its publishers use instead
        # Stale since the last report, not only at it: a 1 Hz topic read by a 1 Hz report in step
        # with it would be fresh at every report and never named.
        self.stale_since_report: dict[str, int] = {}
        self.ticks_since_report = 0
        self.unreadable: dict[str, str] = {}

    def stops(self, topic: str) -> str:
        """The questions ``topic`` stops, in words."""
        if topic in self.state_topics:
            return "every question (a state input: the state is shared)"
        return f"questions {self.readers[topic]}"

    def note(self, sample, reading: Reading) -> None:
        """Count this tick's stale topics and stopped questions; say once per question why a field cannot be read."""
        self.ticks_since_report += 1
        for name in sample.stale + sample.silent:
            self.stale_since_report[name] = self.stale_since_report.get(name, 0) + 1
        if sample.silent and clock_seconds(self.node) - self.started >= self.settings.silent_warning_s:
            self.node.get_logger().warning(
                "; ".join(f"no message yet on {t}: {self.stops(t)} stopped" for t in sample.silent),
                throttle_duration_sec=10.0,
            )
        for name in sample.stale:
            self.stale_topics[name] = self.stale_topics.get(name, 0) + 1
        self.unreadable = reading.errors
        for label, why in reading.errors.items():
            if label not in self.said:
                self.said.add(label)
                who = "every question (a state input)" if label == "state" else f"question {label!r}"
                self.node.get_logger().error(f"{who} stopped: {why}")
        if not reading.state_ok:
            state_silent = [t for t in sample.silent if t in self.state_topics]
            kind = "silent" if state_silent else "stale" if sample.stale else "unreadable"
            self.skipped[kind] += 1
            if kind == "unreadable":
                self.node.get_logger().warning(
                    f"skipped a tick: {reading.errors.get('state')}; {self.skipped[kind]} so far",
                    throttle_duration_sec=5.0,
                )
            return
        for q in np.flatnonzero(~reading.usable):
            self.stopped[self.names[q]] = self.stopped.get(self.names[q], 0) + 1

    def refused(self, exc: Exception) -> None:
        """The learner refused the update (it is unchanged): counted and said, throttled."""
        self.skipped["refused"] += 1
        self.node.get_logger().warning(
            f"update refused, learner unchanged: {exc}; {self.skipped['refused']} so far", throttle_duration_sec=5.0
        )

    def check_types(self) -> None:
        """For each silent topic, its publishers' types: another than declared is an error line naming both.

        The publishers' own (the graph's list of a topic's types holds this node's subscription too).
        """
        for name, topic in self.sampler.topics.items():
            if topic.latest is not None:
                self.wrong_types.pop(name, None)
                continue
            declared = full_type_name(topic.type_name)
            types = sorted({full_type_name(p.topic_type) for p in self.node.get_publishers_info_by_topic(name)})
            if types and declared not in types:
                self.wrong_types[name] = ", ".join(types)
                self.node.get_logger().error(
                    f"refusing {name}: published as {self.wrong_types[name]}, but the questions declare {declared}; "
                    f"{self.stops(name)} stopped",
                    throttle_duration_sec=10.0,
                )
            else:
                self.wrong_types.pop(name, None)

    def health(self, *, ticks: int, processed: int, updates: int, saved: str) -> Health:
        """ERROR for a topic of another type, WARN for silent ones and those stale on a tick since the last report.

        Each names what it stops; a stale one also on how many of the ticks since the last report.
        ``ticks`` (received) and ``processed`` (of those, the ticks that reached the learner) are
        reported as such.
        """
        self.check_types()
        since, ticks_then = self.tick_rate
        now = clock_seconds(self.node)
        self.tick_rate = (now, ticks)
        values = {
            "tick_source": self.settings.tick_topic or "clock",
            "ticks_per_s": f"{(ticks - ticks_then) / (now - since):.3g}" if now > since else "-",
            "received": ticks,
            "processed": processed,
            "updates": updates,
        }
        silent = [name for name, topic in self.sampler.topics.items() if topic.latest is None]
        said = {
            name: f"{name} is {types}, not {full_type_name(self.sampler.topics[name].type_name)}"
            for name, types in self.wrong_types.items()
        }
        said.update({name: f"no message yet on {name}" for name in silent if name not in said})
        ticks_seen, self.ticks_since_report = self.ticks_since_report, 0
        stale, self.stale_since_report = self.stale_since_report, {}
        said.update({name: f"{name} stale on {n} of the last {ticks_seen} ticks" for name, n in stale.items()
                     if name not in said})  # fmt: skip
        lines = [f"{text}: stops {self.stops(name)}" for name, text in said.items()]
        lines += [f"{label}: {why}" for label, why in self.unreadable.items()]
        skipped = sum(self.skipped.values())
        message = "; ".join(lines) or (f"{skipped} ticks skipped" if skipped else "learning")
        level = ERROR if self.wrong_types else WARN if lines or skipped else OK
        values = {
            **values,
            "skipped": skipped,
            **{f"skipped.{kind}": count for kind, count in self.skipped.items()},
            **{f"stale.{name}": count for name, count in self.stale_topics.items()},
            **{f"stopped.{name}": count for name, count in self.stopped.items()},
            **{f"received.{name}": topic.received for name, topic in self.sampler.topics.items()},
            "last_checkpoint": saved,
        }
        return Health(level, message, values)

    def error_statuses(self, taus, errors: PredictionErrors) -> list[DiagnosticStatus]:
        """Each question's error status, every ``error_diagnostics_period`` s (else none)."""
        now = clock_seconds(self.node)
        last = self.last_error_statuses
        if last is not None and now - last < self.settings.error_diagnostics_period - 1e-6:
            return []
        self.last_error_statuses = now
        return error_statuses(self.node.get_name(), self.names, taus, errors)


def error_statuses(node_name: str, names, taus, errors: PredictionErrors) -> list[DiagnosticStatus]:
    """One status per question: its running error and the mean predictor's, per tau and readout."""
    columns = [f"tau {tau:g}" for tau in taus] + list(errors.readouts)
    statuses = []
    for q, name in enumerate(names):
        cells = range(q * len(columns), (q + 1) * len(columns))
        status = DiagnosticStatus(name=f"{node_name}: {name} error", hardware_id="gamma_net")
        status.message = f"{min(errors.samples[k] for k in cells)} returns scored (rmse / mean-predictor rmse)"
        status.values = [
            KeyValue(key=column, value=f"{errors.rmse[k]:.4g} / {errors.mean_rmse[k]:.4g}")
            for column, k in zip(columns, cells)
        ]
        statuses.append(status)
    return statuses


def errors_msg(names, gammas, readout_names, errors) -> PredictionErrors:
    """The running errors as a message (``horde/errors``): [Q x (G + R)], row-major."""
    msg = PredictionErrors()
    msg.questions = list(names)
    msg.gammas = doubles(gammas)
    msg.readouts = list(readout_names)
    msg.rmse = doubles(errors.rmse().reshape(-1))
    msg.mean_rmse = doubles(errors.baseline_rmse().reshape(-1))
    msg.samples = [int(n) for n in errors.counts.reshape(-1)]
    return msg


def start_line(node) -> str:
    """The node's first log line: its questions, topics, ticks, timescales and checkpoint."""
    ticks = f"on each message of {node.tick_topic} (expected at" if node.tick_topic else "on a clock at"
    return (
        f"{len(node.names)} questions {node.names} from {sorted(node.sampler.topics)}, ticking {ticks} "
        f"{node.spec.rate_hz:g} Hz{')' if node.tick_topic else ''}; "
        f"publishing tau {node.published.taus} and readouts {list(node.learner.readout_names)}; "
        f"checkpoint {node.keeper}"
    )
