"""The `gamma-net` command: one entry point, one subcommand per study, tool or benchmark.

A subcommand lives in its own module exposing ``add_arguments(parser)`` and
``run(args) -> Report``. Modules are imported only when their subcommand runs, so
`gamma-net --help` is instant and a missing optional dependency (ROS, ALE, Ray)
only affects the subcommands that need it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time

from gamma_net_core.report import Report, write_json

#: (words, module, one-line help). Modules under gamma_net_ros need ROS 2 at run time.
COMMANDS: list[tuple[tuple[str, ...], str, str]] = [
    (("demo",), "gamma_net_ros.demo", "the main job: the arm pipeline on real ROS 2 nodes, no hardware"),
    (("timescales",), "gamma_net_core.experiments.timescale_table", "gamma <-> tau table (the paper's Table 1)"),
    (("square-wave",), "gamma_net_core.experiments.square_wave", "the paper's square-wave study (linear Γ-net)"),
    (("arm", "simulate"), "gamma_net_core.experiments.arm_simulate", "simulated operator drives the arm: rosbag2"),
    (("arm", "train"), "gamma_net_core.experiments.arm_train", "the robot-arm study (Table 2) on a JointState bag"),
    (("atari", "record"), "gamma_net_core.atari.record", "play a policy in ALE, record φ/cumulant shards (resumable)"),
    (("atari", "points"), "gamma_net_core.atari.points_command", "evaluation points + Monte-Carlo returns per probe τ"),
    (("atari", "train-agent"), "gamma_net_core.atari.dqn", "train a DQN agent (Nature CNN) whose φ feeds Γ-nets"),
    (("atari", "import-dopamine"), "gamma_net_core.atari.import_dopamine", "a Dopamine TF checkpoint -> a policy file"),
    (("atari", "train"), "gamma_net_core.experiments.atari_train", "train Γ-nets and probe networks on shards"),
    (("atari", "evaluate"), "gamma_net_core.experiments.atari_evaluate", "the paper's Atari comparison figures"),
    (("bench", "all"), "gamma_net_ros.bench_all", "every benchmark with its defaults (make bench)"),
    (("bench", "linear"), "gamma_net_core.bench.linear", "linear Γ-net steps per second against its NumPy reference"),
    (("bench", "neural"), "gamma_net_core.bench.neural", "neural learner updates/s (tiled vs per-γ loop), replay µs"),
    (("bench", "atari"), "gamma_net_core.bench.atari", "speed of recording, rollouts per core, 1 -> 2 workers"),
    (("bench", "ros"), "gamma_net_ros.bench_ros", "predictor node latency p50/p99, highest input rate sustained"),
    (("bench", "bridge"), "gamma_net_ros.bench_bridge", "ALE bridge -> neural predictor node: transitions/s, no loss"),
]


def _usage() -> str:
    width = max(len(" ".join(words)) for words, _, _ in COMMANDS)
    lines = [
        "usage: gamma-net <command> [options]   (gamma-net <command> --help for its options)",
        "",
        "Γ-nets: value estimation generalized over timescale. Commands:",
    ]
    lines += [f"  {' '.join(words):<{width}}  {help_}" for words, _, help_ in COMMANDS]
    lines += ["", "Every command that computes or measures prints tables; --json PATH writes them as JSON."]
    return "\n".join(lines)


def _match(argv: list[str]) -> tuple[tuple[str, ...], str, str] | None:
    best = None
    for entry in COMMANDS:
        words = entry[0]
        if tuple(argv[: len(words)]) == words and (best is None or len(words) > len(best[0])):
            best = entry
    return best


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    entry = _match(argv)
    if entry is None:
        if argv and argv[0] not in ("-h", "--help"):
            print(f"gamma-net: unknown command {' '.join(argv[:2])!r}\n", file=sys.stderr)
            print(_usage(), file=sys.stderr)
            return 2
        print(_usage())
        return 0
    words, module_name, help_ = entry
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        print(f"gamma-net {' '.join(words)}: cannot import {module_name}: {exc}", file=sys.stderr)
        if module_name.startswith("gamma_net_ros"):
            print("  this command needs ROS 2: run it through `make`, or `source tools/env.sh` first", file=sys.stderr)
        return 2
    parser = argparse.ArgumentParser(prog="gamma-net " + " ".join(words), description=help_)
    module.add_arguments(parser)
    parser.add_argument("--json", metavar="PATH", help="also write the numbers printed as JSON to PATH")
    args = parser.parse_args(argv[len(words) :])
    started = time.perf_counter()
    try:
        report = module.run(args)
    except (ValueError, FileNotFoundError) as exc:
        print(f"gamma-net {' '.join(words)}: error: {exc}", file=sys.stderr)
        return 1
    if not isinstance(report, Report):
        raise TypeError(f"{module_name}.run returned {type(report).__name__}, expected Report")
    report.data.setdefault("wall_seconds", round(time.perf_counter() - started, 3))
    text = report.render()
    if text:
        print(text)
    if args.json:
        arguments = {k: v for k, v in vars(args).items() if k != "json"}
        write_json(args.json, report.to_json(" ".join(words), arguments))
        print(f"\njson: {args.json}")
    return int(report.data.get("exit_code", 0))


if __name__ == "__main__":
    sys.exit(main())
