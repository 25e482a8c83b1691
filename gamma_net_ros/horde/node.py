"""Node: a Horde of Γ-nets learning many questions (GVFs) from any topics, on a clock or a topic.

    ros2 run gamma_net_ros horde --ros-args -p questions_file:=config/horde.yaml
    ros2 topic echo /horde/predictions

(The questions file is not a ROS parameters file: the node's own are set with -p or a launch
file, gamma_net_ros.horde.settings. With ``use_sim_time`` the clock is /clock.)

The questions YAML (``questions_file``; gamma_net_core.horde.questions) names each question's
cumulant and termination as fields of topics, and the state inputs likewise. The node subscribes
to every topic those name, and on each tick samples the latest message of each (rows:
gamma_net_ros.horde.rows), learns one step of every question at once (HordeLearner) and publishes
a ``gamma_net_msgs/PredictionArray`` at ``publish_timescales`` with the named readouts. While
someone subscribes, each tick's realized returns go out on ``horde/returns`` (``RealizedReturns``:
the returns that completed then, each beside the prediction it scores, made H ticks before).

Each topic's freshness is judged on its own (its ``stale_after_s`` in the questions file's
``topics:``, else the file's). A stale or silent topic, or a field the messages lack, stops only
the questions that read it (cumulant or termination): they neither learn nor are scored, and
their values and readouts are published as NaN, which is how a consumer tells; the others keep
learning and publishing. A state input's topic stops every question (the state is shared): the
tick is skipped and counted. ``/diagnostics`` names each stale topic and what it stops, and a
topic published with another type (gamma_net_ros.horde.health).

Ticks come from the node's clock at ``rate_hz``, or with ``tick_topic`` (one of the questions'
topics) from each of its messages: the prediction goes out as soon as it arrives, stamped with
its header stamp where it has one; ``rate_hz`` is then its expected rate (tau is in ticks).

A new learner publishes from its second tick, the first that learns (a resumed or frozen one
from its first). ``predict_at`` answers any question by name at any timescales. The running
error of each question at each published timescale against its realized return is on
``horde/errors`` and ``/diagnostics`` (an off-policy question's: its RUPEE, docs/off-policy.md). The
learner is checkpointed and resumed as the predictor's.
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np
from gamma_net_msgs.msg import PredictionArray, PredictionErrors, RealizedReturns
from gamma_net_msgs.srv import PredictAt
from rclpy.node import Node

from gamma_net_core.horde.learner import HordeLearner
from gamma_net_core.horde.off_policy_error import ErrorsWithOffPolicy
from gamma_net_core.horde.online_error import OnlineError
from gamma_net_core.horde.questions import load_questions
from gamma_net_core.horde.shares import share_spec
from gamma_net_core.warmup import warm_horde
from gamma_net_ros.diagnostics import Diagnostics
from gamma_net_ros.horde import health as horde_health
from gamma_net_ros.horde import rows as horde_rows
from gamma_net_ros.horde.rows import Row
from gamma_net_ros.horde.settings import declare_settings
from gamma_net_ros.horde.topics import TopicSampler
from gamma_net_ros.learner_checkpoint import CheckpointHooks, LearnerCheckpoint
from gamma_net_ros.node_main import run_node
from gamma_net_ros.paths import config_file
from gamma_net_ros.prediction_serving import PublishedTimescales, TimescaleRequests, refuse

__all__ = ["Horde", "Row", "main"]


class Horde(CheckpointHooks, Node):
    def __init__(self, *, take_input_now: bool = True, **kwargs) -> None:
        super().__init__("horde", **kwargs)
        self.keeper = None  # nothing of ours to save until __init__ completes
        self.settings = settings = declare_settings(self)
        path = settings.questions_file
        self.spec = load_questions(pathlib.Path(path).expanduser() if path else config_file("horde"))
        self.spec = share_spec(self.spec, settings.share)  # several hordes, one set of questions (docs/horde.md)
        self.tick_topic, self.learning, self.gc_frozen = settings.tick_topic, settings.learn, settings.gc_freeze
        topics = sorted(self.spec.topics())
        if self.tick_topic and self.tick_topic not in topics:
            raise ValueError(f"tick_topic {self.tick_topic!r} is not a topic of the questions (they read {topics})")
        horde_rows.check_signals(self.spec)
        self.names = list(self.spec.names)
        self.row = Row(self.spec)
        self.learner = HordeLearner.from_spec(self.spec)
        # publish_timescales defaults to the questions file's publish_taus; none beyond timescales.tau_max.
        self.published = PublishedTimescales(self, self.spec.timescales.tau_max, default=self.spec.publish_taus)
        self.requests = TimescaleRequests(self, self.spec.timescales.tau_max)
        keeper = LearnerCheckpoint(self)
        keeper.resume(self._resume)
        self.errors = self._online_error()
        self.add_on_set_parameters_callback(self.published.validate)
        self.add_post_set_parameters_callback(self._apply_parameters)
        limits = {topic: self.spec.stale_after(topic) for topic in topics}
        self.sampler = TopicSampler(
            self, self.spec.topics(), stale_after=limits, reliable=settings.reliable_input,
            queued=(self.tick_topic,) if self.tick_topic else (),
        )  # fmt: skip
        self.watch = horde_health.Watch(self, self.spec, self.sampler, settings)
        self.skipped, self.stale_topics, self.stopped = self.watch.skipped, self.watch.stale_topics, self.watch.stopped
        if self.tick_topic:  # until take_input: a tick that came while the kernels compiled, counted, not lost
            self.sampler.listen(self.tick_topic, self._tick_before_ready)
        self.predictions = self.create_publisher(PredictionArray, "horde/predictions", 10)
        self.error_topic = self.create_publisher(PredictionErrors, "horde/errors", 10)
        self.returns = self.create_publisher(RealizedReturns, "horde/returns", 10)
        self.create_service(PredictAt, "predict_at", self.on_predict_at)
        self.latest_inputs, self.latest_stamp, self.ticks = None, None, 0
        self.processed = 0  # ticks that reached the learner (the others: a gap in every question, or refused)
        # The node's own timer publishes it, with the running errors on horde/errors at the same time.
        self.health = Diagnostics(self, "horde", self._health, period=0)
        self.create_timer(1.0, self.publish_diagnostics)
        if self.gc_frozen:
            horde_rows.freeze_start_up_objects()
        self.keeper = keeper.start(lambda path: self.learner.save(path))  # from here on, shutdown saves
        self.get_logger().info(horde_health.start_line(self))
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

    def _tick_before_ready(self, trigger) -> None:
        self.ticks += 1
        self.skipped["warming_up"] += 1

    # -- the clock

    def tick(self, trigger=None) -> None:
        """One step: sample, learn the usable questions, publish. ``trigger``: the tick_topic message, if any."""
        self.ticks += 1
        stamp = horde_rows.stamp_of(trigger) or self.get_clock().now().to_msg()  # the time of the sampled state
        sample = self.sampler.sample()
        reading = self.row.read(sample.messages)
        self.watch.note(sample, reading)
        usable = reading.usable
        if not usable.any():  # a gap for every question: the next transition starts after it
            self._restart()
            return
        some = None if usable.all() else usable  # every question on most ticks: the learner's plain path
        if self.learning:
            try:
                self.learner.step(
                    reading.inputs, reading.cumulants, reading.continuations, usable=some, policy=reading.policy
                )
            except (ValueError, FloatingPointError) as exc:
                self.watch.refused(exc)
                self._restart()
                return
        self.processed += 1
        self.latest_inputs, self.latest_stamp = reading.inputs, stamp
        table = horde_rows.prediction_table(self.learner, reading.inputs, self.published.gammas)  # [Q, G + R]
        if some is not None:  # a stopped question is neither scored nor published: NaN says so
            self.errors.restart(~usable)
            table[~usable] = np.nan
        self.errors.observe(np.where(usable, reading.cumulants, 0.0), reading.continuations, table)
        if self.learning and self.learner.update_count == 0:
            return  # a new learner's first tick only records the state: its predictions would be zeros
        gammas, readouts, count = self.published.gammas, self.learner.readout_names, self.learner.update_count
        self.predictions.publish(horde_rows.prediction_array(self.names, gammas, readouts, table, stamp, count))
        if self.returns.get_subscription_count():  # built and sent only while someone listens: a tick's cost
            realized = self.errors.realized()
            self.returns.publish(horde_rows.returns_msg(self.names, gammas, readouts, realized, stamp, count))

    def _online_error(self) -> OnlineError | ErrorsWithOffPolicy:
        readouts = {name: self.learner.readout_weights(name) for name in self.learner.readout_names}
        if self.learner.off_policy:  # their rows: RUPEE (docs/off-policy.md)
            return ErrorsWithOffPolicy(self.learner, gammas=self.published.gammas, readouts=readouts)
        return OnlineError(gammas=self.published.gammas, n_questions=len(self.names), readouts=readouts)

    def _restart(self) -> None:
        """After a gap in the stream: no transition, and no return, spans it."""
        self.learner.restart()
        self.errors.restart()

    # -- answers

    def on_predict_at(self, request: PredictAt.Request, response: PredictAt.Response) -> PredictAt.Response:
        try:
            gammas = self.requests.gammas(request)
            question = horde_rows.question_index(self.names, request.question)
            return horde_rows.answer(response, self.learner, question, gammas, self.latest_inputs, self.latest_stamp)
        except ValueError as exc:
            return refuse(response, exc)

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
        """The running errors on horde/errors; the node's health (and now and then each question's error)."""
        errors = self.errors_msg()
        errors.header.stamp = self.get_clock().now().to_msg()
        self.error_topic.publish(errors)
        self.health.publish(extra=self.watch.error_statuses(self.published.taus, errors))

    def _health(self):
        return self.watch.health(
            ticks=self.ticks, processed=self.processed, updates=self.learner.update_count, saved=self.keeper.last_text
        )

    def errors_msg(self) -> PredictionErrors:
        """The running errors as a message (``horde/errors``): [Q x (G + R)], row-major."""
        gammas, readouts = self.published.gammas, self.learner.readout_names
        return horde_health.errors_msg(self.names, gammas, readouts, self.errors)


def main(args=None) -> int:
    return run_node(Horde, args)


if __name__ == "__main__":
    sys.exit(main())
