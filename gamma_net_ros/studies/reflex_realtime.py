"""`gamma-net reflex realtime-study`: the reflex study through the real processes, in real time.

Each run is ``ros2 launch gamma_net_ros reflex.launch.py`` (servo emulator with the obstacle,
``dynamixel_driver``, teleop, the overshooting operator, the Horde and the reflex) with the
run's operator seed, obstacle and rules file, for ``--seconds`` of wall time. Three conditions,
each a rules file the study writes (``OUT/rules/``):

- ``none``: the predictive rule as an event-only rule (``response: {event: true}``, fail-safe
  ``pass``): the reflex is in the path but never changes a command; its on time says how often
  the predictive rule would have acted;
- ``reactive``: the rule on the present signal (``source: signal``: the joint's |effort| now);
- ``predictive``: the rule on the Horde's prediction ((1 - gamma) V at its tau).

The Horde learns from scratch (in memory) or, with ``--pretrained CHECKPOINT``, starts each run
from a copy of that checkpoint (the questions file is the study's own, ``OUT/questions.yaml``:
config/horde.yaml plus ``elbow_effort``, which the elbow's rule needs; a checkpoint must be of
those questions).

Measured per run, over the window from the Horde's first prediction to ``--seconds`` later:
contact time, contacts and peak current from the emulator's own obstacle counters (its control
socket); the fraction of the time the run's rule was on (from ``reflex/events``); progress in
circuits along the wire, from ``joint_states`` as the simulated study measures it (the tool's
position projected on the wire, :class:`ProgressTracker`). One JSON per run in ``OUT/runs/``; a
run whose JSON exists is skipped, so an interrupted study resumes. At the end: the tables and the
predictive/reactive ratio with a bootstrap interval (:mod:`gamma_net_core.experiments.reflex_realtime_stats`)
and a figure.

The runs use the environment's ``ROS_DOMAIN_ID``: on a shared machine give the study a domain
of its own, or another user's ``joint_states`` would be counted.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import yaml

from gamma_net_core.cli import check, check_range, output_dir
from gamma_net_core.config import load_config
from gamma_net_core.experiments.reflex_realtime_stats import CONDITIONS, plot_summary, summarize, time_on
from gamma_net_core.horde.questions import load_questions
from gamma_net_core.paths import config_file
from gamma_net_core.reflex.rules import load_rules
from gamma_net_core.report import Report, write_json
from gamma_net_core.signals.arm import ArmConfig, ArmKinematics
from gamma_net_core.signals.maze import MazeConfig, MazePath, ProgressTracker

#: Each obstacle: the servo whose range holds it (rad), the joint the operator overshoots toward
#: it, and the rule adapted to it (its question, joint and direction).
OBSTACLES = {
    # The launch's default: 0.05 rad past the shoulder's reach on the route (-0.27 rad at most).
    "shoulder": {"servo": 1, "low": -0.2, "high": 0.5, "joint": 0, "direction": 1, "question": "shoulder_effort"},
    # Just past the elbow's reach on the route (2.16 rad at most).
    "elbow": {"servo": 2, "low": 2.27, "high": 2.9, "joint": 1, "direction": 1, "question": "elbow_effort"},
    # The other way: below the shoulder's lowest on the route (-1.25 rad), the rule's direction negative.
    "shoulder_low": {
        "servo": 1,
        "low": -1.55,
        "high": -1.3,
        "joint": 0,
        "direction": -1,
        "question": "shoulder_effort",
    },
}
JOINTS = ("shoulder", "elbow")
ELBOW_EFFORT = {
    "name": "elbow_effort",
    "cumulant": {
        "topic": "/joint_states",
        "type": "sensor_msgs/msg/JointState",
        "field": "effort[elbow]",
        "transform": "abs",
    },
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=10, help="runs per condition and obstacle (operator seeds)")
    parser.add_argument("--first-seed", type=int, default=0, help="operator seeds first-seed, first-seed + 1, ...")
    parser.add_argument("--seconds", type=float, default=90.0, help="wall seconds a run, from the first prediction")
    parser.add_argument(
        "--obstacles", default="shoulder,elbow,shoulder_low", help=f"comma-separated, of {', '.join(OBSTACLES)}"
    )
    parser.add_argument(
        "--conditions", default=",".join(CONDITIONS), help="comma-separated, of none,reactive,predictive"
    )
    parser.add_argument(
        "--pretrained", default=None, help="the Horde's checkpoint each run starts from (default: none)"
    )
    parser.add_argument(
        "--start-timeout", type=float, default=120.0, help="s for a launch to give its first prediction"
    )
    parser.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples of the ratio")
    parser.add_argument("--out", required=True, help="folder for the runs' JSON, rules, logs, tables and figure")


def _names(text: str, known, flag: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    check(bool(names) and not unknown, f"{flag} must name some of {', '.join(known)}; got {text!r}")
    return names


def run(args: argparse.Namespace) -> Report:
    check_range("--runs", args.runs, low=1)
    check_range("--first-seed", args.first_seed, low=0)
    check_range("--seconds", args.seconds, above=0.0)
    check_range("--start-timeout", args.start_timeout, above=0.0)
    check_range("--resamples", args.resamples, low=100)
    obstacles = _names(args.obstacles, OBSTACLES, "--obstacles")
    conditions = _names(args.conditions, CONDITIONS, "--conditions")
    pretrained = None
    if args.pretrained:
        pretrained = pathlib.Path(args.pretrained).expanduser().resolve()
        check(pretrained.is_file(), f"--pretrained {args.pretrained}: no such checkpoint file")
    out = output_dir("--out", args.out)
    for sub in ("runs", "rules", "logs"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    questions = _write_questions(out / "questions.yaml")
    rules = {
        (o, c): _write_rules(out / "rules" / f"{o}-{c}.yaml", o, c, questions) for o in obstacles for c in conditions
    }
    runs = []
    with _Watcher() as watcher:
        for obstacle in obstacles:
            for seed in range(args.first_seed, args.first_seed + args.runs):
                for condition in conditions:
                    path = out / "runs" / f"{obstacle}-{condition}-seed{seed}.json"
                    if path.exists():  # resumable: a run done is not run again
                        runs.append(json.loads(path.read_text()))
                        continue
                    print(f"[realtime-study] {obstacle} {condition} seed {seed}: {args.seconds:g} s", flush=True)
                    result = run_once(
                        watcher,
                        obstacle=obstacle,
                        condition=condition,
                        seed=seed,
                        seconds=args.seconds,
                        rules_file=rules[(obstacle, condition)],
                        questions_file=questions,
                        pretrained=pretrained,
                        log=out / "logs" / f"{obstacle}-{condition}-seed{seed}.log",
                        start_timeout=args.start_timeout,
                    )
                    write_json(path, result)
                    runs.append(result)
    report = summarize(runs, seconds=args.seconds, pretrained=pretrained is not None, resamples=args.resamples)
    figure = plot_summary(out / "reflex_realtime.png", runs)
    report.files += [str(figure), str(out / "runs")]
    report.data["runs"] = len(runs)
    return report


def _write_questions(path: pathlib.Path) -> pathlib.Path:
    doc = yaml.safe_load(config_file("horde").read_text())
    if not any(q["name"] == ELBOW_EFFORT["name"] for q in doc["questions"]):
        doc["questions"].append(copy.deepcopy(ELBOW_EFFORT))
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _write_rules(path: pathlib.Path, obstacle: str, condition: str, questions: pathlib.Path) -> pathlib.Path:
    """The shipped rule (config/reflex_rules.yaml's first), on the obstacle's joint, as ``condition`` has it."""
    doc = yaml.safe_load(config_file("reflex_rules").read_text())
    place = OBSTACLES[obstacle]
    rule = dict(doc["rules"][0])
    rule["question"] = place["question"]
    joint = JOINTS[place["joint"]]
    rule["response"] = {
        **rule["response"],
        "joints": [joint],
        "direction": "positive" if place["direction"] > 0 else "negative",
    }
    rule["name"] = f"{joint}_stall_ahead" if condition != "reactive" else f"{joint}_stall"
    if condition == "reactive":
        rule["source"] = "signal"
        rule.pop("tau", None)
    elif condition == "none":
        # In the path, never acting: what the predictive rule would do, reported, not done.
        rule["response"] = {"event": True}
        rule["fail_safe"] = "pass"
    top = {"stale_after_s": doc["stale_after_s"], "fail_safe": doc["fail_safe"], "rules": [rule]}
    text = yaml.safe_dump(top, sort_keys=False)
    path.write_text(f"# gamma-net reflex realtime-study: the {obstacle} obstacle, condition {condition}\n{text}")
    load_rules(path, questions=load_questions(questions), joint_names=JOINTS)  # refused here, not in a launch
    return path


class _Watcher:
    """One rclpy node for the whole study: the reflex's events, joint_states (progress), the first prediction."""

    def __enter__(self) -> _Watcher:
        import rclpy
        from gamma_net_msgs.msg import PredictionArray, ReflexEvent
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import qos_profile_sensor_data
        from sensor_msgs.msg import JointState

        arm = load_config(ArmConfig, config_file("arm"), "/**", "arm")
        self.kinematics = ArmKinematics.from_config(arm)
        self.maze = MazePath.from_config(load_config(MazeConfig, config_file("arm"), "/**", "maze"))
        self.lock = threading.Lock()
        self.reset()
        rclpy.init()
        self.node = rclpy.create_node("reflex_realtime_study")
        self.node.create_subscription(ReflexEvent, "reflex/events", self._event, 100)
        self.node.create_subscription(JointState, "joint_states", self._state, qos_profile_sensor_data)
        self.node.create_subscription(PredictionArray, "horde/predictions", self._prediction, qos_profile_sensor_data)
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self.executor.spin, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        import rclpy

        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown()
        self.thread.join(timeout=5.0)

    def reset(self) -> None:
        """Forget the last run (called before each launch)."""
        with getattr(self, "lock", threading.Lock()):
            self.switches: list[tuple[str, float, bool]] = []
            self.first_prediction: float | None = None
            self.tracker: ProgressTracker | None = None
            self.tracking = False
            self.states = 0

    def _event(self, msg) -> None:
        with self.lock:
            self.switches.append((msg.rule, time.monotonic(), bool(msg.active)))

    def _prediction(self, msg) -> None:
        with self.lock:
            if self.first_prediction is None:
                self.first_prediction = time.monotonic()

    def _state(self, msg) -> None:
        positions = dict(zip(msg.name, msg.position))
        if not all(j in positions and math.isfinite(positions[j]) for j in JOINTS):
            return
        tool = self.kinematics.forward([positions[j] for j in JOINTS])
        with self.lock:
            if not self.tracking:
                return
            if self.tracker is None:
                self.tracker = ProgressTracker(self.maze, tool)
            self.tracker.update(tool)
            self.states += 1

    def start_window(self) -> None:
        with self.lock:
            self.tracking, self.tracker = True, None

    def stop_window(self) -> tuple[float, int, list[tuple[str, float, bool]]]:
        """Progress (circuits), joint_states seen, and the rule switches so far."""
        with self.lock:
            self.tracking = False
            tracker = self.tracker
            progress = 0.0 if tracker is None else (tracker.progress - tracker.start) / self.maze.length
            return progress, self.states, list(self.switches)


def run_once(
    watcher: _Watcher,
    *,
    obstacle: str,
    condition: str,
    seed: int,
    seconds: float,
    rules_file: pathlib.Path,
    questions_file: pathlib.Path,
    pretrained: pathlib.Path | None,
    log: pathlib.Path,
    start_timeout: float,
) -> dict:
    """One launch for ``seconds`` from its first prediction; its results (the module docstring's)."""
    from gamma_net_ros.hardware.emulator.client import EmulatorClient

    place = OBSTACLES[obstacle]
    folder = pathlib.Path(tempfile.mkdtemp(prefix="gnrt-"))  # short: a Unix socket path has ~100 characters
    port = folder / "ttyDXL"
    checkpoint = ""
    if pretrained is not None:
        checkpoint = str(shutil.copyfile(pretrained, folder / pretrained.name))  # a copy: the Horde saves into it
    arguments = {
        "port": port,
        "operator_seed": seed,
        "overshoot_joint": place["joint"],
        "overshoot_direction": place["direction"],
        "obstacle_servo": place["servo"],
        "obstacle_low": place["low"],
        "obstacle_high": place["high"],
        "rules_file": rules_file,
        "questions_file": questions_file,
        "checkpoint_path": checkpoint,
    }
    # An empty value is not a launch argument: '' (from scratch) is the launch's default.
    given = [f"{k}:={v}" for k, v in arguments.items() if v != ""]
    command = ["ros2", "launch", "gamma_net_ros", "reflex.launch.py", *given]
    watcher.reset()
    with open(log, "w") as log_file:
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            client = EmulatorClient(f"{port}.ctl")
            deadline = time.monotonic() + start_timeout
            while watcher.first_prediction is None:
                if process.poll() is not None:
                    raise ChildProcessError(
                        f"the launch ended (exit {process.returncode}) before a prediction: see {log}"
                    )
                if time.monotonic() > deadline:
                    raise ChildProcessError(f"no prediction within {start_timeout:g} s of the launch: see {log}")
                time.sleep(0.05)
            before = client.state()["servos"][place["servo"]]["obstacle"]
            watcher.start_window()
            start = time.monotonic()
            while time.monotonic() - start < seconds:
                if process.poll() is not None:
                    raise ChildProcessError(f"the launch ended (exit {process.returncode}) during the run: see {log}")
                time.sleep(0.1)
            after = client.state()["servos"][place["servo"]]["obstacle"]
            end = time.monotonic()
            progress, states, switches = watcher.stop_window()
        finally:
            exit_code = _stop(process)
            shutil.rmtree(folder, ignore_errors=True)
    rules = sorted({rule for rule, _, _ in switches}) or [yaml.safe_load(rules_file.read_text())["rules"][0]["name"]]
    on_fraction = {}
    for rule in rules:
        mine = [(t, on) for r, t, on in switches if r == rule]
        on_at_start = ([on for t, on in mine if t <= start][-1:] or [False])[0]
        on_fraction[rule] = time_on([(t, on) for t, on in mine if t > start], start, end, on_at_start=on_at_start)
    return {
        "obstacle": obstacle,
        "condition": condition,
        "seed": seed,
        "seconds": round(end - start, 3),
        "pretrained": str(pretrained) if pretrained else None,
        "contact_s": after["contact_s"] - before["contact_s"],
        "contacts": after["contacts"] - before["contacts"],
        "peak_current_a": after["peak_current"],
        "progress_circuits": progress,
        "rule_on_fraction": on_fraction,
        "rule_switches": sum(1 for _, t, _ in switches if start < t <= end),
        "joint_states": states,
        "launch_exit": exit_code,
        "arguments": {k: str(v) for k, v in arguments.items() if k not in ("port", "checkpoint_path")},
        "log": str(log),
    }


def _stop(process: subprocess.Popen, timeout: float = 30.0) -> int | None:
    """Ctrl-C to the launch's group, as a user stops it; killed if it does not end in ``timeout`` s."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
    try:
        return process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
        return None
