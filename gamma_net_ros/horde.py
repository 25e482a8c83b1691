"""Node: a Horde of Γ-nets learning many questions (GVFs) from any topics, on a clock or a topic.

    ros2 run gamma_net_ros horde --ros-args -p questions_file:=config/horde.yaml
    ros2 topic echo /horde/predictions

(The questions file is not a ROS parameters file: the node's own parameters are set with -p or
a launch file. With ``use_sim_time`` the clock is /clock, e.g. ``ros2 bag play --clock``.)

The questions YAML (``questions_file``; gamma_net_core.horde.questions) names each question's
cumulant and termination as fields of topics, and the state inputs likewise. The node subscribes
to every topic those name (message classes resolved from their type names at start), and on each
tick samples the latest message of each, learns one step of every question at once
(:class:`gamma_net_core.horde.learner.HordeLearner`) and publishes a
``gamma_net_msgs/PredictionArray`` at ``publish_timescales`` with the named readouts. A tick
where a topic is silent or older than the stale limit is skipped and counted.

Ticks come from the node's clock at the questions' ``rate_hz`` by default. With ``tick_topic``
(one of the questions' topics, e.g. ``/joint_states``) every message on that topic is a tick
instead: the prediction goes out as soon as the message arrives, not up to a period later, and
is stamped with the message's header stamp where it has one. The other topics are still read
at their latest value, with the same stale limit; ``rate_hz`` is then the rate the topic is
expected to publish at, the time base of the timescales (tau is in ticks), and the measured
tick rate is on ``/diagnostics``.

A new learner publishes from its second tick, the first that learns (the first only records the
state; a resumed or frozen one publishes from its first). ``predict_at`` answers any question by
name at any timescales. The running error of each
question at each published timescale against its realized return is published on
``horde/errors`` and ``/diagnostics``. The learner is checkpointed atomically and resumed as the predictor's is.
"""

from __future__ import annotations

import array
import math
import pathlib
import sys

import numpy as np
from diagnostic_msgs.msg import DiagnosticStatus, KeyValue
from gamma_net_msgs.msg import PredictionArray, PredictionErrors
from gamma_net_msgs.srv import PredictAt
from rclpy.node import Node

from gamma_net_core.horde.fields import parse_field
from gamma_net_core.horde.learner import HordeLearner
from gamma_net_core.horde.online_error import OnlineError
from gamma_net_core.horde.questions import HordeSpec, load_questions
from gamma_net_core.horde.shares import share_spec
from gamma_net_core.warmup import warm_horde
from gamma_net_ros.conversions import clock_seconds
from gamma_net_ros.diagnostics import OK, WARN, Diagnostics, Health
from gamma_net_ros.horde_topics import TopicSampler, check_field, message_class
from gamma_net_ros.learner_checkpoint import CheckpointHooks, LearnerCheckpoint
from gamma_net_ros.node_main import run_node
from gamma_net_ros.params import declare
from gamma_net_ros.paths import config_file
from gamma_net_ros.predictions import PublishedTimescales, TimescaleRequests, refuse


def _doubles(values) -> array.array:
    # array.array is taken by rclpy as is; a list would be checked element by element.
    return array.array("d", np.ascontiguousarray(values, dtype=np.float64).tobytes())


class Row:
    """Turns the latest message of each topic into the learner's row: inputs, cumulants, continuations.

    Each distinct (topic, field) is read once per tick, however many questions use it.
    """

    def __init__(self, spec: HordeSpec) -> None:
        fields: dict[tuple[str, str], int] = {}

        def slot(signal) -> int:
            return fields.setdefault((signal.topic, signal.field), len(fields))

        self.state = [slot(s) for s in spec.state]
        self.cumulants = [(slot(q.cumulant), q.cumulant.apply) for q in spec.questions]
        self.terminations = [
            (slot(q.termination), q.termination.continuation) for q in spec.questions if q.termination is not None
        ]
        self.terminating = [i for i, q in enumerate(spec.questions) if q.termination is not None]
        self.n_questions = len(spec.questions)
        self.reads = [(topic, parse_field(field)) for (topic, field) in fields]

    def __call__(self, messages: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """ValueError naming the field that cannot be read or is not finite."""
        values = [path.resolve(messages[topic]) for topic, path in self.reads]
        for value, (topic, path) in zip(values, self.reads):
            if not math.isfinite(value):
                raise ValueError(f"field {path.path!r} on {topic} is {value}")
        inputs = np.array([values[i] for i in self.state])
        cumulants = np.array([apply(values[i]) for i, apply in self.cumulants])
        continuations = np.ones(self.n_questions)
        continuations[self.terminating] = [continuation(values[i]) for i, continuation in self.terminations]
        return inputs, cumulants, continuations


def _freeze_start_up_objects() -> None:
    """Move every object alive now (modules, numba's compiled kernels, the learner) out of the collector's reach.

    A full collection walks every tracked object; after start-up that is some hundreds of
    thousands (numpy, numba, rclpy), so each one held the node for milliseconds, and the ticks
    that arrived meanwhile came out late together. Frozen, the collector walks only what was
    made since. Nothing frozen is freed (it lives as long as the node anyway).
    """
    import gc

    gc.collect()  # what start-up left as garbage is freed first, not frozen
    gc.freeze()


def _stamp(msg):
    """The header stamp of ``msg``, or None where it has no header or an unset (zero) stamp."""
    header = getattr(msg, "header", None)
    stamp = getattr(header, "stamp", None)
    if stamp is None or (stamp.sec == 0 and stamp.nanosec == 0):
        return None
    return stamp


class Horde(CheckpointHooks, Node):
    def __init__(self, *, take_input_now: bool = True, **kwargs) -> None:
        super().__init__("horde", **kwargs)
        self.keeper = None  # nothing of ours to save until __init__ completes
        path = declare(self, "questions_file", "", "the questions YAML ('' = config/horde.yaml)", read_only=True)
        self.spec = load_questions(pathlib.Path(path).expanduser() if path else config_file("horde"))
        share = declare(
            self, "share", "", "the questions learned here: '' all, 'i/n' the i-th of n shares by name, or 'a,b'",
            read_only=True,
        )  # fmt: skip
        self.spec = share_spec(self.spec, share)  # several hordes, one set of questions (docs/horde.md)
        self.tick_topic = declare(
            self,
            "tick_topic",
            "",
            "a questions' topic whose every message is a tick ('' = the clock at the questions' rate_hz)",
            read_only=True,
        )
        topics = sorted(self.spec.topics())
        if self.tick_topic and self.tick_topic not in topics:
            raise ValueError(f"tick_topic {self.tick_topic!r} is not a topic of the questions (they read {topics})")
        self._check_signals()
        self.names = list(self.spec.names)
        self.row = Row(self.spec)
        self.learner = HordeLearner.from_spec(self.spec)
        self.learning = declare(self, "learn", True, "learn from the stream (false: predict only)")
        # publish_timescales defaults to the questions file's publish_taus; none beyond timescales.tau_max.
        self.published = PublishedTimescales(self, self.spec.timescales.tau_max, default=self.spec.publish_taus)
        self.requests = TimescaleRequests(self, self.spec.timescales.tau_max)
        keeper = LearnerCheckpoint(self)
        keeper.resume(self._resume)
        self.errors = self._online_error()
        reliable = declare(self, "reliable_input", False, "reliable QoS on the inputs (e.g. bags)", read_only=True)
        self.warn_after = declare(
            self, "silent_warning_s", 5.0, "s before a topic that never published is reported", low=0.0, high=3600.0
        )
        self.add_on_set_parameters_callback(self.published.validate)
        self.add_post_set_parameters_callback(self._apply_parameters)

        self.sampler = TopicSampler(
            self,
            self.spec.topics(),
            stale_after=self.spec.stale_after_s,
            reliable=reliable,
            queued=(self.tick_topic,) if self.tick_topic else (),
        )
        self.predictions = self.create_publisher(PredictionArray, "horde/predictions", 10)
        self.error_topic = self.create_publisher(PredictionErrors, "horde/errors", 10)
        self.create_service(PredictAt, "predict_at", self.on_predict_at)
        self.skipped = {"silent": 0, "stale": 0, "unreadable": 0, "refused": 0}
        self.stale_topics: dict[str, int] = {}
        self.latest_inputs: np.ndarray | None = None
        self.latest_stamp = None
        self.ticks = 0
        self.started = self._now()
        self.tick_rate = (self.started, 0)  # (since, ticks then): the measured tick rate on /diagnostics
        # The node's own timer publishes it, with the running errors on horde/errors at the same time.
        self.health = Diagnostics(self, "horde", self._health, period=0)
        self.create_timer(1.0, self.publish_diagnostics)
        # Building a status per question costs ~35 us each (100 questions: 3.5 ms, a late tick at
        # 100 Hz), so the per-question error statuses go out every error_diagnostics_period seconds.
        self.error_period = declare(
            self,
            "error_diagnostics_period",
            5.0,
            "s between the per-question error statuses on /diagnostics (horde/errors: every second)",
            low=1.0,
            high=3600.0,
            read_only=True,
        )
        self.last_error_statuses = None
        self.gc_frozen = declare(
            self,
            "gc_freeze",
            True,
            "after start-up, exempt its objects from garbage collection (each full collection would walk "
            "them all: a pause of milliseconds that delays a burst of ticks; docs/benchmarks.md)",
            read_only=True,
        )
        if self.gc_frozen:
            _freeze_start_up_objects()
        self.keeper = keeper.start(lambda path: self.learner.save(path))  # from here on, shutdown saves
        ticks = f"on each message of {self.tick_topic} (expected at" if self.tick_topic else "on a clock at"
        self.get_logger().info(
            f"{len(self.names)} questions {self.names} from {sorted(self.sampler.topics)}, ticking {ticks} "
            f"{self.spec.rate_hz:g} Hz{')' if self.tick_topic else ''}; "
            f"publishing tau {self.published.taus} and readouts {list(self.learner.readout_names)}; "
            f"checkpoint {self.keeper}"
        )
        if take_input_now:
            self.take_input()

    # -- start (run_node calls these: warm_up in a worker thread, then take_input)

    def warm_up(self) -> None:
        """Compile the learner's and the online error's kernels on throwaway ones of the same questions."""
        warm_horde(self.spec, publish_gammas=self.published.gammas)

    def take_input(self) -> None:
        """Start ticking: the topics are sampled from now on (their subscriptions keep the latest message)."""
        if self.tick_topic:
            self.sampler.listen(self.tick_topic, self.tick)
        else:
            self.create_timer(1.0 / self.spec.rate_hz, self.tick)

    def _check_signals(self) -> None:
        """What could never be read, refused before the first tick: ValueError naming the question and field.

        A type that is not installed, a field it lacks, an index beyond a fixed-size array, or a
        topic given a second type (one subscription carries one type: the signals naming the
        other could never be read).
        """
        labelled = [(f"state[{i}]", s) for i, s in enumerate(self.spec.state)]
        for q in self.spec.questions:
            labelled.append((f"question {q.name!r} cumulant", q.cumulant))
            if q.termination is not None:
                labelled.append((f"question {q.name!r} termination", q.termination))
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

    _now = clock_seconds  # self._now(): the node's clock in seconds

    # -- the clock

    def tick(self, trigger=None) -> None:
        """One step: sample, learn, publish. ``trigger``: the tick_topic message that caused it, if any."""
        self.ticks += 1
        stamp = _stamp(trigger) or self.get_clock().now().to_msg()  # the time of the sampled state
        sample = self.sampler.sample()
        if not sample.ok:
            self._skip(sample)
            return
        try:
            inputs, cumulants, continuations = self.row(sample.messages)
        except ValueError as exc:
            self._gap("unreadable", f"skipped a tick: {exc}")
            return
        if self.learning:
            try:
                self.learner.step(inputs, cumulants, continuations)
            except (ValueError, FloatingPointError) as exc:
                self._gap("refused", f"update refused, learner unchanged: {exc}")
                return
        self.latest_inputs = inputs
        self.latest_stamp = stamp
        values = self.learner.predict(inputs, self.published.gammas)  # [Q, G]
        readouts = [self.learner.readout(inputs, name) for name in self.learner.readout_names]
        table = np.column_stack([values, *readouts])  # [Q, G + R]
        self.errors.observe(cumulants, continuations, table)
        if self.learning and self.learner.update_count == 0:
            return  # a new learner's first tick only records the state: its predictions would be zeros
        self.predictions.publish(self._array(table))

    def _online_error(self) -> OnlineError:
        readouts = {name: self.learner.readout_weights(name) for name in self.learner.readout_names}
        return OnlineError(gammas=self.published.gammas, n_questions=len(self.names), readouts=readouts)

    def _restart(self) -> None:
        """After a gap in the stream: no transition, and no return, spans it."""
        self.learner.restart()
        self.errors.restart()

    def _gap(self, kind: str, line: str) -> None:
        """A tick not learned from: the next transition starts after it."""
        self.skipped[kind] += 1
        self._restart()
        self.get_logger().warning(f"{line}; {self.skipped[kind]} so far", throttle_duration_sec=5.0)

    def _skip(self, sample) -> None:
        if sample.silent:
            self.skipped["silent"] += 1
            self._restart()
            if self._now() - self.started >= self.warn_after:
                self.get_logger().warning(
                    f"no message yet on {', '.join(sample.silent)}: not learning", throttle_duration_sec=10.0
                )
            return
        for name in sample.stale:
            self.stale_topics[name] = self.stale_topics.get(name, 0) + 1
        self._gap("stale", f"skipped a tick: {', '.join(sample.stale)} older than {self.spec.stale_after_s:g} s")

    def _array(self, table: np.ndarray) -> PredictionArray:
        """The PredictionArray of ``table`` [Q, G + R]: the published gammas, then the readouts."""
        n = len(self.published.gammas)
        msg = PredictionArray()
        msg.header.stamp = self.latest_stamp
        msg.questions = self.names
        msg.gammas = _doubles(self.published.gammas)
        msg.values = _doubles(table[:, :n].reshape(-1))
        msg.readouts = list(self.learner.readout_names)
        msg.readout_values = _doubles(table[:, n:].reshape(-1))
        msg.update_count = int(self.learner.update_count)
        return msg

    # -- answers

    def on_predict_at(self, request: PredictAt.Request, response: PredictAt.Response) -> PredictAt.Response:
        try:
            gammas = self.requests.gammas(request)
            question = self._question(request.question)
            if self.latest_inputs is None:
                raise ValueError("no sampled state yet: every topic must publish first")
            values = self.learner.predict(self.latest_inputs, gammas)[question]
        except ValueError as exc:
            return refuse(response, exc)
        response.success = True
        response.header.stamp = self.latest_stamp
        response.cumulant = self.names[question]
        response.gammas = _doubles(gammas)
        response.values = _doubles(values)
        response.update_count = int(self.learner.update_count)
        return response

    def _question(self, name: str) -> int:
        if not name:
            if len(self.names) == 1:
                return 0
            raise ValueError(f"name a question: one of {self.names}")
        if name not in self.names:
            raise ValueError(f"no question {name!r}; questions: {self.names}")
        return self.names.index(name)

    # -- parameters changed at run time

    def _apply_parameters(self, parameters) -> None:
        if self.published.apply(parameters):
            self.errors = self._online_error()  # scored anew at the new timescales
        if any(p.name == "learn" for p in parameters):
            self.learning = self.get_parameter("learn").value

    # -- checkpoints and health

    def _resume(self, checkpoint: pathlib.Path) -> int:
        # CheckpointError (another questions file or learner): refuse to start, run_node says why.
        self.learner = HordeLearner.load(checkpoint, spec=self.spec)
        return self.learner.update_count

    def publish_diagnostics(self) -> None:
        now = self.get_clock().now().to_msg()
        errors = self.errors_msg()
        errors.header.stamp = now
        self.error_topic.publish(errors)
        statuses = []
        now_s = self._now()
        if self.last_error_statuses is None or now_s - self.last_error_statuses >= self.error_period - 1e-6:
            self.last_error_statuses = now_s
            statuses = self._error_statuses(errors)
        self.health.publish(extra=statuses)

    def _health(self) -> Health:
        silent = [name for name, topic in self.sampler.topics.items() if topic.latest is None]
        skipped = sum(self.skipped.values())
        if silent:
            message = f"no message yet on {', '.join(silent)}"
        else:
            message = f"{skipped} ticks skipped" if skipped else "learning"
        since, ticks_then = self.tick_rate
        now = self._now()
        self.tick_rate = (now, self.ticks)
        values = {
            "tick_source": self.tick_topic or "clock",
            "ticks_per_s": f"{(self.ticks - ticks_then) / (now - since):.3g}" if now > since else "-",
            "updates": self.learner.update_count,
            "skipped": skipped,
            **{f"skipped.{kind}": count for kind, count in self.skipped.items()},
            **{f"stale.{name}": count for name, count in self.stale_topics.items()},
            **{f"received.{name}": topic.received for name, topic in self.sampler.topics.items()},
            "last_checkpoint": self.keeper.last_text,
        }
        return Health(WARN if silent or skipped else OK, message, values)

    def _error_statuses(self, errors: PredictionErrors) -> list[DiagnosticStatus]:
        """One status per question: its running error and the mean predictor's, per tau and readout."""
        columns = [f"tau {tau:g}" for tau in self.published.taus] + list(errors.readouts)
        statuses = []
        for q, name in enumerate(self.names):
            cells = range(q * len(columns), (q + 1) * len(columns))
            status = DiagnosticStatus(name=f"{self.get_name()}: {name} error", hardware_id="gamma_net")
            status.message = f"{min(errors.samples[k] for k in cells)} returns scored (rmse / mean-predictor rmse)"
            status.values = [
                KeyValue(key=column, value=f"{errors.rmse[k]:.4g} / {errors.mean_rmse[k]:.4g}")
                for column, k in zip(columns, cells)
            ]
            statuses.append(status)
        return statuses

    def errors_msg(self) -> PredictionErrors:
        """The running errors as a message (``horde/errors``): [Q x (G + R)], row-major."""
        msg = PredictionErrors()
        msg.questions = self.names
        msg.gammas = _doubles(self.published.gammas)
        msg.readouts = list(self.learner.readout_names)
        msg.rmse = _doubles(self.errors.rmse().reshape(-1))
        msg.mean_rmse = _doubles(self.errors.baseline_rmse().reshape(-1))
        msg.samples = [int(n) for n in self.errors.counts.reshape(-1)]
        return msg


def main(args=None) -> int:
    return run_node(Horde, args)


if __name__ == "__main__":
    sys.exit(main())
