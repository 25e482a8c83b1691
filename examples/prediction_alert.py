"""Act on a learned prediction: say so when a Horde question's prediction crosses a threshold.

    ros2 launch gamma_net_ros horde.launch.py        # a horde node publishing horde/predictions
    python examples/prediction_alert.py --ros-args -p question:=elbow_speed -p tau:=5.0 -p threshold:=0.31

The prediction compared is (1 - gamma) V: the average of the question's signal over about the
next tau steps, in the signal's units (rad/s for elbow_speed). `gamma-net horde thresholds`
tabulates, per threshold, the lead before the events it should foresee and the false alarms.
Publishes ``std_msgs/Bool`` on ``prediction_alert`` (true: above) and logs a line at each crossing.
"""

import signal

import rclpy
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from std_msgs.msg import Bool

from gamma_net_ros.client import LatestPredictions, PredictionView


class PredictionAlert(Node):
    def __init__(self) -> None:
        super().__init__("prediction_alert")
        self.question = self.declare_parameter(
            "question", "elbow_speed", ParameterDescriptor(description="a question of the horde")
        ).value
        self.tau = self.declare_parameter("tau", 5.0, ParameterDescriptor(description="timescale, steps")).value
        self.threshold = self.declare_parameter(
            "threshold", 0.31, ParameterDescriptor(description="alert above this average, in the signal's units")
        ).value
        self.alert = self.create_publisher(Bool, "prediction_alert", 10)
        self.above = None  # unknown until the first prediction
        self.predictions = LatestPredictions(self, "horde/predictions", on_update=self.on_prediction)

    def on_prediction(self, view: PredictionView) -> None:
        try:
            reading = view.average(self.question, tau=self.tau)  # (1 - gamma) V, in the signal's units
        except ValueError as exc:  # e.g. a question the horde does not have: say it, keep listening
            self.get_logger().error(str(exc), throttle_duration_sec=10.0)
            return
        above = reading.value > self.threshold
        if above != self.above:
            self.above = above
            self.alert.publish(Bool(data=above))
            how = "interpolated" if reading.interpolated else "published"
            self.get_logger().info(
                f"{self.question} at tau {reading.tau:g} ({how}): {reading.value:.3f} is "
                f"{'above' if above else 'below'} {self.threshold:g}"
            )


def main(args=None) -> None:
    # A stop is a flag the loop reads between callbacks. rclpy's own handler would end the context at
    # once, and a KeyboardInterrupt would land anywhere: either can break a callback under way.
    stopping = []
    for stop in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C, and a supervisor's stop
        signal.signal(stop, lambda *_: stopping.append(True))
    rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO)
    node = PredictionAlert()
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    while not stopping:
        executor.spin_once(timeout_sec=0.1)  # back to the loop often enough to see a stop
    node.destroy_node()
    rclpy.try_shutdown()


if __name__ == "__main__":
    main()
