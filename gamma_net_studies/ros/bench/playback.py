"""`gamma-net bench playback`: does bag_player deliver every message of a bag to the predictor node?

A 30 Hz JointState bag (``--messages`` long) with a bad message every ``--fault-every``
(stamped 0.1 s back: skipped by the stamp rule, not lost) is played by `bag_player` to the
predictor node, each as its own process with config/arm.yaml and reliable QoS, at each
``--rates`` multiple of the recorded pace. Per rate it counts the messages the player sent,
those the predictor received (used or skipped: its /diagnostics counts), and those it
skipped by rule; lost = sent - received. The reference in the same run is the same
playback with the player's window off (``window:=0``: reliable QoS alone), which is how
messages were lost before: a subscriber's KEEP_LAST history drops its oldest unread
message when a burst outruns the learner, and DDS acknowledges a message once it is in that
history, not once it is taken.
"""

from __future__ import annotations

import argparse
import subprocess
import threading
import time

from gamma_net_core.report import Report, Table

RATES = (1.0, 6.0, 20.0)
PERIOD_NS = 1_000_000_000 // 30


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--messages", type=int, default=1800, help="messages in the bag (30 Hz; 1800 = 60 s)")
    parser.add_argument("--rates", type=float, nargs="+", default=list(RATES), help="playback rates (x recorded)")
    parser.add_argument("--fault-every", type=int, default=100, help="a message stamped back every this many")
    parser.add_argument("--depth", type=int, default=100, help="the predictor's input_queue_depth (YAML: 100)")
    parser.add_argument("--no-reference", action="store_true", help="skip the window-off reference runs")


def _check(args: argparse.Namespace) -> None:
    if args.messages < 2:
        raise ValueError(f"--messages must be at least 2; got {args.messages}")
    if any(not rate > 0 for rate in args.rates):
        raise ValueError(f"--rates must be positive; got {args.rates}")
    if args.fault_every < 2:
        raise ValueError(f"--fault-every must be at least 2; got {args.fault_every}")
    if not 1 <= args.depth <= 100000:
        raise ValueError(f"--depth must be in [1, 100000]; got {args.depth}")


def write_bag(path, messages: int, fault_every: int) -> int:
    """A 30 Hz bag of a moving arm from the recordings' epoch; returns how many messages are stamped back."""
    import math

    from gamma_net_core.data.bags import JointStateBagWriter
    from gamma_net_core.signals.arm_recording import RECORDING_EPOCH_NS

    faults = 0
    with JointStateBagWriter(path) as bag:
        for i in range(messages):
            phase = 2 * math.pi * i / 420.0
            stamp = RECORDING_EPOCH_NS + i * PERIOD_NS
            if i % fault_every == fault_every - 1:
                stamp -= 3 * PERIOD_NS  # 0.1 s back: a bad message by the stamp rule
                faults += 1
            bag.write(
                stamp_ns=stamp,
                names=["shoulder", "elbow"],
                position=[-0.75 + 0.5 * math.cos(phase), 1.7 + 0.4 * math.sin(phase)],
                velocity=[-0.2 * math.sin(phase), 0.2 * math.cos(phase)],
                receive_ns=RECORDING_EPOCH_NS + i * PERIOD_NS,
            )
    return faults


class _Diagnostics:
    """The predictor's latest /diagnostics values, from a node spun in a thread."""

    def __init__(self, node) -> None:
        from diagnostic_msgs.msg import DiagnosticArray

        self.values: dict[str, str] = {}
        self.lock = threading.Lock()
        node.create_subscription(DiagnosticArray, "/diagnostics", self._on, 10)

    def _on(self, msg) -> None:
        for status in msg.status:
            if status.name.startswith("predictor"):
                with self.lock:
                    self.values = {kv.key: kv.value for kv in status.values}

    def counts(self) -> tuple[int, int, int]:
        """(accepted, skipped by the stamp rule, skipped in all)."""
        with self.lock:
            values = dict(self.values)
        return (
            int(values.get("accepted", 0)),
            int(values.get("skipped.stamp_backwards", 0)),
            int(values.get("skipped", 0)),
        )


def _play(bag, messages: int, rate: float, depth: int, window: int, diagnostics: _Diagnostics, log) -> dict:
    from gamma_net_ros.paths import config_file
    from gamma_net_ros.processes import NodeProcess, node_command

    predictor = NodeProcess(
        node_command(
            "gamma_net_ros.predictor",
            params_file=config_file("arm"),
            params={"reliable_input": True, "input_queue_depth": depth, "checkpoint_path": ""},
            node="predictor",
        )
    ).start(stdout=subprocess.DEVNULL)
    params = {"bag": str(bag), "rate": rate, "reliable": True, "wait_for_subscribers": 1, "consumers": 1}
    player = NodeProcess(
        node_command("gamma_net_ros.bag_player", params={**params, "window": window, "drain_timeout": 3.0})
    )
    with diagnostics.lock:
        diagnostics.values = {}
    started = time.monotonic()
    try:
        player.start(stdout=log)
        log.flush()
        player.wait(timeout=messages / (30.0 * rate) + 120.0)
        played = time.monotonic() - started
        # The counts settle within a diagnostics period or two once the player is done.
        last, still = None, time.monotonic()
        while time.monotonic() - still < 2.5:
            now = diagnostics.counts()
            if now != last:
                last, still = now, time.monotonic()
            time.sleep(0.1)
    finally:
        player.stop()
        predictor.stop()
    accepted, by_rule, skipped = last
    return {
        "rate": rate,
        "window": window,
        "sent": messages,
        "received": accepted + skipped,
        "skipped_by_rule": by_rule,
        "skipped": skipped,
        "lost": messages - accepted - skipped,
        "seconds": played,
    }


def run(args: argparse.Namespace) -> Report:
    import tempfile

    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    from gamma_net_ros.spin_thread import SpinThread

    _check(args)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_playback_") as tmp:
        bag = f"{tmp}/joint_states"
        faults = write_bag(bag, args.messages, args.fault_every)
        rclpy.init()
        node = Node("bench_playback")
        diagnostics = _Diagnostics(node)
        executor = SingleThreadedExecutor()
        executor.add_node(node)
        spinner = SpinThread(executor)
        try:
            with open(f"{tmp}/players.log", "w") as log:
                for rate in args.rates:
                    for window in (args.depth,) if args.no_reference else (args.depth, 0):
                        rows.append(_play(bag, args.messages, rate, args.depth, window, diagnostics, log))
        finally:
            spinner.stop()
            node.destroy_node()
            rclpy.try_shutdown()
    table = Table(
        f"bag_player -> predictor node, reliable QoS, input_queue_depth {args.depth}: {args.messages} messages "
        f"at 30 Hz, {faults} stamped 0.1 s back",
        ["rate (x)", "messages/s", "player", "sent", "received", "skipped by rule", "lost", "seconds"],
    )
    for r in rows:
        player = f"window {r['window']}" if r["window"] else "window off (reliable QoS only)"
        table.add(
            f"{r['rate']:g}",
            30.0 * r["rate"],
            player,
            r["sent"],
            r["received"],
            r["skipped_by_rule"],
            r["lost"],
            r["seconds"],
        )
    return Report(tables=[table], data={"runs": rows, "stamped_back": faults})
