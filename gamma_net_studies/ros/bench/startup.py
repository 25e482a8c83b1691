"""`gamma-net bench startup`: seconds from a learning node's process start to its first prediction.

Each learning node (predictor, horde, neural_predictor) is started as a process, the way the
demo starts it (:mod:`gamma_net_ros.processes`, the shipped YAML), while this process publishes
its input (``joint_states`` at 30 Hz; ``transitions`` at 100 Hz) and times the first message on
its prediction topic. First with numba's cache an empty folder (``NUMBA_CACHE_DIR``: a fresh
install, a new user), then again with the cache that start filled: the reference, timed in the
same run. The ratio cold / warm is what a first start costs; the warm time is mostly imports.
"""

from __future__ import annotations

import argparse
import math
import pathlib
import tempfile
import threading
import time

from gamma_net_core.report import Report, Table

NODES = ("predictor", "horde", "neural_predictor")
#: Node -> (YAML, its section, prediction topic, input).
SETUP = {
    "predictor": ("arm", "predictor", "/predictions", "joint_states"),
    "horde": (None, None, "/horde/predictions", "joint_states"),
    "neural_predictor": ("atari", "neural_predictor", "/predictions", "transitions"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nodes", nargs="+", choices=NODES, default=list(NODES), help="learning nodes to start")
    parser.add_argument("--timeout", type=float, default=900.0, help="s to wait for a first prediction")


def _check(args: argparse.Namespace) -> None:
    if not args.timeout > 0:
        raise ValueError(f"--timeout must be positive; got {args.timeout}")


class _Rig:
    """Publishes the nodes' inputs and notes when a first prediction arrives on each topic."""

    def __init__(self) -> None:
        import numpy as np
        from gamma_net_msgs.msg import Prediction, PredictionArray, Transition
        from rclpy.node import Node
        from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
        from sensor_msgs.msg import JointState

        self.node = Node("bench_startup")
        self.first: dict[str, float] = {}
        self.lock = threading.Lock()
        for topic, kind in (("/predictions", Prediction), ("/horde/predictions", PredictionArray)):
            self.node.create_subscription(kind, topic, lambda _msg, t=topic: self._heard(t), 10)
        self.joints = self.node.create_publisher(JointState, "joint_states", qos_profile_sensor_data)
        self.transitions = self.node.create_publisher(
            Transition, "transitions", QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
        )
        self.step = 0
        self.features = np.random.default_rng(0).random(512, dtype=np.float32)
        self._JointState, self._Transition = JointState, Transition
        self.node.create_timer(1.0 / 30.0, self._publish_joints)
        self.node.create_timer(0.01, self._publish_transition)

    def _heard(self, topic: str) -> None:
        with self.lock:
            self.first.setdefault(topic, time.monotonic())

    def _publish_joints(self) -> None:
        self.step += 1
        msg = self._JointState()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        phase = self.step / 30.0
        msg.name = ["shoulder", "elbow"]
        msg.position = [-0.75 + 0.5 * math.cos(phase), 1.7 + 0.4 * math.sin(phase)]
        msg.velocity = [-0.2 * math.sin(phase), 0.2 * math.cos(phase)]
        msg.effort = [0.1, 0.1]
        self.joints.publish(msg)

    def _publish_transition(self) -> None:
        msg = self._Transition()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        msg.features = self.features.tolist()
        msg.cumulant = float(self.step % 3 == 0)
        msg.episode, msg.step = 0, self.step
        self.transitions.publish(msg)

    def reset(self, topic: str) -> None:
        with self.lock:
            self.first.pop(topic, None)

    def heard(self, topic: str) -> float | None:
        with self.lock:
            return self.first.get(topic)


def _start_to_first_prediction(name: str, cache: str, rig: _Rig, timeout: float) -> float:
    from gamma_net_ros.paths import config_file
    from gamma_net_ros.processes import NodeProcess, node_command

    yaml, section, topic, _ = SETUP[name]
    command = node_command(
        f"gamma_net_ros.{name}",
        params_file=config_file(yaml) if yaml else None,
        params={"checkpoint_path": ""},
        node=section,
    )
    rig.reset(topic)
    log = pathlib.Path(cache).with_suffix(".log")
    process = NodeProcess(command, env={"NUMBA_CACHE_DIR": cache}, log_path=log)
    started = time.monotonic()
    process.start()
    try:
        while rig.heard(topic) is None:
            if not process.running:
                last = log.read_text().strip().splitlines()[-1:] or ["no output"]
                raise RuntimeError(f"{name} ended with code {process.process.returncode} before predicting: {last[0]}")
            if time.monotonic() - started > timeout:
                raise RuntimeError(f"{name} made no prediction within --timeout {timeout:g} s")
            time.sleep(0.01)
        return rig.heard(topic) - started
    finally:
        process.stop()


def run(args: argparse.Namespace) -> Report:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from gamma_net_ros.spin_thread import SpinThread

    _check(args)
    rclpy.init()
    rig = _Rig()
    executor = SingleThreadedExecutor()
    executor.add_node(rig.node)
    spinner = SpinThread(executor)
    rows = []
    try:
        for name in args.nodes:
            with tempfile.TemporaryDirectory(prefix=f"bench_startup_{name}_") as tmp:
                cache = f"{tmp}/numba"
                cold = _start_to_first_prediction(name, cache, rig, args.timeout)
                warm = _start_to_first_prediction(name, cache, rig, args.timeout)
            rows.append({"node": name, "cold_s": cold, "warm_s": warm, "cold_over_warm": cold / warm})
    finally:
        spinner.stop()
        rig.node.destroy_node()
        rclpy.try_shutdown()
    table = Table(
        "process start -> first prediction, numba's cache empty (cold) and filled by that start (warm)",
        ["node", "cold (s)", "warm (s)", "cold / warm"],
        formats={"cold (s)": "{:.1f}", "warm (s)": "{:.1f}", "cold / warm": "{:.1f}"},
    )
    for r in rows:
        table.add(r["node"], r["cold_s"], r["warm_s"], r["cold_over_warm"])
    return Report(tables=[table], data={"runs": rows})
