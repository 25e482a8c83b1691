"""``servo_emulator`` / ``python -m gamma_net_ros.hardware.emulator``: an emulator as its own process."""

from __future__ import annotations

import argparse
import pathlib
import signal
import sys
import threading
from collections.abc import Sequence

import numpy as np

from gamma_net_ros import entry
from gamma_net_ros.hardware import control_table as ct
from gamma_net_ros.hardware.emulator.bank import ServoBank
from gamma_net_ros.hardware.emulator.control import check_control_free
from gamma_net_ros.hardware.emulator.faults import Faults
from gamma_net_ros.hardware.emulator.pty_port import check_link_free
from gamma_net_ros.hardware.emulator.server import ServoEmulator


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="servo_emulator", description="Dynamixel servos (Protocol 2.0) on a pseudo-terminal, with faults."
    )
    parser.add_argument("--link", required=True, help="symlink path the driver opens (its `port` parameter)")
    parser.add_argument("--ids", type=int, nargs="+", default=[1, 2], help="servo ids")
    parser.add_argument("--positions", type=float, nargs="+", help="initial positions, rad (default 0)")
    parser.add_argument("--control", help="control folder to make, mode 0700, holding the socket (default: LINK.ctl)")
    parser.add_argument("--model-number", type=int, default=ct.FACTORY_VALUES[ct.MODEL_NUMBER])
    parser.add_argument("--drop", type=float, default=0.0, help="probability a reply is dropped")
    parser.add_argument("--corrupt", type=float, default=0.0, help="probability a reply is damaged (bad CRC)")
    parser.add_argument("--delay", type=float, default=0.0, help="probability a reply is late")
    parser.add_argument("--delay-s", type=float, default=0.1, help="how late, s")
    latency = "every reply held this long, s, like a USB adapter's latency timer (FTDI default: 0.016)"
    parser.add_argument("--latency-s", type=float, default=0.0, help=latency)
    parser.add_argument(
        "--obstacle",
        nargs=3,
        action="append",
        metavar=("ID", "LOW", "HIGH"),
        default=[],
        help="a region LOW..HIGH (rad) of servo ID's range that it cannot enter: it stalls there (repeatable)",
    )
    parser.add_argument(
        "--stall-current", type=float, default=2.3, help="A, Present Current pushing into an obstacle (XM430-W350)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the fault draws")
    parser.add_argument(
        "--grace-s",
        type=float,
        default=3.0,
        help="on SIGINT, serve on until the driver has closed the port, at most this long, s (SIGTERM: at once)",
    )
    return parser


def _number(text: str, kind, what: str):
    try:
        return kind(text)
    except ValueError:
        raise ValueError(f"{what} must be {'an integer' if kind is int else 'a number'}; got {text!r}") from None


def main(argv: Sequence[str] | None = None) -> int:
    """Run an emulator until SIGINT (once the port is let go) or SIGTERM; exit 2 with one line on a bad argument."""
    args = parser().parse_args(argv)
    link = pathlib.Path(args.link)
    control = pathlib.Path(args.control or f"{args.link}.ctl")
    try:
        # Before anything is made: a path that is not ours is never replaced, nor deleted at exit.
        check_link_free(link)
        check_control_free(control)
        bank = ServoBank(args.ids, positions=args.positions, model_number=args.model_number)
        for dxl_id, low, high in args.obstacle:
            bank.set_obstacle(
                _number(dxl_id, int, "--obstacle ID"),
                _number(low, float, "--obstacle LOW"),
                _number(high, float, "--obstacle HIGH"),
                stall_current=args.stall_current,
            )
        if not 0.0 <= args.grace_s <= 60.0:  # also refuses nan
            raise ValueError(f"--grace-s must be within 0..60 s; got {args.grace_s}")
        faults = Faults(
            drop=args.drop, corrupt=args.corrupt, delay=args.delay, delay_s=args.delay_s, latency_s=args.latency_s
        )
    except (ValueError, FileExistsError) as exc:
        print(f"servo_emulator: error: {exc}", file=sys.stderr)
        return 2
    emulator = ServoEmulator(bank, link=link, faults=faults, rng=np.random.default_rng(args.seed), control=control)
    stop, wind_down = threading.Event(), threading.Event()
    # Ctrl-C reaches every process of a launch at once: the servos outlive the driver's last
    # read and torque-off (until it closes the port) rather than vanish under it. SIGTERM: now.
    signal.signal(signal.SIGINT, lambda *_: wind_down.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    # Started by `ros2 launch` (reflex.launch.py): a launch that ends at once (SIGTERM) must not leave
    # the servos behind; its end now sends SIGTERM here, as it does to the launch's nodes.
    entry.stop_with_parent()
    try:
        emulator.open_port()
        print(f"servo emulator: ids {args.ids} on {emulator.port} -> {emulator.device}; control {control}", flush=True)
        emulator.serve(stop, wind_down=wind_down, grace_s=args.grace_s)
    except OSError as exc:  # the path was taken between the check and now, or cannot be made
        print(f"servo_emulator: error: {exc}", file=sys.stderr)
        return 2
    return 0
