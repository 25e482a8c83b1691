"""`gamma-net bench bridge`: transitions per second from a recording, through the ALE bridge, to a consumer node.

Every run starts real nodes as processes, with config/atari.yaml, as ``ros2 launch`` would:
the consumer first, then ``ale_bridge`` replaying the recording with ``exit_at_end``. The
bridge waits until the consumer reports, publishes at the consumer's pace (flow control,
window of ``--window`` messages), and stops once the consumer has taken every message; its
rate is transitions / (first message published -> last message taken). The consumers:

- ``neural_predictor``: the paper's network and learner settings, except that training
  starts after ``--min-replay-history`` steps (paper: 20,000) so that it trains during the
  delivery, the harder case; its ``/diagnostics`` give what it received, skipped and the
  gaps it saw, and how many updates it made and still owes.
- ``transition_counter``: a bare subscriber (counts, checks the order, reports taken): the
  reference, what rclpy and DDS deliver to a consumer that does nothing.

Runs alternate between the two (``--repeats`` each) so both see the same machine load.
Without ``--recording``, ``--steps`` transitions of Centipede are recorded first with the
random policy (`gamma-net atari record`), into a temporary directory.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import re
import tempfile
import time

from gamma_net_core.report import Report, Table

CONSUMERS = {
    "neural_predictor": "gamma_net_ros.neural_predictor.node",
    "transition_counter": "gamma_net_ros.transition_counter",
}
_DONE = re.compile(r"done: (\d+) transitions in ([0-9.]+) s")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--recording", default=None, help="a recording directory (default: record --steps)")
    parser.add_argument("--steps", type=int, default=20000, help="steps to record when no --recording is given")
    parser.add_argument(
        "--min-replay-history",
        type=int,
        default=2000,
        help="neural predictor: steps before training starts (paper: 20000; lower, so it trains while receiving)",
    )
    parser.add_argument("--window", type=int, default=1000, help="bridge: messages in flight at most")
    parser.add_argument(
        "--worker-nice", type=int, default=None, help="neural predictor: nice of its training thread (default: YAML)"
    )
    parser.add_argument("--repeats", type=int, default=1, help="runs per consumer, alternated")
    parser.add_argument("--timeout", type=float, default=600.0, help="s one delivery may take")
    parser.add_argument("--logs", default=None, help="keep the nodes' logs in this directory")


class _Diagnostics:
    """The latest /diagnostics values of each node, heard from a thread of our own."""

    def __init__(self) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.executors import SingleThreadedExecutor

        from gamma_net_ros.spin_thread import SpinThread

        self.context = rclpy.Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node("bench_bridge_listener", context=self.context)
        self.latest: dict[str, dict[str, str]] = {}
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 10)
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.spinner = SpinThread(self.executor)

    def _on_diagnostics(self, msg) -> None:
        for status in msg.status:
            self.latest[status.name.split(":")[0]] = {kv.key: kv.value for kv in status.values}

    def wait_for(self, name: str, key: str, at_least: int, timeout: float) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            values = self.latest.get(name, {})
            if int(values.get(key, -1)) >= at_least:
                return values
            time.sleep(0.1)
        last = self.latest.get(name)
        raise RuntimeError(f"{name} did not report {key} >= {at_least} within {timeout} s; last heard: {last}")

    def close(self) -> None:
        self.spinner.stop()
        self.node.destroy_node()
        self.context.try_shutdown()


def _deliver(consumer: str, recording, args, logs: pathlib.Path, run: int, listener: _Diagnostics) -> dict:
    from gamma_net_ros.paths import config_file
    from gamma_net_ros.processes import NodeProcess, node_command

    params = config_file("atari")
    consumer_params = {"queue_depth": max(2000, args.window)}
    if consumer == "neural_predictor":
        consumer_params["learner.min_replay_history"] = args.min_replay_history
        if args.worker_nice is not None:
            consumer_params["worker_nice"] = args.worker_nice
    listener.latest.pop(consumer, None)
    node = NodeProcess(
        node_command(CONSUMERS[consumer], params_file=params, params=consumer_params, node=consumer),
        log_path=logs / f"{consumer}-{run}.log",
    ).start()
    bridge_log = logs / f"ale_bridge-{consumer}-{run}.log"
    bridge = NodeProcess(
        node_command(
            "gamma_net_ros.ale_bridge",
            params_file=params,
            params={"shard_dir": str(recording), "exit_at_end": True, "window": args.window},
            node="ale_bridge",
        ),
        log_path=bridge_log,
    )
    try:
        bridge.start()
        code = bridge.wait(timeout=args.timeout)
        bridge.stop()
        found = _DONE.search(bridge_log.read_text())
        if code != 0 or found is None:
            raise RuntimeError(f"the bridge failed (exit code {code}); see {bridge_log}")
        published, seconds = int(found.group(1)), float(found.group(2))
        values = listener.wait_for(consumer, "received", published, timeout=15)
    finally:
        bridge.stop()
        node.stop()
    received = int(values["received"])
    disorder = int(values.get("gaps", values.get("out_of_order", 0)))
    return {
        "consumer": consumer,
        "run": run,
        "transitions": published,
        "seconds": seconds,
        "rate": published / seconds,
        "received": received,
        "lost": published - received,
        "out_of_order": disorder,
        "skipped": int(values.get("skipped", 0)),
        "updates": int(values["updates"]) if "updates" in values else None,
        "updates_behind": int(values["updates_behind"]) if "updates_behind" in values else None,
    }


def run(args: argparse.Namespace) -> Report:
    from gamma_net_core.cli import check_range, input_path, output_dir
    from gamma_net_core.data.shards import ShardReader

    input_path("--recording", args.recording, kind="dir")
    check_range("--steps", args.steps, low=1)
    check_range("--min-replay-history", args.min_replay_history, low=0)
    check_range("--window", args.window, low=1)
    check_range("--worker-nice", args.worker_nice, low=0, high=19)  # the neural predictor's declared range
    check_range("--repeats", args.repeats, low=1)
    check_range("--timeout", args.timeout, above=0.0)
    output_dir("--logs", args.logs)
    import rclpy  # noqa: F401  (refused here, in one line, where ROS 2 is missing; not after recording)

    temporary = tempfile.TemporaryDirectory(prefix="bench_bridge_")
    try:
        recording = args.recording
        if recording is None:
            from gamma_net_core.atari.record import record

            recording = pathlib.Path(temporary.name) / "centipede"
            record(recording, steps=args.steps, progress=True)
        count = ShardReader(recording, feature_size=512).count
        logs = pathlib.Path(args.logs) if args.logs else pathlib.Path(temporary.name) / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        listener = _Diagnostics()
        load_before = os.getloadavg()
        try:
            results = [
                _deliver(consumer, recording, args, logs, r, listener)
                for r in range(args.repeats)
                for consumer in CONSUMERS
            ]
        finally:
            listener.close()
        load_after = os.getloadavg()
    finally:
        temporary.cleanup()
    table = Table(
        f"ALE bridge: {count} recorded transitions to one consumer (window {args.window})",
        ["consumer", "run", "transitions/s", "received", "lost", "out of order", "updates", "updates behind"],
        formats={"transitions/s": "{:.0f}"},
    )
    for r in results:
        table.add(
            r["consumer"],
            r["run"],
            r["rate"],
            r["received"],
            r["lost"],
            r["out_of_order"],
            "-" if r["updates"] is None else r["updates"],
            "-" if r["updates_behind"] is None else r["updates_behind"],
        )
    best = {c: max(r["rate"] for r in results if r["consumer"] == c) for c in CONSUMERS}
    summary = Table(
        "Best rate per consumer",
        ["consumer", "transitions/s", "x bare subscriber", "goal"],
        formats={"transitions/s": "{:.0f}", "x bare subscriber": "{:.2f}"},
    )
    for consumer, rate in best.items():
        goal = ">= 2000/s, no loss" if consumer == "neural_predictor" else "reference"
        summary.add(consumer, rate, rate / best["transition_counter"], goal)
    lossless = all(r["lost"] == 0 and r["out_of_order"] == 0 for r in results)
    data = {
        "runs": results,
        "best": best,
        "lossless": lossless,
        "recording": str(args.recording or f"recorded {count} steps (random policy)"),
        "machine": {
            "cpus": os.cpu_count(),
            "processor": platform.processor() or platform.machine(),
            "python": platform.python_version(),
            "load_average_before": load_before,
            "load_average_after": load_after,
        },
    }
    if not lossless:
        data["exit_code"] = 1
    return Report(tables=[table, summary], data=data)
