"""`gamma-net arm simulate`: the simulated operator drives the arm around the maze; a rosbag2 of JointState.

The stand-in for the paper's robot-arm data (50 circuits in about 12 minutes at 30 Hz): writes
``OUT/joint_states`` (a rosbag2 that plays with ``ros2 bag play``) and ``OUT/arm_recording.png``
(the tool's path over the maze, and the joint signals), and prints the recording's statistics.
"""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np

from gamma_net_core.cli import check, check_range, input_path, output_dir
from gamma_net_core.config import load_config
from gamma_net_core.report import Report, Table
from gamma_net_core.signals.arm import ArmConfig, ArmKinematics, JoystickConfig
from gamma_net_core.signals.maze import MazeConfig, MazePath
from gamma_net_core.signals.operator import OperatorConfig

#: The section of config/arm.yaml this command reads (the scripted-operator node's).
NODE = "operator"
BAG_NAME = "joint_states"
FIGURE_NAME = "arm_recording.png"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--circuits", type=int, default=50, help="circuits of the maze to record (paper: 50)")
    parser.add_argument("--out", required=True, help="folder for the bag and the figure")
    parser.add_argument("--storage", choices=("mcap", "sqlite3"), default="mcap", help="rosbag2 storage")
    parser.add_argument("--seed", type=int, default=0, help="the operator's seed: the same seed, the same recording")
    parser.add_argument("--rate-hz", type=float, default=30.0, help="samples per second (paper: 30)")
    parser.add_argument(
        "--config",
        default=None,
        help="parameter file (its 'operator' section, '/**' included); default: the built-in defaults, "
        "which are config/arm.yaml's",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def load_settings(path: str | None) -> dict:
    """ArmConfig, MazeConfig, JoystickConfig and OperatorConfig from ``path``'s operator section (or defaults)."""
    classes = {"arm": ArmConfig, "maze": MazeConfig, "joystick": JoystickConfig, "operator": OperatorConfig}
    if path is None:
        return {name: cls() for name, cls in classes.items()}
    return {name: load_config(cls, path, NODE, name) for name, cls in classes.items()}


def run(args: argparse.Namespace) -> Report:
    from tqdm import tqdm

    from gamma_net_core.data.bags import write_recording
    from gamma_net_core.signals.arm_recording import simulate_arm

    check_range("--circuits", args.circuits, low=1)
    check_range("--seed", args.seed, low=0)
    check_range("--rate-hz", args.rate_hz, above=0.0)
    input_path("--config", args.config, kind="file")
    out = output_dir("--out", args.out)
    bag = out / BAG_NAME
    check(not bag.exists(), f"{bag} exists already; choose another --out or remove it")
    check(not (out / FIGURE_NAME).is_dir(), f"{out / FIGURE_NAME} is a folder; choose another --out")
    settings = load_settings(args.config)
    out.mkdir(parents=True, exist_ok=True)
    with tqdm(total=args.circuits, desc="circuits", unit="circuit", file=sys.stderr, disable=args.no_progress) as bar:
        recording = simulate_arm(
            circuits=args.circuits,
            rng=np.random.default_rng(args.seed),
            rate_hz=args.rate_hz,
            on_circuit=lambda done: bar.update(done - bar.n),
            **settings,
        )
    write_recording(bag, recording, storage=args.storage)
    figure = out / FIGURE_NAME
    plot_recording(figure, recording, settings)
    return _report(recording, args, bag, figure)


def _report(recording, args: argparse.Namespace, bag: pathlib.Path, figure: pathlib.Path) -> Report:
    times = recording.circuit_times
    summary = Table("recording", ["quantity", "value"], formats={"value": "{:.4g}"})
    summary.add("steps", recording.steps)
    summary.add("circuits", len(times))
    summary.add("duration (s)", recording.duration)
    summary.add("rate (Hz)", recording.rate_hz)
    summary.add("circuit time mean (s)", float(times.mean()))
    summary.add("circuit time std (s)", float(times.std()))
    summary.add("circuit time min (s)", float(times.min()))
    summary.add("circuit time max (s)", float(times.max()))
    joints = Table(
        "joints",
        [
            "joint",
            "position min (rad)",
            "position max (rad)",
            "velocity min (rad/s)",
            "velocity max (rad/s)",
            "mean speed (rad/s)",
            "max |effort| (N m)",
        ],
    )
    for j, name in enumerate(recording.joint_names):
        joints.add(
            name,
            float(recording.position[:, j].min()),
            float(recording.position[:, j].max()),
            float(recording.velocity[:, j].min()),
            float(recording.velocity[:, j].max()),
            float(np.abs(recording.velocity[:, j]).mean()),
            float(np.abs(recording.effort[:, j]).max()),
        )
    data = {
        "seed": args.seed,
        "storage": args.storage,
        "bag": str(bag),
        "steps": recording.steps,
        "duration_s": recording.duration,
        "circuit_times_s": times.round(4).tolist(),
    }
    return Report(tables=[summary, joints], data=data, files=[str(bag), str(figure)])


def plot_recording(path: pathlib.Path, recording, settings: dict, *, window_s: float = 60.0) -> None:
    """The tool's path over the maze, and the first ``window_s`` seconds of the joint signals."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    maze = MazePath.from_config(settings["maze"])
    kinematics = ArmKinematics.from_config(settings["arm"])
    fig = plt.figure(figsize=(13, 6), layout="constrained")
    grid = fig.add_gridspec(2, 2, width_ratios=[1, 1.6])
    ax = fig.add_subplot(grid[:, 0])
    wire = np.vstack([maze.points, maze.points[:1]])
    ax.plot(wire[:, 0], wire[:, 1], color="0.6", lw=6, solid_capstyle="round", label="wire maze")
    ax.plot(recording.tool[:, 0], recording.tool[:, 1], lw=0.4, color="C0", label="tool path")
    start = recording.position[0]
    elbow, tool = kinematics.elbow_point(start), kinematics.forward(start)
    ax.plot([0, elbow[0], tool[0]], [0, elbow[1], tool[1]], "-o", color="k", lw=2, label="arm at the start")
    s_arrow = 0.15 * maze.length
    tail, head = maze.point_at(s_arrow), maze.point_at(s_arrow + 0.03)
    ax.annotate("", head, tail, arrowprops={"arrowstyle": "-|>", "color": "C3", "lw": 2})
    ax.set_aspect("equal")
    ax.set_xlabel("x (m)")
    ax.set_ylabel("y (m)")
    ax.set_title(f"{len(recording.circuit_steps)} circuits, counter-clockwise")
    ax.legend(loc="lower left", fontsize=8)
    t = recording.stamps - recording.stamps[0]
    shown = t <= window_s
    ax_pos = fig.add_subplot(grid[0, 1])
    ax_vel = fig.add_subplot(grid[1, 1], sharex=ax_pos)
    for j, name in enumerate(recording.joint_names):
        ax_pos.plot(t[shown], recording.position[shown, j], lw=1, label=name)
        ax_vel.plot(t[shown], recording.velocity[shown, j], lw=0.8, label=f"{name} velocity")
    ax_vel.plot(
        t[shown],
        np.abs(recording.velocity[shown, 0]),
        lw=1.2,
        color="k",
        alpha=0.7,
        label=f"{recording.joint_names[0]} speed (the cumulant)",
    )
    for step in recording.circuit_steps:
        if t[step] <= window_s:
            ax_pos.axvline(t[step], color="0.8", lw=0.8, zorder=0)
    ax_pos.set_ylabel("position (rad)")
    ax_pos.legend(loc="upper right", fontsize=8)
    ax_pos.set_title(f"joint signals, first {window_s:g} s (grey lines: circuits completed)")
    ax_vel.set_ylabel("velocity (rad/s)")
    ax_vel.set_xlabel("time (s)")
    ax_vel.legend(loc="upper right", fontsize=8)
    fig.savefig(path, dpi=110)
    plt.close(fig)
