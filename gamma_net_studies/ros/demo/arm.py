"""`gamma-net demo` (`make demo`): the whole arm pipeline on real ROS 2 nodes, no hardware needed.

    servo emulator (pty) <- dynamixel_sdk -> dynamixel_driver -> joint_states -> predictor -> predictions
                                   ^                                  |
                          joint_commands <- teleop <- joy <- operator (scripted, the paper's human)

Every box is a real node started as its own process with the same YAML files a robot uses
(config/dynamixel.yaml, config/arm.yaml); the servo emulator speaks Dynamixel Protocol 2.0
on a pseudo-terminal, so the driver runs the real SDK. Before the live run, the predictor's
learner is trained on a simulated 50-circuit recording (a rosbag2, as a user would record
on their robot) and the node resumes from that checkpoint, then keeps learning online.

While it runs, a line of predictions at a few timescales is printed every two seconds. At
the end the true discounted return is computed from the recorded shoulder speed, and the
predictions are compared with it: a PNG of predictions against the return, and the
cumulative absolute error table (the paper's Table 2 measure). Beside the predictor, a Horde of
questions about the same arm is learned live and checked online (gamma_net_studies.ros.demo.horde).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import pathlib
import shutil
import sys
import tempfile
import time

import numpy as np

from gamma_net_core.cli import UsageError, check, check_range, output_dir
from gamma_net_core.config import load_config
from gamma_net_core.data.bags import read_joint_states, write_recording
from gamma_net_core.data.joints import JointsConfig, JointSelector, stamp_seconds
from gamma_net_core.evaluation import cumulative_absolute_error
from gamma_net_core.joint_stream import OnlineGammaNet
from gamma_net_core.linear import GammaNetConfig
from gamma_net_core.plots import plot_predictions
from gamma_net_core.report import Report, Table, write_json
from gamma_net_core.returns import discounted_returns
from gamma_net_core.signals.arm import ArmConfig, ArmKinematics
from gamma_net_core.signals.arm_recording import simulate_arm
from gamma_net_core.signals.maze import MazeConfig, MazePath
from gamma_net_core.timescales import TimescaleSampling
from gamma_net_ros.paths import config_file
from gamma_net_ros.processes import NodeProcess, node_command
from gamma_net_studies.ros.demo.horde import HordeDemo

#: Published and shown: the paper's Table 2 timescales (tau 10, 30, 60, 100) and tau = 1.
DEMO_TAUS = (1.0, 10.0, 30.0, 60.0, 100.0)
SHOWN_TAUS = (1.0, 10.0, 30.0, 100.0)
#: Shortest live run: the error is scored on returns over 5 tau_max (500 steps, ~17 s at 30 Hz).
MIN_SECONDS = 20.0
#: s to wait for the predictor to learn live (a cold start on a loaded 2-core machine takes minutes).
FIRST_PREDICTION_TIMEOUT = 300.0
#: What the demo writes in --out (besides --json): replaced only where an earlier demo wrote it.
LOG_NAMES = ("servo_emulator", "dynamixel_driver", "teleop", "operator", "predictor", "horde")
CHECKPOINT_NAME = "predictor.npz"
BAG_NAME = "pretrain_bag"
FIGURE_NAME = "demo_predictions.png"
REFLEX_DIR = "reflex"  # the reflex comparison's figure and warmed Horde
#: In --out: the files the demo wrote, each with its size and mtime, so that a later run
#: replaces its own earlier outputs and refuses to touch anything else.
MANIFEST_NAME = ".gamma-net-demo.json"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--seconds", type=float, default=90.0, help=f"length of the live run (default 90, at least {MIN_SECONDS:g})"
    )
    parser.add_argument("--out", default="runs/demo", help="folder for the bag, checkpoint, logs, figure, JSON")
    parser.add_argument(
        "--pretrain-circuits", type=int, default=50, help="simulated circuits learned offline first (0: none)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seeds the simulated recording and the operator")
    parser.add_argument(
        "--reflex-seconds",
        type=float,
        default=120.0,
        help="simulated seconds of each reflex condition at the obstacle, run last (0: none)",
    )


def _pretrain(out: pathlib.Path, arm_yaml: pathlib.Path, circuits: int, seed: int) -> dict:
    """Simulate a recording, write it as a rosbag2, learn it offline, save the predictor's checkpoint."""
    bag = out / BAG_NAME
    if bag.exists():  # an earlier demo's (checked by _check_outputs)
        shutil.rmtree(bag)
    print(f"[demo] simulating {circuits} circuits of the operator and writing {bag} ...", flush=True)
    recording = simulate_arm(circuits=circuits, rng=np.random.default_rng(seed + 1000))
    write_recording(bag, recording)
    joints = load_config(JointsConfig, arm_yaml, "predictor", "joints")
    data = read_joint_states(bag, joints=joints)
    online = _online(arm_yaml, seed=load_config_seed(arm_yaml))
    started = time.perf_counter()
    updates = online.learn_recording(stamps=data.stamps, inputs=data.inputs, cumulants=data.cumulants)
    seconds = time.perf_counter() - started
    online.save(out / CHECKPOINT_NAME)
    print(f"[demo] learned {updates} transitions offline in {seconds:.1f} s -> {out / CHECKPOINT_NAME}", flush=True)
    return {"circuits": circuits, "steps": len(data.stamps), "updates": updates, "seconds": round(seconds, 2)}


def load_config_seed(arm_yaml: pathlib.Path) -> int:
    from gamma_net_core.config import load_section

    return int(load_section(arm_yaml, "predictor").get("seed", 0))


def _online(arm_yaml: pathlib.Path, *, seed: int) -> OnlineGammaNet:
    from gamma_net_core.config import load_section

    return OnlineGammaNet(
        joints=load_config(JointsConfig, arm_yaml, "predictor", "joints"),
        learner=load_config(GammaNetConfig, arm_yaml, "predictor", "learner"),
        timescales=load_config(TimescaleSampling, arm_yaml, "predictor", "timescales"),
        rng=np.random.default_rng(seed),
        max_gap=float(load_section(arm_yaml, "predictor").get("max_gap", 1.0)),
    )


def _start_position(arm_yaml: pathlib.Path) -> np.ndarray:
    """Joint angles that put the tool on the wire's start point."""
    arm = load_config(ArmConfig, arm_yaml, "/**", "arm")
    maze = MazePath.from_config(load_config(MazeConfig, arm_yaml, "/**", "maze"))
    return ArmKinematics.from_config(arm).inverse(maze.point_at(0.0))


def _outputs(out: pathlib.Path, pretrain: bool) -> list[pathlib.Path]:
    """The paths a run writes in ``out`` (the checkpoint and the bag only when it pretrains)."""
    paths = [out / "logs" / f"{name}.log" for name in LOG_NAMES] + [out / FIGURE_NAME, out / REFLEX_DIR]
    return paths + ([out / CHECKPOINT_NAME, out / BAG_NAME] if pretrain else [])


def _signature(path: pathlib.Path) -> list[int]:
    stat = path.stat()
    return [stat.st_size, stat.st_mtime_ns]


def _files_below(path: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in path.rglob("*") if not p.is_dir()) if path.is_dir() else [path]


def _manifest(out: pathlib.Path) -> dict[str, list[int]]:
    """What earlier demos wrote in ``out``: relative path -> [size, mtime_ns]; empty where none is readable."""
    try:
        files = json.loads((out / MANIFEST_NAME).read_text())["files"]
        return {str(k): list(v) for k, v in files.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def _check_outputs(out: pathlib.Path, paths: list[pathlib.Path]) -> None:
    """Refuse, before any work, to replace a file in ``out`` that no earlier demo wrote (or that changed since).

    Raises:
      UsageError: naming the first such file.
    """
    logs = out / "logs"
    check(not logs.exists() or logs.is_dir(), f"--out {out}: {logs} is a file; the demo writes its logs there")
    known = _manifest(out)
    for path in paths:
        if not (path.exists() or path.is_symlink()):
            continue
        for file in _files_below(path):
            rel = os.path.relpath(file, out)
            if file.is_symlink() or known.get(rel) != _signature(file):
                raise UsageError(
                    f"--out {out}: {file} exists and was not written by an earlier `gamma-net demo` (or changed "
                    "since); the demo never replaces it: move it away or choose another --out"
                )


def _write_manifest(out: pathlib.Path, paths: list[pathlib.Path]) -> None:
    """Record what this run wrote, keeping earlier demos' entries whose files are unchanged."""
    files = {}
    for rel, signature in _manifest(out).items():
        file = out / rel
        if file.is_file() and _signature(file) == signature:
            files[rel] = signature
    for path in paths:
        if path.exists():
            files.update({os.path.relpath(f, out): _signature(f) for f in _files_below(path)})
    write_json(out / MANIFEST_NAME, {"files": files})


def run(args: argparse.Namespace) -> Report:
    import rclpy  # noqa: F401  (without ROS 2: refused here, in one line, before anything is written)

    check(
        math.isfinite(args.seconds) and args.seconds >= MIN_SECONDS,
        f"--seconds must be >= {MIN_SECONDS:g}; got {args.seconds} (predictions are scored on returns over 500 steps)",
    )
    check_range("--pretrain-circuits", args.pretrain_circuits, low=0)
    check_range("--seed", args.seed, low=0)
    check_range("--reflex-seconds", args.reflex_seconds, low=0.0)
    out = output_dir("--out", args.out)
    outputs = _outputs(out, pretrain=args.pretrain_circuits > 0)
    _check_outputs(out, outputs)  # nothing is written or removed before this
    try:
        return _run(args, out)
    finally:
        if out.is_dir():
            _write_manifest(out, outputs)


def _run(args: argparse.Namespace, out: pathlib.Path) -> Report:
    import rclpy

    (out / "logs").mkdir(parents=True, exist_ok=True)
    arm_yaml, dxl_yaml = config_file("arm"), config_file("dynamixel")
    checkpoint = out / CHECKPOINT_NAME
    pretrain = _pretrain(out, arm_yaml, args.pretrain_circuits, args.seed) if args.pretrain_circuits > 0 else {}

    link_dir = pathlib.Path(tempfile.mkdtemp(prefix="gnr-"))  # short: the control socket path is length-limited
    link = link_dir / "ttyDXL"
    start = _start_position(arm_yaml)
    logs = out / "logs"
    emulator = NodeProcess(
        [
            *(sys.executable, "-u", "-m", "gamma_net_ros.hardware.emulator", "--link", str(link), "--ids", "1", "2"),
            *("--positions", *(f"{p:.6f}" for p in start)),
        ],
        log_path=logs / "servo_emulator.log",
    )
    nodes = {
        "dynamixel_driver": NodeProcess(
            node_command(
                "gamma_net_ros.dynamixel_driver.node",
                params_file=dxl_yaml,
                params={"port": str(link)},
                node="dynamixel_driver",
            ),
            log_path=logs / "dynamixel_driver.log",
        ),
        "teleop": NodeProcess(node_command("gamma_net_ros.teleop", params_file=arm_yaml), log_path=logs / "teleop.log"),
        "operator": NodeProcess(
            node_command("gamma_net_ros.operator", params_file=arm_yaml, params={"seed": args.seed}, node="operator"),
            log_path=logs / "operator.log",
        ),
        "predictor": NodeProcess(
            node_command(
                "gamma_net_ros.predictor",
                params_file=arm_yaml,
                params={
                    "checkpoint_path": str(checkpoint.resolve()) if pretrain else "",
                    "publish_timescales": list(DEMO_TAUS),
                },
                node="predictor",
            ),
            log_path=logs / "predictor.log",
        ),
    }
    rclpy.init()
    recorder = horde = None
    try:
        emulator.start()
        from gamma_net_ros.hardware.emulator import EmulatorClient

        EmulatorClient(f"{link}.ctl").wait_ready(timeout=30)
        for node in nodes.values():
            node.start()
        print(f"[demo] servo emulator on {link}; nodes: {', '.join(nodes)} (logs in {logs})", flush=True)
        recorder = _Recorder(load_config(JointsConfig, arm_yaml, "predictor", "joints"))
        horde = HordeDemo(recorder.node, logs)
        _live(recorder, nodes, args.seconds, horde)
    finally:
        if horde is not None:
            horde.stop()
        for name in ("operator", "teleop", "predictor", "dynamixel_driver"):
            nodes[name].stop()
        emulator.stop()
        if recorder is not None:
            recorder.destroy_node()
        rclpy.try_shutdown()
        shutil.rmtree(link_dir, ignore_errors=True)
    report = _evaluate(recorder, out, pretrain, args)
    report.tables.append(horde.table())
    if args.reflex_seconds > 0:
        report.summary = _reflex_line(out / REFLEX_DIR, seed=args.seed, seconds=args.reflex_seconds)
    return report


def _reflex_line(folder: pathlib.Path, *, seed: int, seconds: float) -> str:
    """The reflex study's three conditions on the demo's seed, in one line (`gamma-net reflex study` in small).

    The arm, operator and Horde run in simulated time in this process, not through the nodes above:
    the same learner and rules the reflex node runs, at a length a demo can afford.
    """
    from gamma_net_studies import reflex_study

    print(f"[demo] reflex at the obstacle: 3 conditions x {seconds:g} s simulated, seed {seed} ...", flush=True)
    parser = argparse.ArgumentParser()
    reflex_study.add_arguments(parser)
    study = parser.parse_args(
        ["--seeds", "1", "--first-seed", str(seed), "--seconds", str(seconds), "--warmup-circuits", "10"]
        + ["--out", str(folder)]
    )
    result = reflex_study.run(study).data
    contact = {c: result[c]["contact_s"][0] for c in reflex_study.CONDITIONS}
    circuits = {c: result[c]["circuits"][0] for c in reflex_study.CONDITIONS}
    return (
        f"[demo] reflex at an obstacle (simulated arm, seed {seed}, {seconds:g} s each; one seed, not the study): "
        f"contact time none {contact['none']:.2f} s, reactive {contact['reactive']:.2f} s, "
        f"predictive {contact['predictive']:.2f} s; circuits {circuits['none']:.2f} / "
        f"{circuits['reactive']:.2f} / {circuits['predictive']:.2f}"
    )


class _Recorder:
    """Records the joint stream and the predictions, in this process (a real subscriber)."""

    def __init__(self, joints: JointsConfig) -> None:
        from gamma_net_msgs.msg import Prediction
        from rclpy.node import Node
        from rclpy.qos import qos_profile_sensor_data
        from sensor_msgs.msg import JointState

        self.node = Node("demo_recorder")
        self.selector = JointSelector(joints)
        self.readings: list[tuple[float, float]] = []  # (stamp, cumulant)
        self.predictions: dict[float, np.ndarray] = {}
        self.latest = None
        self.gammas = None
        self.node.create_subscription(JointState, "joint_states", self.on_joint_state, qos_profile_sensor_data)
        self.node.create_subscription(Prediction, "predictions", self.on_prediction, 100)

    def on_joint_state(self, msg) -> None:
        sample = self.selector.select(
            stamp=stamp_seconds(msg.header.stamp.sec, msg.header.stamp.nanosec),
            names=msg.name,
            position=msg.position,
            velocity=msg.velocity,
            effort=msg.effort,
        )
        if hasattr(sample, "cumulant"):
            self.readings.append((sample.stamp, sample.cumulant))

    def on_prediction(self, msg) -> None:
        self.gammas = np.asarray(msg.gammas)
        self.latest = msg
        self.predictions[round(stamp_seconds(msg.header.stamp.sec, msg.header.stamp.nanosec), 6)] = np.asarray(
            msg.values
        )

    def destroy_node(self) -> None:
        self.node.destroy_node()


def _live(recorder: _Recorder, nodes: dict[str, NodeProcess], seconds: float, horde: HordeDemo) -> None:
    """Spin until ``seconds`` have passed since the predictor began to learn live.

    Counted from the first prediction made after two live updates (its update count two above
    the first prediction's), not from the start of the nodes: on a loaded machine, or with an empty numba
    cache, the predictor takes a minute to start and its first updates compile for tens of
    seconds more; a clock counted from the start ended the run with almost nothing to score.

    Raises:
      TimeoutError: the predictor did not learn within ``FIRST_PREDICTION_TIMEOUT`` s (one line
        saying what was too slow).
    """
    import rclpy

    started = time.monotonic()
    first_count = live_from = None
    next_line = started + 2.0
    while live_from is None or time.monotonic() - live_from < seconds:
        rclpy.spin_once(recorder.node, timeout_sec=0.05)
        if live_from is None and recorder.latest is not None:
            if first_count is None:
                first_count = recorder.latest.update_count
            elif recorder.latest.update_count >= first_count + 2:  # past the first two updates, which compile
                live_from = time.monotonic()
                if live_from - started > 10.0:
                    print(f"[demo] the predictor learns live {live_from - started:.0f} s after the start", flush=True)
        if live_from is None and time.monotonic() - started > FIRST_PREDICTION_TIMEOUT:
            stage = "made no prediction" if first_count is None else "made no update after its first prediction"
            raise TimeoutError(
                f"the predictor {stage} within {FIRST_PREDICTION_TIMEOUT:g} s of starting the nodes "
                f"({len(recorder.readings)} joint readings came): it was too slow to start on this machine; "
                f"see {nodes['predictor'].log_path}"
            )
        dead = [name for name, node in nodes.items() if not node.running]
        if dead:
            logs = "\n".join(f"--- {n}:\n{nodes[n].log_path.read_text()[-2000:]}" for n in dead)
            raise RuntimeError(f"node(s) {dead} exited during the demo\n{logs}")
        horde.check()
        if time.monotonic() >= next_line:
            next_line += 2.0
            print(_live_line(recorder, time.monotonic() - started), flush=True)
            print(horde.line(time.monotonic() - started), flush=True)


def _live_line(recorder: _Recorder, elapsed: float) -> str:
    msg = recorder.latest
    if msg is None:
        return f"[demo] t={elapsed:5.1f} s  waiting for predictions ({len(recorder.readings)} joint readings so far)"
    speed = recorder.readings[-1][1] if recorder.readings else math.nan
    parts = []
    for gamma, value in zip(msg.gammas, msg.values):
        tau = 1.0 / (1.0 - gamma)
        if any(abs(tau - t) < 1e-6 for t in SHOWN_TAUS):
            parts.append(f"τ={tau:<4.0f}{value * (1 - gamma):6.3f}")
    return (
        f"[demo] t={elapsed:5.1f} s  updates {msg.update_count:6d}  shoulder speed {speed:5.3f} rad/s"
        f"  | (1-γ)·prediction  " + "  ".join(parts)
    )


def _evaluate(recorder: _Recorder, out: pathlib.Path, pretrain: dict, args) -> Report:
    stamps = np.array([s for s, _ in recorder.readings])
    cumulants = np.array([c for _, c in recorder.readings])
    if recorder.gammas is None or stamps.size < 100:
        raise TimeoutError(
            f"too little came through in --seconds {args.seconds:g}: {stamps.size} joint readings, "
            f"{len(recorder.predictions)} predictions; the machine was too slow (run longer with --seconds)"
        )
    gammas = recorder.gammas
    # The return from reading t: C_{t+1} + gamma C_{t+2} + ..., C_{t+1} the speed at reading t+1.
    # Near the end the future is unknown: the last 5 tau_max steps are left out of the errors.
    returns = discounted_returns(cumulants[1:], gammas)
    horizon = 5 * round(1.0 / (1.0 - gammas.max()))
    evaluated = np.arange(max(0, returns.shape[0] - horizon))
    matched = [i for i in evaluated if round(stamps[i], 6) in recorder.predictions]
    if len(matched) < 30:
        raise TimeoutError(
            f"only {len(matched)} predictions matched readings in --seconds {args.seconds:g}: the predictor kept "
            "up with too few of them on this machine (run longer with --seconds)"
        )
    predicted = np.stack([recorder.predictions[round(stamps[i], 6)] for i in matched])
    true = returns[matched]
    gaps = int(np.sum(np.diff(stamps) > 1.5 / 30.0))
    error = cumulative_absolute_error(predicted, true)
    table = Table(
        "live predictions against the true return (cumulative absolute error, the paper's Table 2 measure)",
        ["tau (steps)", "gamma", "tau (s)", "cum. abs. error", "sum |return|", "relative error"],
    )
    for k, gamma in enumerate(gammas):
        tau = 1.0 / (1.0 - gamma)
        table.add(
            round(tau, 3),
            float(gamma),
            tau / 30.0,
            float(error[k]),
            float(np.abs(true[:, k]).sum()),
            float(error[k] / np.abs(true[:, k]).sum()),
        )
    run = Table("the run", ["quantity", "value"])
    run.add("live seconds", args.seconds)
    run.add("joint readings recorded", int(stamps.size))
    run.add("gaps in the readings (> 1.5 periods)", gaps)
    run.add("predictions received", len(recorder.predictions))
    run.add("states evaluated", len(matched))
    run.add("updates at the end", int(recorder.latest.update_count))
    if pretrain:
        run.add("offline updates before the live run", pretrain["updates"])
    figure_gammas = [k for k, g in enumerate(gammas) if 1 / (1 - g) >= 10]
    window = slice(max(0, len(matched) - 900), len(matched))  # the last 30 s evaluated
    figure = plot_predictions(
        (stamps[matched][window] - stamps[0]),
        true[window][:, figure_gammas],
        {"Γ-net (predictor node)": predicted[window][:, figure_gammas]},
        gammas[figure_gammas],
        out / FIGURE_NAME,
        title="make demo: shoulder speed, live predictions against the return",
        xlabel="time (s)",
    )
    data = {
        "pretrain": pretrain,
        "gammas": gammas,
        "cumulative_absolute_error": error,
        "sum_abs_return": np.abs(true).sum(0),
    }
    return Report(tables=[run, table], data=data, files=[str(figure)])
