"""Node: learns a neural Γ-net online from ``transitions`` and publishes its predictions.

    ros2 run gamma_net_ros neural_predictor --ros-args --params-file config/atari.yaml

Receiving is decoupled from training, because the bridge delivers thousands of
transitions a second and one learner at the paper's sizes trains a few hundred steps' worth
(an update every 4 steps costs several milliseconds on a CPU):

- The executor thread (rclpy's single-threaded executor: its multi-threaded one took a third
  as many messages per second here) runs the subscription callback, which only validates a
  ``gamma_net_msgs/Transition`` (reliable QoS, depth ``queue_depth``) and queues it. A message
  with features of the wrong size or a NaN is skipped, counted (``/diagnostics``) and warned
  about at a throttled rate, never learned from. It also answers ``predict_at``, which waits
  for at most one update, and publishes ``/diagnostics``.
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

import os
import pathlib
import sys
import threading

import numpy as np
from gamma_net_msgs.msg import Prediction, Transition
from gamma_net_msgs.srv import PredictAt
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy

from gamma_net_core.neural.learner import NeuralConfig, NeuralLearner, TrainingDiverged
from gamma_net_core.neural.online import TransitionStream
from gamma_net_core.warmup import warm_neural
from gamma_net_ros.conversions import prediction_msg, seconds_to_stamp, stamp_to_seconds
from gamma_net_ros.diagnostics import ERROR, OK, WARN, Diagnostics, Health
from gamma_net_ros.flow_control import TakenReporter
from gamma_net_ros.learner_checkpoint import CheckpointHooks, LearnerCheckpoint
from gamma_net_ros.node_main import run_node
from gamma_net_ros.params import declare, declare_config
from gamma_net_ros.prediction_serving import PublishedTimescales, TimescaleRequests, answer, refuse


class NeuralPredictor(CheckpointHooks, Node):
    def __init__(self, *, take_input_now: bool = True, **kwargs) -> None:
        super().__init__("neural_predictor", **kwargs)
        # A node refused half-way is still destroyed (by rclpy's shutdown): nothing to stop or save yet.
        self._worker: threading.Thread | None = None
        self._built = False
        config = declare_config(self, NeuralConfig, "learner")
        threads = declare(
            self, "torch_threads", 1, "torch CPU threads (1: best on a shared CPU)", low=1, high=256, read_only=True
        )
        import torch

        torch.set_num_threads(threads)
        self.cumulant = declare(self, "cumulant_name", "reward", "name of the predicted signal", read_only=True)
        self.published = PublishedTimescales(self, config.tau_max)
        rate = declare(
            self, "publish_rate", 10.0, "predictions per second at most (0: none)", low=0.0, high=1000.0, read_only=True
        )
        depth = declare(
            self,
            "queue_depth",
            2000,
            "reliable KEEP_LAST depth; >= the bridge's window",
            low=1,
            high=10**6,
            read_only=True,
        )
        lag = declare(self, "max_update_lag", 0, "owed updates before intake waits (0: no bound)", low=0, high=2**62)
        every = declare(
            self,
            "report_every",
            32,
            "messages between taken reports (< bridge window)",
            low=1,
            high=10**6,
            read_only=True,
        )
        self.worker_nice = declare(
            self, "worker_nice", 10, "nice increment of the training thread (0: none)", low=0, high=19, read_only=True
        )
        self.progress_period = declare(
            self, "progress_period", 10.0, "s between progress lines", low=0.1, high=1e6, read_only=True
        )
        keeper = LearnerCheckpoint(self, interval=300.0, interval_read_only=True)
        self.stream: TransitionStream | None = None
        keeper.resume(lambda path: self._resume(path, config, lag))
        if self.stream is None:
            self.stream = TransitionStream(NeuralLearner(config), max_update_lag=lag)
        self.requests = TimescaleRequests(self, self.stream.config.tau_max)
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
        self._diverged_logged = False
        self._stop = threading.Event()
        self._worker = threading.Thread(target=self._work, name="neural_predictor.train", daemon=True)
        self._worker.start()
        # Saved in the worker thread, between updates (see _work_once), from here on.
        self.keeper = keeper.start(self.stream.save, when_due=self._checkpoint_due.set)
        self._built = True
        c = config
        self.get_logger().info(
            f"Γ-net on φ of {c.feature_size}, layers {list(c.hidden_sizes)}, update every {c.update_period} steps "
            f"after {c.min_replay_history}; publishing tau {self.published.taus}; "
            f"checkpoint {self.keeper}"
        )
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

    def on_transition(self, msg: Transition) -> None:
        skip = self.stream.receive(
            np.frombuffer(msg.features, dtype=np.float32),
            msg.cumulant,
            terminal=msg.terminal,
            truncated=msg.truncated,
            episode=msg.episode,
            step=msg.step,
            stamp=stamp_to_seconds(msg.header.stamp),
        )
        if skip is not None:
            reason, detail = skip
            self.get_logger().warning(
                f"skipped transition episode {msg.episode} step {msg.step} ({reason.value}: {detail}); "
                f"{self.stream.skipped_total} skipped so far",
                throttle_duration_sec=5.0,
            )
            self.reporter.report()

    def _work(self) -> None:
        """The worker thread: intake into the replay, owed updates, predictions, reports, checkpoints."""
        if self.worker_nice:
            # Linux schedules threads apart: a nicer worker leaves the receiving thread the CPU it needs.
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.worker_nice)
        while not self._stop.is_set():
            try:
                busy = self._work_once()
            except Exception as exc:  # the worker must not die quietly; at shutdown the context goes first
                if not self.context.ok():
                    return
                self.get_logger().error(f"worker: {type(exc).__name__}: {exc}", throttle_duration_sec=5.0)
                busy = 0
            if not busy:
                self.stream.wait(0.05)

    def _work_once(self) -> int:
        try:
            busy = self.stream.work(max_updates=1)
        except TrainingDiverged as exc:
            busy = 1
            if not self._diverged_logged:
                self._diverged_logged = True
                self.get_logger().error(f"training stopped: {exc}")
        self.reporter.report()
        if self._prediction_due.is_set():
            self._prediction_due.clear()
            self.publish_prediction()
        if self._checkpoint_due.is_set():
            self._checkpoint_due.clear()
            self.save_checkpoint()
        return busy

    def stop_worker(self) -> None:
        """Stop the worker thread, then move whatever is still queued into the replay (no update)."""
        if self._worker is None:
            return
        self._stop.set()
        self.stream.wake()
        if self._worker.is_alive():
            self._worker.join()
        self._worker = None
        # Received is kept: what waits behind a max_update_lag bound goes in too, its updates owed.
        self.stream.max_update_lag = 0
        while self.stream.queued and self.stream.work(max_updates=0):
            pass

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

    def save_checkpoint(self) -> None:
        try:
            super().save_checkpoint()
        except TrainingDiverged as exc:  # nothing worth keeping: the previous checkpoint stays
            self.get_logger().error(str(exc), throttle_duration_sec=60.0)

    def _training_state(self) -> str:
        s = self.stream
        if s.learner.stopped is not None:
            return "stopped: " + s.learner.stopped
        if s.learner.transitions < s.config.min_replay_history:
            return f"filling the replay ({s.learner.transitions} of {s.config.min_replay_history} steps)"
        return "training" if s.owed_updates <= 1 else f"training, {s.owed_updates} updates behind"

    def report_health(self) -> Health:
        s = self.stream
        skipped = s.skipped_total
        if s.learner.stopped is not None:
            level = ERROR
        else:
            level = WARN if skipped else OK
        values = {
            "received": s.received + skipped,
            "taken": s.taken,
            "queued": s.queued,
            "skipped": skipped,
            "gaps": s.gaps,
            "transitions": s.learner.transitions,
            "replay_size": s.learner.replay.size,
            "updates": s.learner.updates,
            "updates_behind": s.owed_updates,
            "last_checkpoint": self.keeper.last_text,
            **{f"skipped.{kind}": count for kind, count in s.skipped.items()},
        }
        return Health(level, self._training_state() + (f"; {skipped} messages skipped" if skipped else ""), values)

    def log_progress(self) -> None:
        s = self.stream
        if s.received or s.skipped_total:
            self.get_logger().info(
                f"{s.received} transitions received, {s.skipped_total} skipped, {s.gaps} gaps; "
                f"{s.learner.updates} updates; {self._training_state()}"
            )


def main(args=None) -> int:
    return run_node(NeuralPredictor, args)


if __name__ == "__main__":
    sys.exit(main())
