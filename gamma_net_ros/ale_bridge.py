"""Node: recorded (or live) Atari transitions -> ``gamma_net_msgs/Transition`` messages.

    ros2 run gamma_net_ros ale_bridge --ros-args --params-file config/atari.yaml -p shard_dir:=runs/centipede

``source: shards`` replays a recording made by ``gamma-net atari record`` in its recorded
order; ``source: live`` plays ALE with a policy (``random``, a Q-network file, or
``py:module:factory``) and publishes each step as it happens. One message per step:
φ(S_t), C_{t+1} (the reward), terminal, truncated, episode, step; stamped when published.

Pace: at most ``rate`` messages per second (0: no limit), and, with ``consumers`` > 0, as
fast as the slowest consumer takes them without loss: consumers report what they have taken
on ``<topic>/taken`` and the bridge keeps at most ``window`` messages in flight
(:mod:`gamma_net_ros.flow_control` says why reliable QoS alone loses messages). Publishing
starts once ``consumers`` consumers report and are matched. With ``consumers: 0`` nothing
waits for anyone: a subscriber slower than the bridge then loses messages (set ``rate``).

Progress: a log line every ``progress_period`` seconds and ``/diagnostics`` every second.
At the end of the data the bridge waits until every consumer has taken every message, logs
a summary and, with ``exit_at_end``, exits with code 0. A recording that is missing,
corrupt (checked shard by shard before the first message, with ``verify``) or of another
feature size than ``feature_size`` stops the node at start with a clear error (exit code 1).
"""

from __future__ import annotations

import sys
import time

from gamma_net_msgs.msg import Transition
from rclpy.duration import Duration
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from rclpy.task import Future

from gamma_net_core.data.shards import ShardError
from gamma_net_ros.ale_sources import declare_settings, open_source
from gamma_net_ros.conversions import transition_msg
from gamma_net_ros.diagnostics import ERROR, OK, WARN, Diagnostics, Health
from gamma_net_ros.flow_control import ConsumerWindow
from gamma_net_ros.node_main import run_node

#: Seconds one pump call may publish for before the executor serves reports and timers again.
PUMP_BUDGET = 0.02


class AleBridge(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("ale_bridge", **kwargs)
        settings = declare_settings(self)
        self.source, self.rate, self.consumers = settings.source, settings.rate, settings.consumers
        self.window, self.exit_at_end = settings.window, settings.exit_at_end
        self.progress_period, depth, timeout = settings.progress_period, settings.depth, settings.timeout
        self.rows, self.total, self.what = open_source(self, self.source, settings.feature_size)
        self.publisher = self.create_publisher(
            Transition, "transitions", QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE)
        )
        self.window_tracker = ConsumerWindow(
            self, "transitions", published=lambda: self.published, on_report=self.pump, timeout=timeout
        )
        self.state = "waiting"  # -> running -> draining -> done (or failed)
        self.published = 0
        self.started: float | None = None
        self.ended: float | None = None
        self.finished = Future()  # result: the exit code
        self._last_progress = (time.monotonic(), 0)
        self.error = ""
        self.pump_timer = self.create_timer(0.001 if self.rate > 0 or self.consumers == 0 else 0.01, self.pump)
        self.create_timer(self.progress_period, self.log_progress)
        self.health = Diagnostics(self, self.source, self.report_health)
        pace = f"at most {self.rate:g}/s" if self.rate else "no rate limit"
        flow = f"window {self.window} for {self.consumers} consumer(s)" if self.consumers else "no flow control"
        self.get_logger().info(f"{self.what}: {pace}, {flow}, on {self.publisher.topic_name}")

    # -- publishing

    def _ready(self) -> bool:
        """Every consumer we wait for reports and is matched (else its first messages would be lost)."""
        if len(self.window_tracker.consumers) < self.consumers:
            return False
        return self.publisher.get_subscription_count() >= max(self.consumers, 1)

    def _allowed(self) -> int:
        """How many more messages may go out now (flow control and rate)."""
        allowed = sys.maxsize
        if self.consumers:
            allowed = self.window - self.window_tracker.in_flight()
        if self.rate > 0:
            due = int(self.rate * (time.monotonic() - self.started)) + 1
            allowed = min(allowed, due - self.published)
        return allowed

    def pump(self) -> None:
        """Publish what flow control and rate allow, for at most PUMP_BUDGET seconds."""
        if self.state in ("done", "failed"):
            return
        gone = self.window_tracker.forget_silent()
        if gone:
            self.get_logger().warning(f"consumer(s) {gone} stopped reporting: no longer waited for")
        if self.state == "waiting":
            if not self._ready():
                return
            self.state = "running"
            self.started = time.monotonic()
            self._last_progress = (self.started, 0)
            self.get_logger().info(f"{self.publisher.get_subscription_count()} subscriber(s): publishing")
        if self.state == "running":
            if self.consumers and len(self.window_tracker.consumers) < self.consumers:
                return  # a consumer went away: wait for it (or another) to report again
            deadline = time.monotonic() + PUMP_BUDGET
            allowed = self._allowed()
            while allowed > 0 and time.monotonic() < deadline:
                try:
                    row = next(self.rows)
                except StopIteration:
                    self.state = "draining"
                    break
                except (ShardError, FileNotFoundError) as exc:
                    # Stop here; what was published still reaches the consumers before the node says so.
                    self.error = f"the recording became unreadable after {self.published} messages: {exc}"
                    self.get_logger().error(self.error)
                    self.state = "draining"
                    break
                self.publisher.publish(transition_msg(row, self.get_clock().now().to_msg()))
                self.published += 1
                allowed -= 1
        if self.state == "draining" and self._all_taken():
            if self.consumers and not self.window_tracker.consumers:
                return  # every consumer went away before taking the end: wait for one to come back
            self.ended = time.monotonic()
            self.state = "failed" if self.error else "done"
            self.pump_timer.cancel()
            self.get_logger().info(f"{self.state}: {self.summary()}")
            self.health.publish()
            self.finished.set_result(1 if self.error else 0)

    def _all_taken(self) -> bool:
        if self.consumers:
            return self.window_tracker.in_flight() == 0
        return self.publisher.wait_for_all_acked(Duration(seconds=0))  # at least in every reader's history

    # -- progress

    @property
    def seconds(self) -> float:
        if self.started is None:
            return 0.0
        return (self.ended or time.monotonic()) - self.started

    def summary(self) -> str:
        rate = self.published / self.seconds if self.seconds > 0 else 0.0
        return f"{self.published} transitions in {self.seconds:.2f} s ({rate:.0f}/s), all taken"

    def log_progress(self) -> None:
        if self.state not in ("running", "draining"):
            if self.state == "waiting":
                heard = len(self.window_tracker.consumers)
                self.get_logger().info(
                    f"waiting for {self.consumers} consumer(s) on {self.window_tracker.topic} ({heard} reporting) "
                    f"and {max(self.consumers, 1)} subscriber(s) ({self.publisher.get_subscription_count()} matched)"
                )
            return
        now = time.monotonic()
        then, count = self._last_progress
        self._last_progress = (now, self.published)
        of = f" of {self.total} ({100 * self.published / self.total:.1f}%)" if self.total else ""
        self.get_logger().info(
            f"published {self.published}{of}, {(self.published - count) / max(now - then, 1e-9):.0f}/s, "
            f"{self.window_tracker.in_flight()} in flight"
        )

    def report_health(self) -> Health:
        values = {
            "state": self.state,
            "published": self.published,
            "total": self.total if self.total is not None else "unbounded",
            "in_flight": self.window_tracker.in_flight(),
            "consumers": len(self.window_tracker.consumers),
            "seconds": f"{self.seconds:.3f}",
            "rate": f"{self.published / self.seconds:.1f}" if self.seconds > 0 else "0",
        }
        return Health({"failed": ERROR, "waiting": WARN}.get(self.state, OK), self.error or self.state, values)

    def exit_code(self) -> int | None:
        """The code to exit with once the data ended (with ``exit_at_end``, or failed); None: keep running."""
        if not self.finished.done():
            return None
        code = self.finished.result()
        return code if code or self.exit_at_end else None  # done: stay up (diagnostics) until stopped


def main(args=None) -> int:
    return run_node(AleBridge, args, until=AleBridge.exit_code)


if __name__ == "__main__":
    sys.exit(main())
