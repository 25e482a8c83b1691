"""`gamma-net bench all` (`make bench`): every benchmark with its defaults, one report.

Each benchmark times its own reference in the same run, so the ratios it prints hold for
whatever machine runs this; the absolute rates are for docs/benchmarks.md's notes.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

from gamma_net_core.report import Report

BENCHMARKS = {
    "linear": "gamma_net_studies.bench.linear",
    "horde": "gamma_net_studies.bench.horde",
    "neural": "gamma_net_studies.bench.neural",
    "atari": "gamma_net_studies.bench.atari",
    "off-policy": "gamma_net_studies.bench.off_policy",
    "ros": "gamma_net_studies.ros.bench.ros",
    "bridge": "gamma_net_studies.ros.bench.bridge",
    "horde-node": "gamma_net_studies.ros.bench.horde",
    "playback": "gamma_net_studies.ros.bench.playback",
    "startup": "gamma_net_studies.ros.bench.startup",
    "reflex": "gamma_net_studies.ros.bench.reflex",
}
#: Optional packages each benchmark needs: checked before the first one runs, not after an hour.
NEEDS = {
    "neural": ("torch",),
    "atari": ("ale_py", "torch"),
    "ros": ("rclpy",),
    "bridge": ("rclpy", "ale_py"),
    "horde-node": ("rclpy",),
    "playback": ("rclpy",),
    "startup": ("rclpy", "torch"),
    "reflex": ("rclpy",),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--only", nargs="+", choices=sorted(BENCHMARKS), help="run only these benchmarks")


def run(args: argparse.Namespace) -> Report:
    selected = [name for name in BENCHMARKS if not args.only or name in args.only]
    for name in selected:
        for package in NEEDS.get(name, ()):
            if importlib.util.find_spec(package) is None:
                raise ModuleNotFoundError(f"No module named {package!r} (bench {name})", name=package)
    report = Report()
    for name, module_name in BENCHMARKS.items():
        if args.only and name not in args.only:
            continue
        print(f"[bench all] {name} ...", file=sys.stderr, flush=True)
        module = importlib.import_module(module_name)
        parser = argparse.ArgumentParser()
        module.add_arguments(parser)
        part = module.run(parser.parse_args([]))
        for table in part.tables:
            table.title = f"[{name}] {table.title}"
        report.tables += part.tables
        report.data[name] = part.data
        report.files += part.files
    return report
