"""Node: learns a neural Γ-net online from ``transitions`` and publishes its predictions.

    ros2 run gamma_net_ros neural_predictor --ros-args --params-file config/atari.yaml

Receiving is decoupled from training, because the bridge delivers thousands of
transitions a second and one learner at the paper's sizes trains a few hundred steps' worth
(an update every 4 steps costs several milliseconds on a CPU):

- The executor thread (rclpy's single-threaded executor: its multi-threaded one took a third
  as many messages per second here) runs the subscription callback, which only validates a
  ``gamma_net_msgs/Transition`` (reliable QoS, depth ``queue_depth``) and queues it. A message
  with features of the wrong size or a NaN is skipped, counted (``/diagnostics``) and warned
  about at a throttled rate, never learned from. Nothing is lost silently: ``/diagnostics``
  counts since start ``received`` (handed to the node) = ``processed`` (moved into the replay)
  + ``skipped`` + ``queued``, and ``lost`` (sent, never handed: gaps in each publisher's
  sequence numbers, a reliable keep-last queue that overflowed). It also answers
  ``predict_at``, which waits for at most one update, and publishes ``/diagnostics``.
- A worker thread, at a lower CPU priority (``worker_nice``) so that receiving keeps up on a
  busy machine, moves the queued steps into the learner's prioritized replay and trains as
  the neural core does (the YAML's ``learner`` group: one update per ``update_period`` steps
  after ``min_replay_history``). When training is slower than the stream it falls behind and
  catches up when the stream pauses, so the paper's ratio holds in the long run;
  ``max_update_lag`` bounds the lag (intake, and through the taken reports the bridge, then
  wait). It also publishes the predictions, sends the taken reports and writes checkpoints.
- A lock guards the learner between the two.

Consecutive messages of one episode form the transitions; a gap in the (episode, step)
numbering ends the episode there (a truncation), so no transition is made up
(:mod:`gamma_net_core.neural.online`).

Out: ``predictions`` (``gamma_net_msgs/Prediction``) at ``publish_timescales``, at most
``publish_rate`` times a second, at the latest state whenever it or the network changed,
stamped with that state's message stamp; ``predict_at`` (``gamma_net_msgs/PredictAt``) for
any timescales; ``transitions/taken`` reports for the bridge's flow control. The learner
(replay included) is checkpointed atomically every ``checkpoint_interval`` seconds and on
shutdown, and resumed on start; a checkpoint of another configuration is refused.
"""

from __future__ import annotations

import pathlib
import sys
import threading

from gamma_net_msgs.msg import Prediction, Transition
from gamma_net_msgs.srv import PredictAt
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

from gamma_net_core.neural.learner import NeuralConfig, NeuralLearner, TrainingDiverged
from gamma_net_core.neural.online import TransitionStream
from gamma_net_core.warmup import warm_neural
from gamma_net_ros.conversions import prediction_msg, seconds_to_stamp, transition_fields
from gamma_net_ros.diagnostics import Diagnostics, Health
from gamma_net_ros.flow_control import TakenReporter
from gamma_net_ros.learner_checkpoint import CheckpointHooks, LearnerCheckpoint
from gamma_net_ros.neural_predictor.health import InputCounts, progress_line, skip_line, start_line, stream_health
from gamma_net_ros.neural_predictor.settings import declare_settings
from gamma_net_ros.node_main import run_node
from gamma_net_ros.prediction_serving import TimescaleRequests, answer, refuse
from gamma_net_ros.training_worker import TrainingWorker


class NeuralPredictor(CheckpointHooks, Node):
    def __init__(self, *, take_input_now: bool = True, **kwargs) -> None:
        super().__init__("neural_predictor", **kwargs)
        # A node refused half-way is still destroyed (by rclpy's shutdown): nothing to stop or save yet.
        self._worker: TrainingWorker | None = None
        self._built = False
        s = declare_settings(self)
        config, rate, depth, lag, every = s.config, s.rate, s.depth, s.lag, s.every
        self.cumulant, self.published = s.cumulant, s.published
        self.worker_nice, self.progress_period = s.worker_nice, s.progress_period
        keeper = LearnerCheckpoint(self, interval=300.0, interval_read_only=True)
        self.stream: TransitionStream | None = None
        keeper.resume(lambda path: self._resume(path, config, lag))
        if self.stream is None:
            self.stream = TransitionStream(NeuralLearner(config), max_update_lag=lag)
        self.requests = TimescaleRequests(self, self.stream.config.tau_max)
        self.counts = InputCounts(self.stream)
        self.add_on_set_parameters_callback(self._validate_parameters)
        self.add_post_set_parameters_callback(self._apply_parameters)

        self.input_qos = QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE)
        self.reporter = TakenReporter(self, "transitions", taken=lambda: self.stream.taken, every=every)
        self.predictions = self.create_publisher(Prediction, "predictions", 10)
        self.create_service(PredictAt, "predict_at", self.on_predict_at)
        self._prediction_due = threading.Event()
        if rate > 0:
            self.create_timer(1.0 / rate, self._prediction_due.set)
        self._checkpoint_due = threading.Event()
        self.health = Diagnostics(self, self.cumulant, self.report_health)
        self.create_timer(self.progress_period, self.log_progress)
        self._published_about = None  # (state, updates) of the last Prediction
        self._worker = TrainingWorker(
            self.stream, self.get_logger(), nice=self.worker_nice, between=self._between_updates, alive=self.context.ok
        )
        # Saved in the worker thread, between updates (see _between_updates), from here on.
        self.keeper = keeper.start(self.stream.save, when_due=self._checkpoint_due.set)
        self._built = True
        self.get_logger().info(start_line(config, self.published.taus, self.keeper))
        if take_input_now:
            self.take_input()

    # -- start (run_node calls these: warm_up in a worker thread, then take_input)

    def warm_up(self) -> None:
        """Compile the replay's kernels on a tiny throwaway learner of the same kind.

        Without it they compiled in the training thread at the first update (after
        ``min_replay_history`` transitions), and a Ctrl-C then waited for numba in
        ``stop_worker``: 2.9 s on an empty cache on the 2-core development machine at load 8,
        past the 5 s `ros2 launch` allows on a machine twice as busy.
        """
        warm_neural(self.stream.config)

    def take_input(self) -> None:
        """Subscribe to the transitions: a bridge waiting for its consumer waits through the warm-up."""
        self.create_subscription(Transition, "transitions", self.on_transition, self.input_qos)

    def _resume(self, checkpoint: pathlib.Path, config: NeuralConfig, lag: int) -> int:
        # CheckpointError (another configuration): refuse to start, run_node says why.
        self.stream = TransitionStream.resume(checkpoint, config=config, max_update_lag=lag)
        return self.stream.learner.updates

    # -- stream

    def on_transition(self, msg: Transition, info) -> None:
        self.counts.arrivals.arrived(info)
        skip = self.stream.receive(**transition_fields(msg))
        if skip is not None:
            self.get_logger().warning(skip_line(msg, skip, self.stream.skipped_total), throttle_duration_sec=5.0)
            self.reporter.report()

    def _between_updates(self) -> None:
        """In the worker thread, between updates: taken reports, due predictions, due checkpoints."""
        self.reporter.report()
        if self._prediction_due.is_set():
            self._prediction_due.clear()
            self.publish_prediction()
        if self._checkpoint_due.is_set():
            self._checkpoint_due.clear()
            self.save_checkpoint()

    def stop_worker(self) -> None:
        """Stop the worker thread, then move whatever is still queued into the replay (no update)."""
        if self._worker is not None:
            self._worker.stop()
            self._worker = None

    def destroy_node(self) -> None:
        """Stop training, write the last checkpoint, then release the node (safe on a node refused half-way)."""
        if self._built:
            self._built = False
            self.stop_worker()
        super().destroy_node()  # CheckpointHooks: the last checkpoint, then the node

    # -- predictions

    def publish_prediction(self) -> None:
        latest, updates = self.stream.latest, self.stream.learner.updates
        if latest is None or (
            self._published_about is not None
            and self._published_about[0] is latest
            and self._published_about[1] == updates
        ):
            return
        gammas = self.published.gammas
        values, state, updates = self.stream.predict(gammas)
        self.predictions.publish(self._prediction(gammas, values, state.stamp, updates))
        self._published_about = (state, updates)

    def _prediction(self, gammas, values, stamp: float, updates: int) -> Prediction:
        return prediction_msg(
            stamp=seconds_to_stamp(stamp), question=self.cumulant, gammas=gammas, values=values, update_count=updates
        )

    def on_predict_at(self, request: PredictAt.Request, response: PredictAt.Response) -> PredictAt.Response:
        try:
            gammas = self.requests.gammas(request)
            values, state, updates = self.stream.predict(gammas)
        except ValueError as exc:
            return refuse(response, exc)
        return answer(response, self._prediction(gammas, values, state.stamp, updates))

    # -- parameters changed at run time

    def _validate_parameters(self, parameters) -> SetParametersResult:
        return self.published.validate(parameters)

    def _apply_parameters(self, parameters) -> None:
        if self.published.apply(parameters):
            self._published_about = None
        if any(p.name == "max_update_lag" for p in parameters):
            self.stream.max_update_lag = self.get_parameter("max_update_lag").value

    # -- checkpoints and health

    def save_checkpoint(self, *, last: bool = False) -> None:
        try:
            super().save_checkpoint(last=last)
        except TrainingDiverged as exc:  # nothing worth keeping: the previous checkpoint stays
            self.get_logger().error(str(exc), throttle_duration_sec=60.0)

    def report_health(self) -> Health:
        return stream_health(self.stream, self.keeper.last_text, self.counts)

    def log_progress(self) -> None:
        line = progress_line(self.stream)
        if line is not None:
            self.get_logger().info(line)


def main(args=None) -> int:
    return run_node(NeuralPredictor, args)


if __name__ == "__main__":
    sys.exit(main())
