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
``gamma_net_msgs/PredictionArray`` at ``publish_timescales`` with the named readouts.

Each topic's freshness is judged on its own (its ``stale_after_s`` in the questions file's
``topics:``, else the file's). A stale or silent topic, or a field the messages lack, stops only
the questions that read it (their cumulant or termination): they neither learn nor are scored,
and their values and readouts are published as NaN, which is how a consumer tells; the others
keep learning and publishing. A state input's topic stops every question (the state is shared):
the tick is skipped and counted. ``/diagnostics`` names each stale topic and what it stops
(gamma_net_ros.horde_health).

Ticks come from the node's clock at the questions' ``rate_hz`` by default. With ``tick_topic``
(one of the questions' topics, e.g. ``/joint_states``) every message on that topic is a tick
instead: the prediction goes out as soon as the message arrives, not up to a period later, and
is stamped with the message's header stamp where it has one. The other topics are still read
at their latest value, with the same stale limits; ``rate_hz`` is then the rate the topic is
expected to publish at, the time base of the timescales (tau is in ticks), and the measured
tick rate is on ``/diagnostics``.

A new learner publishes from its second tick, the first that learns (the first only records the
state; a resumed or frozen one publishes from its first). ``predict_at`` answers any question by
name at any timescales. The running error of each
question at each published timescale against its realized return is published on
``horde/errors`` and ``/diagnostics``. The learner is checkpointed atomically and resumed as the predictor's is.
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np
from gamma_net_msgs.msg import PredictionArray, PredictionErrors
from gamma_net_msgs.srv import PredictAt
from rclpy.node import Node

from gamma_net_core.horde.learner import HordeLearner
from gamma_net_core.horde.online_error import OnlineError
from gamma_net_core.horde.questions import load_questions
from gamma_net_core.warmup import warm_horde
from gamma_net_ros import horde_health
from gamma_net_ros.conversions import clock_seconds
from gamma_net_ros.diagnostics import Diagnostics
from gamma_net_ros.horde_rows import Row, check_signals, doubles, freeze_start_up_objects, prediction_array, stamp_of
from gamma_net_ros.horde_topics import TopicSampler
from gamma_net_ros.learner_checkpoint import CheckpointHooks, LearnerCheckpoint
from gamma_net_ros.node_main import run_node
from gamma_net_ros.params import declare
from gamma_net_ros.paths import config_file
from gamma_net_ros.predictions import PublishedTimescales, TimescaleRequests, refuse

__all__ = ["Horde", "Row", "main"]


class Horde(CheckpointHooks, Node):
    def __init__(self, *, take_input_now: bool = True, **kwargs) -> None:
        super().__init__("horde", **kwargs)
        self.keeper = None  # nothing of ours to save until __init__ completes
        path = declare(self, "questions_file", "", "the questions YAML ('' = config/horde.yaml)", read_only=True)
        self.spec = load_questions(pathlib.Path(path).expanduser() if path else config_file("horde"))
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
        check_signals(self.spec)
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
        limits = {topic: self.spec.stale_after(topic) for topic in self.spec.topics()}
        queued = (self.tick_topic,) if self.tick_topic else ()
        self.sampler = TopicSampler(self, self.spec.topics(), stale_after=limits, reliable=reliable, queued=queued)
        self.watch = horde_health.Watch(self, self.spec, self.sampler)
        self.skipped, self.stale_topics, self.stopped = self.watch.skipped, self.watch.stale_topics, self.watch.stopped
        self.predictions = self.create_publisher(PredictionArray, "horde/predictions", 10)
        self.error_topic = self.create_publisher(PredictionErrors, "horde/errors", 10)
        self.create_service(PredictAt, "predict_at", self.on_predict_at)
        self.latest_inputs, self.latest_stamp, self.ticks = None, None, 0
        self.started = self._now()
        self.tick_rate = (self.started, 0)  # (since, ticks then): the measured tick rate on /diagnostics
        # The node's own timer publishes it, with the running errors on horde/errors at the same time.
        self.health = Diagnostics(self, "horde", self._health, period=0)
        self.create_timer(1.0, self.publish_diagnostics)
        # Building a status per question costs ~35 us each (100 questions: 3.5 ms, a late tick at
        # 100 Hz), so the per-question error statuses go out every error_diagnostics_period seconds.
        self.error_period = declare(
            self, "error_diagnostics_period", 5.0, "s between the per-question error statuses on /diagnostics "
            "(horde/errors: every second)", low=1.0, high=3600.0, read_only=True,
        )  # fmt: skip
        self.last_error_statuses = None
        self.gc_frozen = declare(
            self, "gc_freeze", True, "after start-up, exempt its objects from garbage collection (each full "
            "collection would walk them all: a pause of milliseconds that delays a burst of ticks; "
            "docs/benchmarks.md)", read_only=True,
        )  # fmt: skip
        if self.gc_frozen:
            freeze_start_up_objects()
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

    _now = clock_seconds  # self._now(): the node's clock in seconds

    # -- the clock

    def tick(self, trigger=None) -> None:
        """One step: sample, learn the usable questions, publish. ``trigger``: the tick_topic message, if any."""
        self.ticks += 1
        stamp = stamp_of(trigger) or self.get_clock().now().to_msg()  # the time of the sampled state
        sample = self.sampler.sample()
        reading = self.row.read(sample.messages)
        self.watch.note(sample, reading)
        if sample.silent and self._now() - self.started >= self.warn_after:
            self.get_logger().warning(
                "; ".join(f"no message yet on {t}: {self.watch.stops(t)} stopped" for t in sample.silent),
                throttle_duration_sec=10.0,
            )
        usable = reading.usable
        if not usable.any():  # a gap for every question: the next transition starts after it
            self._restart()
            return
        some = None if usable.all() else usable  # every question on most ticks: the learner's plain path
        if self.learning:
            try:
                self.learner.step(reading.inputs, reading.cumulants, reading.continuations, usable=some)
            except (ValueError, FloatingPointError) as exc:
                self.skipped["refused"] += 1
                self._restart()
                self.get_logger().warning(
                    f"update refused, learner unchanged: {exc}; {self.skipped['refused']} so far",
                    throttle_duration_sec=5.0,
                )
                return
        self.latest_inputs, self.latest_stamp = reading.inputs, stamp
        values = self.learner.predict(reading.inputs, self.published.gammas)  # [Q, G]
        readouts = [self.learner.readout(reading.inputs, name) for name in self.learner.readout_names]
        table = np.column_stack([values, *readouts])  # [Q, G + R]
        if some is not None:  # a stopped question is neither scored nor published: NaN says so
            self.errors.restart(~usable)
            table[~usable] = np.nan
        self.errors.observe(np.where(usable, reading.cumulants, 0.0), reading.continuations, table)
        if self.learning and self.learner.update_count == 0:
            return  # a new learner's first tick only records the state: its predictions would be zeros
        self.predictions.publish(
            prediction_array(
                self.names, self.published.gammas, self.learner.readout_names, table, stamp, self.learner.update_count
            )
        )

    def _online_error(self) -> OnlineError:
        readouts = {name: self.learner.readout_weights(name) for name in self.learner.readout_names}
        return OnlineError(gammas=self.published.gammas, n_questions=len(self.names), readouts=readouts)

    def _restart(self) -> None:
        """After a gap in the stream: no transition, and no return, spans it."""
        self.learner.restart()
        self.errors.restart()

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
        response.gammas = doubles(gammas)
        response.values = doubles(values)
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
        errors = self.errors_msg()
        errors.header.stamp = self.get_clock().now().to_msg()
        self.error_topic.publish(errors)
        self.watch.check_types()
        statuses = []
        now_s = self._now()
        if self.last_error_statuses is None or now_s - self.last_error_statuses >= self.error_period - 1e-6:
            self.last_error_statuses = now_s
            statuses = horde_health.error_statuses(self.get_name(), self.names, self.published.taus, errors)
        self.health.publish(extra=statuses)

    def _health(self):
        since, ticks_then = self.tick_rate
        now = self._now()
        self.tick_rate = (now, self.ticks)
        return self.watch.health(
            {
                "tick_source": self.tick_topic or "clock",
                "ticks_per_s": f"{(self.ticks - ticks_then) / (now - since):.3g}" if now > since else "-",
                "updates": self.learner.update_count,
                "last_checkpoint": self.keeper.last_text,
            }
        )

    def errors_msg(self) -> PredictionErrors:
        """The running errors as a message (``horde/errors``): [Q x (G + R)], row-major."""
        gammas, readouts = self.published.gammas, self.learner.readout_names
        return horde_health.errors_msg(self.names, gammas, readouts, self.errors)


def main(args=None) -> int:
    return run_node(Horde, args)


if __name__ == "__main__":
    sys.exit(main())
