"""`gamma-net reflex study`: acting on a learned prediction against acting on the present signal.

The arm meets an obstacle just past the shoulder's reach on the route (the hard stop of
:mod:`gamma_net_core.signals.obstacle`, the same model the servo emulator runs); the operator
now and then overshoots a turn into it. Three conditions on the same seeds, each run for the
same simulated time:

- ``none``: no reflex;
- ``reactive``: the first rule of ``config/reflex_rules.yaml`` on the present signal (``source:
  signal``: its question's cumulant now, shoulder_contact: 1 while the effort is above 0.06 N m);
- ``predictive``: that rule alone, on the Horde's learned prediction ((1 - gamma) V at its tau),
  the Horde (``config/reflex_questions.yaml``'s questions) warmed up on a recording with the obstacle (as
  ``make demo`` pretrains) and learning online during the run. The shipped file's floor (its
  second rule, the reactive one) is left out here, so the prediction is measured on its own; the
  real-time study (`gamma-net reflex realtime-study`) runs the two together, as shipped.

Reported per condition (mean and spread over seeds): contact time, contacts, peak current (the
stall torque through the XM430-W350's torque constant) and circuits completed. The figure shows
the first contact the ``none`` run of the first seed meets, under each condition: the shoulder's
position, its effort, the prediction, and the commanded velocity.

The loop is the core parts the nodes wrap (operator, arm and obstacle, Horde learner, reflex
rules) stepped at the Horde's rate in simulated time, not ROS processes: the same seeds give the
same numbers, and many seeds fit in minutes. The node path (emulator, driver, teleop, Horde,
reflex) is what ``launch/reflex.launch.py`` starts and ``tests/test_reflex_node.py`` checks.
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
from types import SimpleNamespace

import numpy as np

from gamma_net_core.cli import check, check_range, output_dir
from gamma_net_core.config import load_config
from gamma_net_core.horde.learner import HordeLearner
from gamma_net_core.horde.questions import HordeSpec, load_questions
from gamma_net_core.paths import config_file
from gamma_net_core.reflex.evaluation import ReflexState
from gamma_net_core.reflex.rules import Rule, RuleSet, load_rules
from gamma_net_core.report import Report, Table
from gamma_net_core.signals.arm import (
    ArmConfig,
    ArmKinematics,
    JoystickConfig,
    SimulatedArm,
    joystick_to_joint_velocity,
)
from gamma_net_core.signals.arm_recording import simulate_arm
from gamma_net_core.signals.maze import MazeConfig, MazePath, ProgressTracker
from gamma_net_core.signals.obstacle import Obstacle
from gamma_net_core.signals.operator import Operator, OperatorConfig

CONDITIONS = ("none", "reactive", "predictive")
FIGURE_NAME = "reflex_study.png"
WARM_NAME = "warm_horde.npz"  # the Horde after the warm-up recording: where every predictive run starts
#: N m per A of the XM430-W350 (4.1 N m at 2.3 A): effort back to Present Current, as the driver reads it.
TORQUE_CONSTANT = 4.1 / 2.3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seeds", type=int, default=5, help="operator seeds, the same for every condition")
    parser.add_argument("--first-seed", type=int, default=0, help="seeds are first-seed, first-seed + 1, ...")
    parser.add_argument("--seconds", type=float, default=120.0, help="simulated seconds per run")
    parser.add_argument(
        "--warmup-circuits", type=int, default=20, help="circuits of the recording the Horde learns first"
    )
    parser.add_argument("--obstacle-low", type=float, default=-0.2, help="shoulder obstacle from, rad")
    parser.add_argument("--obstacle-high", type=float, default=0.5, help="shoulder obstacle to, rad")
    parser.add_argument("--rules", default=None, help="rules YAML (default config/reflex_rules.yaml); its first rule")
    parser.add_argument("--questions", default=None, help="questions YAML (default config/reflex_questions.yaml)")
    parser.add_argument("--out", required=True, help="folder for the figure")


def run(args: argparse.Namespace) -> Report:
    check_range("--seeds", args.seeds, low=1)
    check_range("--first-seed", args.first_seed, low=0)
    check_range("--seconds", args.seconds, above=0.0)
    check_range("--warmup-circuits", args.warmup_circuits, low=0)
    check(args.obstacle_low < args.obstacle_high, "--obstacle-low must be below --obstacle-high")
    out = output_dir("--out", args.out)
    spec = load_questions(args.questions or config_file("reflex_questions"))
    arm = load_config(ArmConfig, config_file("arm"), "/**", "arm")
    rule_set = load_rules(args.rules or config_file("reflex_rules"), questions=spec, joint_names=arm.joint_names)
    predictive = rule_set.rules[0]
    check(
        predictive.source == "prediction" and predictive.tau is not None, "the first rule must be a prediction at a tau"
    )
    out.mkdir(parents=True, exist_ok=True)
    settings = _settings(arm)
    obstacle = Obstacle(args.obstacle_low, args.obstacle_high)
    warm = _warm_learner(spec, settings, obstacle, circuits=args.warmup_circuits, folder=out)
    rules = {
        "none": None,
        "reactive": RuleSet((dataclasses.replace(predictive, source="signal", tau=None),), rule_set.stale_after_s),
        "predictive": RuleSet((predictive,), rule_set.stale_after_s),
    }
    results = {c: [] for c in CONDITIONS}
    traces = {}
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for condition in CONDITIONS:
            learner = warm.copy() if condition == "predictive" else None
            result, trace = run_condition(
                settings, obstacle, rules[condition], learner, spec, seed=seed, seconds=args.seconds
            )
            results[condition].append(result)
            if seed == args.first_seed:
                traces[condition] = trace
    figure = out / FIGURE_NAME
    plot_contact(figure, traces, predictive, seed=args.first_seed)
    return _report(results, args, figure)


def study_settings(arm: ArmConfig, **overshoot) -> dict:
    """The arm, maze, joystick and the overshooting operator (config/reflex.yaml's, changed by ``overshoot``).

    Args:
      overshoot: operator fields to set, e.g. ``overshoot_joint=1``.
    """
    settings = _settings(arm)
    settings["operator"] = dataclasses.replace(settings["operator"], **overshoot)
    return settings


def _settings(arm: ArmConfig) -> dict:
    arm_yaml = config_file("arm")
    operator = load_config(OperatorConfig, arm_yaml, "operator", "operator")
    overshoots = load_config(OperatorConfig, config_file("reflex"), "operator", "operator")
    fields = ("overshoot_probability", "overshoot_joint", "overshoot_direction", "overshoot_min", "overshoot_max")
    operator = dataclasses.replace(operator, **{f: getattr(overshoots, f) for f in fields})
    return {
        "arm": arm,
        "maze": load_config(MazeConfig, arm_yaml, "/**", "maze"),
        "joystick": load_config(JoystickConfig, arm_yaml, "/**", "joystick"),
        "operator": operator,
    }


class _Warm:
    """A learner warmed up once, copied for each run (through its own save format: no pickle)."""

    def __init__(self, learner: HordeLearner, folder: pathlib.Path) -> None:
        self.path = learner.save(folder / WARM_NAME)

    def copy(self) -> HordeLearner:
        return HordeLearner.load(self.path)


def _message(names, position, velocity, effort) -> SimpleNamespace:
    """What the driver publishes, as a plain object the questions' field paths resolve in."""
    return SimpleNamespace(name=list(names), position=list(position), velocity=list(velocity), effort=list(effort))


def _signals(spec: HordeSpec, msg) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    inputs = np.array([s.path.resolve(msg) for s in spec.state])
    cumulants = np.array([q.cumulant.apply(q.cumulant.path.resolve(msg)) for q in spec.questions])
    continuations = np.array(
        [
            1.0 if q.termination is None else q.termination.continuation(q.termination.path.resolve(msg))
            for q in spec.questions
        ]
    )
    return inputs, cumulants, continuations


def _warm_learner(spec: HordeSpec, settings: dict, obstacle: Obstacle, *, circuits: int, folder: pathlib.Path):
    return _Warm(warm_up(spec, settings, {0: obstacle}, circuits=circuits), folder)


def warm_up(
    spec: HordeSpec, settings: dict, obstacles: dict[int, Obstacle], *, circuits: int, seed: int = 10_000
) -> HordeLearner:
    """A Horde learner of ``spec`` after ``circuits`` circuits of a simulated recording with ``obstacles``.

    Args:
      settings: the arm, maze, joystick and operator (:func:`study_settings`; its operator says
        which joint overshoots).
      obstacles: joint index -> the obstacle in its range.
      seed: the recording's; another than any run's, as a user records before acting on it.
    """
    learner = HordeLearner.from_spec(spec, rng=np.random.default_rng(spec.seed))
    if circuits > 0:
        recording = simulate_arm(
            circuits=circuits,
            rng=np.random.default_rng(seed),
            obstacles=obstacles,
            rate_hz=spec.rate_hz,
            **settings,
        )
        for t in range(recording.steps):
            msg = _message(recording.joint_names, recording.position[t], recording.velocity[t], recording.effort[t])
            learner.step(*_signals(spec, msg))
    return learner


def run_condition(
    settings: dict,
    obstacle: Obstacle,
    rule_set: RuleSet | None,
    learner: HordeLearner | None,
    spec: HordeSpec,
    *,
    seed: int,
    seconds: float,
    joint: int = 0,
    mark_s: float | None = None,
) -> tuple[dict, dict]:
    """One run: the operator drives for ``seconds`` with the reflex of ``rule_set`` (None: none).

    Every rule of the set is observed, as the reflex node observes them: a prediction rule its
    question's (1 - gamma) V at its tau, a signal rule its question's cumulant now.

    Args:
      learner: learns online through the run; required when a rule is a prediction.
      joint: the joint whose range holds ``obstacle`` (0 the shoulder, 1 the elbow).
      mark_s: also report the contact time up to this moment (``contact_s_at_mark``), e.g. the end of a
        learning time.

    Returns:
      (result, trace): contact time (s), contacts, peak current (A), circuits (fractional);
      and the per-step time series (time, the joint's position, effort, the first prediction rule's
      prediction, command, whether the first rule is on).
    """
    rules = rule_set.rules if rule_set is not None else ()
    if learner is None and any(r.source == "prediction" for r in rules):
        raise ValueError("a prediction rule needs a learner")
    arm_config, joystick = settings["arm"], settings["joystick"]
    maze, arm, operator, tracker = _at_the_start(settings, {joint: obstacle}, seed)
    reflex = ReflexState(rule_set) if rule_set is not None else None
    q_index = [spec.names.index(r.question) for r in rules]
    plotted = next((i for i, r in enumerate(rules) if r.source == "prediction"), None)
    dt = 1.0 / spec.rate_hz
    names = list(arm_config.joint_names)
    mark_step = None if mark_s is None else round(mark_s * spec.rate_hz)
    contact_at_mark = None
    trace = {k: [] for k in ("t", "position", "effort", "prediction", "command", "on")}
    for step in range(round(seconds * spec.rate_hz)):
        now = step * dt
        position, velocity, effort = arm.measure()
        msg = _message(names, position, velocity, effort)
        inputs, cumulants, continuations = _signals(spec, msg)
        if learner is not None:
            learner.step(inputs, cumulants, continuations)
        values = [
            float(learner.predict(inputs, taus=[r.tau])[q, 0] / r.tau)  # (1 - gamma) V
            if r.source == "prediction"
            else float(cumulants[q])
            for r, q in zip(rules, q_index)
        ]
        axes = operator.observe(now, position)
        command = joystick_to_joint_velocity(axes, max_speed=joystick.max_speed, deadzone=joystick.deadzone)
        if reflex is not None:
            for i, value in enumerate(values):
                reflex.observe(i, value, now)
            reflex.decide(now)
            command = reflex.apply(names, command)
        on = bool(reflex is not None and reflex.status[0].on)
        prediction = values[plotted] if plotted is not None else np.nan
        for key, value in zip(trace, (now, position[joint], effort[joint], prediction, command[joint], on)):
            trace[key].append(value if key == "on" else float(value))
        arm.command_velocity(command)
        arm.step(dt)
        tracker.update(arm.tool)
        if step + 1 == mark_step:
            contact_at_mark = arm.contacts[joint].contact_s
    contact = arm.contacts[joint]
    result = {
        "contact_s": contact.contact_s,
        "contacts": contact.contacts,
        "peak_current_a": contact.peak_torque / TORQUE_CONSTANT,
        "circuits": (tracker.progress - tracker.start) / maze.length,  # fractional: progress along the wire
    }
    if mark_s is not None:
        result["contact_s_at_mark"] = contact.contact_s if contact_at_mark is None else contact_at_mark
    return result, {k: np.asarray(v) for k, v in trace.items()}


def _at_the_start(settings: dict, obstacles: dict, seed: int):
    """The maze, the arm at its start with ``obstacles``, the operator (seeded) and the progress tracker."""
    maze = MazePath.from_config(settings["maze"])
    kinematics = ArmKinematics.from_config(settings["arm"])
    arm = SimulatedArm(settings["arm"], position=kinematics.inverse(maze.point_at(0.0)), obstacles=obstacles)
    operator = Operator(
        maze=maze,
        kinematics=kinematics,
        joystick=settings["joystick"],
        config=settings["operator"],
        rng=np.random.default_rng(seed),
    )
    return maze, arm, operator, ProgressTracker(maze, arm.tool)


def _report(results: dict, args: argparse.Namespace, figure: pathlib.Path) -> Report:
    table = Table(
        f"reflex study: seeds {args.first_seed}..{args.first_seed + args.seeds - 1} x {args.seconds:g} s, "
        f"shoulder obstacle from {args.obstacle_low:g} rad",
        ["condition", "contact time (s)", "contacts", "peak current (A)", "circuits", "contact vs reactive"],
    )
    reactive_contact = np.mean([r["contact_s"] for r in results["reactive"]])
    data = {}
    for condition in CONDITIONS:
        rows = results[condition]
        columns = {k: np.array([r[k] for r in rows], dtype=float) for k in rows[0]}
        table.add(
            condition,
            f"{columns['contact_s'].mean():.2f} ± {columns['contact_s'].std():.2f}",
            f"{columns['contacts'].mean():.1f} ± {columns['contacts'].std():.1f}",
            f"{columns['peak_current_a'].mean():.2f}",
            f"{columns['circuits'].mean():.2f} ± {columns['circuits'].std():.2f}",
            f"{columns['contact_s'].mean() / reactive_contact:.2f}" if reactive_contact > 0 else "-",
        )
        data[condition] = {k: v.round(4).tolist() for k, v in columns.items()}
    return Report(tables=[table], data=data, files=[str(figure), str(figure.parent / WARM_NAME)])


def plot_contact(
    path: pathlib.Path, traces: dict, rule: Rule, *, seed: int, before_s: float = 3.0, after_s: float = 2.0
) -> None:
    """The first contact of the ``none`` run, the same moments under each condition."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    none = traces["none"]
    stalled = np.flatnonzero(np.abs(none["effort"]) > 1.0)
    centre = float(none["t"][stalled[0]]) if stalled.size else float(none["t"][len(none["t"]) // 2])
    fig, axes = plt.subplots(4, 1, figsize=(10, 9), sharex=True, layout="constrained")
    for condition, color in zip(CONDITIONS, ("C0", "C1", "C2")):
        trace = traces[condition]
        window = (trace["t"] >= centre - before_s) & (trace["t"] <= centre + after_s)
        t = trace["t"][window] - centre
        axes[0].plot(t, trace["position"][window], color=color, label=condition)
        axes[1].plot(t, np.abs(trace["effort"][window]), color=color, label=condition)
        if condition == "predictive":
            axes[2].plot(t, trace["prediction"][window], color=color, label=f"(1 - γ) V, τ = {rule.tau:g}")
        axes[3].plot(t, trace["command"][window], color=color, label=condition)
    axes[0].set_ylabel("shoulder (rad)")
    axes[1].set_ylabel("|effort| (N m)")
    axes[1].axhline(rule.threshold, color="0.5", ls="--", lw=0.8, label="threshold")
    axes[2].axhline(rule.threshold, color="0.5", ls="--", lw=0.8, label="threshold")
    axes[2].set_ylabel("prediction (N m)")
    axes[3].set_ylabel("shoulder command (rad/s)")
    axes[3].set_xlabel(f"s from the first contact without a reflex (seed {seed})")
    for ax in axes:
        ax.legend(loc="upper left", fontsize=8)
    fig.suptitle("A contact approached: no reflex, reactive rule on the present effort, predictive rule")
    fig.savefig(path, dpi=110)
    plt.close(fig)
