"""`gamma-net demo`: the main job of `make demo`: real ROS 2 nodes exchanging predictions."""

from __future__ import annotations

import argparse
import time

from gamma_net_core.report import Report, Table
from gamma_net_ros.paths import config_file
from gamma_net_ros.processes import NodeProcess, node_command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--params-file", default=None, help="YAML parameters (default: config/smoke.yaml)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the predictions")


def run(args: argparse.Namespace) -> Report:
    params = args.params_file or config_file("smoke")
    talker = NodeProcess(node_command("gamma_net_ros.smoke_talker", params_file=params))
    monitor = NodeProcess(node_command("gamma_net_ros.prediction_monitor", params_file=params))
    started = time.perf_counter()
    with talker:
        monitor.start(stdout=None)
        try:
            code = monitor.wait(timeout=args.timeout)
        finally:
            monitor.stop()
    table = Table("smoke demo", ["nodes", "monitor exit code", "seconds"])
    table.add("smoke_talker -> prediction_monitor", code, time.perf_counter() - started)
    return Report(tables=[table], data={"exit_code": 0 if code == 0 else 1})
