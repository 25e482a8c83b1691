"""`gamma-net reflex base-realtime`: the base's rules through the real processes, for minutes, in real time.

Each run is one ``ros2 launch gamma_net_ros base.launch.py`` (the base emulator, the scripted
operator, the Horde learning from scratch, the reflex) with a condition's rules file, for
``--minutes`` of wall time from the base's first counters, then Ctrl-C, which must end it with
code 0; ``--seeds`` runs a condition, one operator seed each. Conditions:

- ``reactive``: the range rule alone (``config/base_range_rules.yaml``);
- ``shipped``: the file as shipped, the prediction rule and the range rule together, the Horde from scratch;
- ``resumed``: the same, the Horde resumed from its checkpoint (``checkpoint_path``), as on a robot's second
  session: first one unmeasured run of the shipped launch for ``--warmup-minutes`` (operator seed
  first-seed + seeds, apart from the measured ones) saves it at its Ctrl-C, then each measured run loads it,
  learns on and saves it again.

The base's own counters (``base/counters``: bumps, contact time, distance) give bumps and
metres a minute per run; a rule that locks the base shows as distance lost against the reactive
rule's (within 10 % is "no lock"). Beside ``reactive``, each prediction condition's ratio of bumps a
minute to the reactive rule's comes with a bootstrap 95 % interval over runs (unpaired: in real time the
same seed takes another path under each rule).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import signal
import subprocess
import time

import numpy as np

from gamma_net_core.cli import check, check_range, output_dir
from gamma_net_core.paths import config_file
from gamma_net_core.report import Report, Table
from gamma_net_studies.reflex_realtime_stats import bootstrap_ratio

CONDITIONS = ("reactive", "shipped", "resumed")
#: The conditions whose rules are the shipped file's, compared with the reactive rule's.
PREDICTIVE = ("shipped", "resumed")
QUANTITIES = ("bumps_per_min", "contact_s_per_min", "distance_m_per_min")
#: s; the launch's nodes start (the Horde compiles its kernels) within this, or the run fails.
START_TIMEOUT_S = 120.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--minutes", type=float, default=10.0, help="wall-clock minutes per run")
    parser.add_argument("--seeds", type=int, default=1, help="runs per condition, operator seeds first-seed, ...")
    parser.add_argument("--first-seed", type=int, default=0, help="the first run's operator seed")
    parser.add_argument(
        "--conditions", default=",".join(CONDITIONS), help=f"comma-separated, of {', '.join(CONDITIONS)}"
    )
    parser.add_argument("--dash-speed", type=float, default=0.7, help="m/s the operator heads for walls at")
    parser.add_argument(
        "--warmup-minutes", type=float, default=4.0, help="resumed: minutes of the unmeasured run that trains the Horde"
    )
    parser.add_argument("--out", required=True, help="folder for each run's log and the resumed Horde's checkpoint")


def run(args: argparse.Namespace) -> Report:
    check_range("--minutes", args.minutes, above=0.0)
    check_range("--seeds", args.seeds, low=1)
    check_range("--first-seed", args.first_seed, low=0)
    check_range("--dash-speed", args.dash_speed, above=0.0, high=3.0)
    check_range("--warmup-minutes", args.warmup_minutes, above=0.0)
    conditions = [c for c in args.conditions.split(",") if c]
    check(
        conditions and set(conditions) <= set(CONDITIONS),
        f"--conditions must be of {CONDITIONS}; got {args.conditions}",
    )
    out = output_dir("--out", args.out)
    out.mkdir(parents=True, exist_ok=True)
    import rclpy

    seeds = range(args.first_seed, args.first_seed + args.seeds)
    checkpoint = out / "base_horde.npz"
    rclpy.init()
    try:
        runs = {}
        for c in conditions:
            resumed = checkpoint if c == "resumed" else None
            if resumed is not None:
                runs["warmup"] = [_warm_up(checkpoint, out, args)]
            runs[c] = [
                run_condition(c, out, minutes=args.minutes, seed=s, dash=args.dash_speed, checkpoint=resumed)
                for s in seeds
            ]
    finally:
        rclpy.try_shutdown()
    return _report(runs, args)


def _warm_up(checkpoint: pathlib.Path, out: pathlib.Path, args: argparse.Namespace) -> dict:
    """The unmeasured shipped run whose Horde the resumed runs start from: its counters, and the checkpoint."""
    checkpoint.unlink(missing_ok=True)
    seed = args.first_seed + args.seeds
    warm = run_condition("shipped", out, minutes=args.warmup_minutes, seed=seed, dash=args.dash_speed,
                         checkpoint=checkpoint, label="warmup")  # fmt: skip
    check(checkpoint.is_file(), f"the warm-up run saved no Horde checkpoint at {checkpoint} (log: {warm['log']})")
    return warm


def _report(runs: dict[str, list[dict]], args: argparse.Namespace) -> Report:
    table = Table(
        f"base real-time: {args.seeds} run(s) of {args.minutes:g} min a condition from seed {args.first_seed}, "
        f"dash {args.dash_speed:g} m/s",
        ["condition", "bumps / min", "contact s / min", "m / min", "exit codes"],
    )
    mean = {c: {k: float(np.mean([r[k] for r in rs])) for k in QUANTITIES} for c, rs in runs.items()}
    for condition, rs in runs.items():
        codes = sorted({r["exit_code"] for r in rs})
        table.add(condition, *(mean[condition][k] for k in QUANTITIES), ",".join(map(str, codes)))
    data: dict = {"runs": runs}
    tables = [table]
    compared = [c for c in PREDICTIVE if c in runs] if "reactive" in runs else []
    if compared:
        ratio = Table(
            "over the reactive rule (bootstrap 95 % over runs)", ["condition", "bumps a minute", "distance a minute"]
        )
        data["ratios"] = {}
        for c in compared:
            bumps = bootstrap_ratio(
                [r["bumps_per_min"] for r in runs[c]], [r["bumps_per_min"] for r in runs["reactive"]]
            )
            distance = mean[c]["distance_m_per_min"] / mean["reactive"]["distance_m_per_min"]
            low, high = bumps["low"], bumps["high"]
            ratio.add(
                c, "-" if bumps["ratio"] is None else f"{bumps['ratio']:.2f} [{low:.2f}, {high:.2f}]", f"{distance:.3f}"
            )
            data["ratios"][c] = {"bumps": bumps, "distance": distance}
        tables.append(ratio)
    return Report(tables=tables, data=data)


def _rules_file(condition: str) -> pathlib.Path:
    return config_file("base_range_rules" if condition == "reactive" else "base_reflex_rules")


def run_condition(
    condition: str,
    folder: pathlib.Path,
    *,
    minutes: float,
    seed: int,
    dash: float,
    checkpoint: pathlib.Path | None = None,
    label: str | None = None,
) -> dict:
    """One launch for ``minutes`` of wall time with the condition's rules (the Horde resumed from and saved to
    ``checkpoint`` if given); the base's counters over that time."""
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node
    from std_msgs.msg import Float64MultiArray

    rules = _rules_file(condition)
    command = ["ros2", "launch", "gamma_net_ros", "base.launch.py", f"rules_file:={rules}", f"seed:={seed}"]
    command.append(f"dash_speed:={dash}")
    if checkpoint is not None:
        command.append(f"checkpoint_path:={checkpoint}")
    log_path = folder / f"{label or condition}_seed{seed}.log"
    counters: list[list[float]] = []
    node = Node(f"base_realtime_{label or condition}")
    node.create_subscription(Float64MultiArray, "/base/counters", lambda m: counters.append(list(m.data)), 10)
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    with open(log_path, "w") as log:
        launched = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while not counters and time.monotonic() < deadline and launched.poll() is None:
                executor.spin_once(timeout_sec=0.1)
            if not counters:
                raise ValueError(f"{condition}: no base counters within {START_TIMEOUT_S:g} s (log: {log_path})")
            first = counters[-1]
            end = time.monotonic() + 60.0 * minutes
            while time.monotonic() < end and launched.poll() is None:
                executor.spin_once(timeout_sec=0.1)
            last = counters[-1]
            if launched.poll() is None:
                os.killpg(launched.pid, signal.SIGINT)
            code = launched.wait(timeout=60)
        finally:
            if launched.poll() is None:
                os.killpg(launched.pid, signal.SIGKILL)
                launched.wait()
            executor.remove_node(node)
            node.destroy_node()
    elapsed = last[3] - first[3]
    if not elapsed > 0:
        raise ValueError(f"{condition}: the base's clock did not advance (log: {log_path})")
    per_min = 60.0 / elapsed
    return {
        "bumps_per_min": (last[0] - first[0]) * per_min,
        "contact_s_per_min": (last[1] - first[1]) * per_min,
        "distance_m_per_min": (last[2] - first[2]) * per_min,
        "base_minutes": elapsed / 60.0,
        "exit_code": code,
        "log": str(log_path),
    }
