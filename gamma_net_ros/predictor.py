"""Node: learns a linear Γ-net online from ``joint_states`` and publishes its predictions.

    ros2 run gamma_net_ros predictor --ros-args --params-file config/arm.yaml

On every JointState it selects the joints by name, learns by TD(0) over a fresh Gamma_t
(the robot-arm study's settings, from the YAML's ``joints``/``learner``/``timescales``
groups) and publishes a ``gamma_net_msgs/Prediction`` at ``publish_timescales``, stamped
with the state's stamp. ``predict_at`` (``gamma_net_msgs/PredictAt``) answers for any
timescales. The learner is checkpointed atomically every ``checkpoint_interval`` seconds
and on shutdown, and resumed on start. Unusable messages are skipped, counted, reported
on ``/diagnostics`` and warned about at a throttled rate. The learning itself is
:class:`gamma_net_core.joint_stream.OnlineGammaNet`; this node only moves messages.
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np
from gamma_net_msgs.msg import Prediction
from gamma_net_msgs.srv import PredictAt
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import JointState

from gamma_net_core.data.joints import DEFAULT_MAX_GAP, JointsConfig, Skip, stamp_seconds
from gamma_net_core.joint_stream import OnlineGammaNet
from gamma_net_core.linear import GammaNetConfig
from gamma_net_core.timescales import TimescaleSampling
from gamma_net_core.warmup import warm_linear
from gamma_net_ros.conversions import clock_seconds, prediction_msg, seconds_to_stamp
from gamma_net_ros.diagnostics import OK, WARN, Diagnostics, Health
from gamma_net_ros.flow_control import TakenReporter
from gamma_net_ros.learner_checkpoint import CheckpointHooks, LearnerCheckpoint
from gamma_net_ros.node_main import run_node
from gamma_net_ros.params import declare, declare_config
from gamma_net_ros.prediction_serving import PublishedTimescales, TimescaleRequests, answer, refuse


class Predictor(CheckpointHooks, Node):
    def __init__(self, *, take_input_now: bool = True, **kwargs) -> None:
        super().__init__("predictor", **kwargs)
        # Until __init__ completes there is nothing of ours to save: a node refused at start (say,
        # for a checkpoint of another configuration) must never overwrite that checkpoint on shutdown.
        self.keeper = None
        seed = declare(self, "seed", 0, "seeds the tile offsets and the Gamma_t draws", low=0, high=2**31 - 1)
        self.online = OnlineGammaNet(
            joints=declare_config(self, JointsConfig, "joints"),
            learner=declare_config(self, GammaNetConfig, "learner"),
            timescales=declare_config(self, TimescaleSampling, "timescales"),
            rng=np.random.default_rng(seed),
            max_gap=declare(
                self,
                "max_gap",
                DEFAULT_MAX_GAP,
                "s between readings, forward or back, that starts a new episode (less back: skipped)",
                low=0.001,
                high=1e6,
            ),
            learn=declare(self, "learn", True, "learn from the stream (false: predict only)"),
        )
        self.published = PublishedTimescales(self, self.online.timescales.tau_max)
        self.requests = TimescaleRequests(self, self.online.timescales.tau_max)
        self.stamp_source = declare(
            self, "stamp_source", "header", "state time: header (the reading's stamp) or arrival", read_only=True
        )
        if self.stamp_source not in ("header", "arrival"):
            raise ValueError(f"stamp_source must be 'header' or 'arrival'; got {self.stamp_source!r}")
        keeper = LearnerCheckpoint(self)
        keeper.resume(self._resume)
        self.add_on_set_parameters_callback(self._validate_parameters)
        self.add_post_set_parameters_callback(self._apply_parameters)

        depth = declare(
            self,
            "input_queue_depth",
            100,
            "joint_states waiting to be learned from",
            low=1,
            high=100000,
            read_only=True,
        )
        reliable = declare(
            self, "reliable_input", False, "reliable joint_states QoS (e.g. for bag playback)", read_only=True
        )
        # Best effort by default, as the driver publishes (sensor-data QoS); deeper than that profile's 5
        # so that a burst of readings waits for the learner instead of being dropped.
        qos = QoSProfile(
            depth=depth,
            reliability=ReliabilityPolicy.RELIABLE if reliable else ReliabilityPolicy.BEST_EFFORT,
            durability=qos_profile_sensor_data.durability,
        )
        self.input_qos = qos
        self.taken = 0
        self.reporter = None
        # Before the warm-up (see take_input): `ros2 topic echo /predictions` finds the topic's type at once.
        self.predictions = self.create_publisher(Prediction, "predictions", 10)
        self.create_service(PredictAt, "predict_at", self.on_predict_at)
        self.health = Diagnostics(self, self.online.cumulant_name, self.report_health)
        self.keeper = keeper.start(self.online.save)  # from here on, shutting down saves the learner
        self.get_logger().info(
            f"predicting {self.online.cumulant_name} at tau {self.published.taus}; "
            f"Gamma_t of {self.online.timescales.size}; checkpoint {self.keeper}"
        )
        if take_input_now:
            self.take_input()

    # -- start (run_node calls these: warm_up in a worker thread, then take_input)

    def warm_up(self) -> None:
        """Compile the learner's kernels on a throwaway learner of the same settings."""
        warm_linear(self.online.learner_config, self.online.timescales, publish_gammas=self.published.gammas)

    def take_input(self) -> None:
        """Subscribe, and report what is taken so a bag_player keeps its window (lossless playback).

        Only now: a player waiting for a consumer waits through the warm-up instead of publishing into it.
        Checked at 50 Hz, not the Atari stream's 200 Hz: a robot's predictor is mostly idle between readings.
        """
        self.create_subscription(JointState, "joint_states", self.on_joint_state, self.input_qos)
        self.reporter = TakenReporter(self, "joint_states", taken=lambda: self.taken, flush=0.02)

    # -- stream

    def on_joint_state(self, msg: JointState) -> None:
        self.taken += 1
        if self.stamp_source == "header":
            stamp = stamp_seconds(msg.header.stamp.sec, msg.header.stamp.nanosec)
        else:
            stamp = clock_seconds(self)
        try:
            step = self.online.observe(
                stamp=stamp, names=msg.name, position=msg.position, velocity=msg.velocity, effort=msg.effort
            )
        except (ValueError, FloatingPointError) as exc:
            self.get_logger().error(f"update refused, learner unchanged: {exc}", throttle_duration_sec=5.0)
            return
        if isinstance(step, Skip):
            self.get_logger().warning(
                f"skipped a joint_states message ({step.reason.value}: {step.detail}); "
                f"{self.online.skips.total} skipped so far",
                throttle_duration_sec=5.0,
            )
            return
        if step.new_episode and self.online.episodes > 1:
            self.get_logger().info(
                f"episode {self.online.episodes} starts (time jumped more than max_gap {self.online.max_gap:g} s)"
            )
        self.predictions.publish(self._prediction(self.published.gammas, seconds_to_stamp(step.sample.stamp)))

    def _prediction(self, gammas: np.ndarray, stamp) -> Prediction:
        return prediction_msg(
            stamp=stamp,
            question=self.online.cumulant_name,
            gammas=gammas,
            values=self.online.predict(gammas),
            update_count=self.online.update_count,
        )

    def on_predict_at(self, request: PredictAt.Request, response: PredictAt.Response) -> PredictAt.Response:
        try:
            gammas = self.requests.gammas(request)
            stamp = seconds_to_stamp(self.online.latest.stamp if self.online.latest else 0)
            return answer(response, self._prediction(gammas, stamp))
        except ValueError as exc:
            return refuse(response, exc)

    # -- parameters changed at run time

    def _validate_parameters(self, parameters) -> SetParametersResult:
        return self.published.validate(parameters)

    def _apply_parameters(self, parameters) -> None:
        self.published.apply(parameters)
        if any(p.name == "learn" for p in parameters):
            self.online.learning = self.get_parameter("learn").value

    # -- checkpoints and health

    def _resume(self, checkpoint: pathlib.Path) -> int:
        self.online.resume(checkpoint)  # CheckpointError: refuse to start (run_node says why)
        return self.online.update_count

    def report_health(self) -> Health:
        skips = self.online.skips.as_dict()
        total = sum(skips.values())
        values = {
            "received": self.taken,  # joint_states messages handed to the node
            "processed": self.online.accepted,  # of those, learned from (or predicted on, learn off)
            "accepted": self.online.accepted,
            "skipped": total,
            "updates": self.online.update_count,
            "episodes": self.online.episodes,
            "last_checkpoint": self.keeper.last_text,
            **{f"skipped.{kind}": count for kind, count in skips.items()},
        }
        return Health(WARN if total else OK, f"{total} messages skipped" if total else "learning", values)


def main(args=None) -> int:
    return run_node(Predictor, args)


if __name__ == "__main__":
    sys.exit(main())
