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

With ``--conditions``, also ``predictive_if_passed``: the first rule of
``config/reflex_rules_if_passed.yaml`` on an off-policy question, contact ahead if the operator's
command passed unchanged (:mod:`gamma_net_studies.reflex_if_passed`), a prediction the rule's own
holds do not teach away. ``--starts scratch,pretrained`` runs each learning condition from a Horde
that knows nothing as well as from the warmed one; ``--window-s`` adds contact per window against
the reactive rule's (bootstrap 95 % over seeds) and what each prediction did while the reflex
changed the command.

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
from typing import NamedTuple

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
from gamma_net_studies.reflex_if_passed import Probe, describe, holds, learning_for, plot_windows, window_ratios

CONDITIONS = ("none", "reactive", "predictive")  # the default; every condition below
IF_PASSED = "predictive_if_passed"  # the rule on "contact ahead if the operator's command passes" (off-policy)
ALL_CONDITIONS = (*CONDITIONS, IF_PASSED)
LEARNING = ("predictive", IF_PASSED)  # the conditions whose rule reads a Horde: run once per start
STARTS = ("scratch", "pretrained")
FIGURE_NAME = "reflex_study.png"
WINDOWS_NAME = "reflex_windows.png"  # with --window-s: contact per window against the reactive rule's
WARM_NAME = "warm_horde.npz"  # the Horde after the warm-up recording: where every predictive run starts
#: The per-step series :func:`run_condition` traces.
TRACE = ("t", "position", "effort", "prediction", "command", "on", "given", *Probe.KEYS)
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
    parser.add_argument(
        "--conditions",
        default=",".join(CONDITIONS),
        help=f"comma-separated, of {','.join(ALL_CONDITIONS)} (none and reactive always)",
    )
    parser.add_argument(
        "--starts",
        default="pretrained",
        help="comma-separated, of scratch,pretrained: the learning conditions' Horde from nothing, or after the "
        "warm-up recording (--warmup-circuits)",
    )
    parser.add_argument(
        "--window-s",
        type=float,
        default=None,
        help="also report contact per window of this many simulated seconds against the reactive rule's "
        "(bootstrap 95 %% over seeds), and the predictions while the reflex changes the command",
    )
    parser.add_argument(
        "--if-passed-questions",
        default=None,
        help="predictive_if_passed's questions YAML (default config/reflex_questions_if_passed.yaml)",
    )
    parser.add_argument(
        "--if-passed-rules",
        default=None,
        help="predictive_if_passed's rules YAML (default config/reflex_rules_if_passed.yaml); its first rule",
    )
    parser.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples of each window's ratio")
    parser.add_argument("--out", required=True, help="folder for the figure")


class _Study(NamedTuple):
    """What the command runs: each condition's questions and rule set, the runs' labels, where they go."""

    settings: dict
    obstacle: Obstacle
    specs: dict  # condition -> HordeSpec
    rules: dict  # condition -> RuleSet or None
    runs: list  # (label, condition, start or None)
    plotted: Rule  # the predictive condition's rule, for the figure
    out: pathlib.Path


def run(args: argparse.Namespace) -> Report:
    study = _study(args)
    study.out.mkdir(parents=True, exist_ok=True)
    learning = {condition for _, condition, start in study.runs if start == "pretrained"}
    warm = {
        condition: _warm_learner(
            study.specs[condition], study.settings, study.obstacle, circuits=args.warmup_circuits,
            folder=study.out, name=WARM_NAME if condition == "predictive" else f"warm_horde_{condition}.npz",
        )
        for condition in sorted(learning)
    }  # fmt: skip
    results = {label: [] for label, _, _ in study.runs}
    held = {label: [] for label, _, start in study.runs if start is not None}
    traces = {}
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for label, condition, start in study.runs:
            spec = study.specs[condition]
            learner = None if start is None else _learner(spec, warm.get(condition) if start == "pretrained" else None)
            result, trace = run_condition(
                study.settings, study.obstacle, study.rules[condition], learner, spec, seed=seed,
                seconds=args.seconds, window_s=args.window_s, watch=_watched(spec, study.rules[condition]),
            )  # fmt: skip
            results[label].append(result)
            if label in held:
                held[label].append(holds(trace, spec.rate_hz))
            if seed == args.first_seed:
                traces[label] = trace
    figure = study.out / FIGURE_NAME
    shown = {condition: traces[label] for label, condition, _ in study.runs}  # of the last start in --starts
    plot_contact(figure, shown, study.plotted, seed=args.first_seed)
    files = [str(figure)] + [str(study.out / w.path.name) for w in warm.values()]
    report = _report(results, held if args.window_s is not None else None, args, files)
    if args.window_s is not None:
        plot_windows(study.out / WINDOWS_NAME, report.data["windows"]["by_condition"], args.window_s)
        report.files.append(str(study.out / WINDOWS_NAME))
    return report


def _study(args: argparse.Namespace) -> _Study:
    check_range("--seeds", args.seeds, low=1)
    check_range("--first-seed", args.first_seed, low=0)
    check_range("--seconds", args.seconds, above=0.0)
    check_range("--warmup-circuits", args.warmup_circuits, low=0)
    check_range("--window-s", args.window_s, above=0.0)
    check_range("--resamples", args.resamples, low=100)
    check(args.obstacle_low < args.obstacle_high, "--obstacle-low must be below --obstacle-high")
    if args.window_s is not None:
        check(
            args.window_s <= args.seconds,
            f"--window-s {args.window_s:g} must not be longer than --seconds {args.seconds:g}",
        )
    conditions = _names(args.conditions, ALL_CONDITIONS, "--conditions")
    check(
        {"none", "reactive"} <= set(conditions), f"--conditions must include none and reactive; got {args.conditions!r}"
    )
    starts = _names(args.starts, STARTS, "--starts")
    out = output_dir("--out", args.out)
    arm = load_config(ArmConfig, config_file("arm"), "/**", "arm")
    spec = load_questions(args.questions or config_file("reflex_questions"))
    rule_set = load_rules(args.rules or config_file("reflex_rules"), questions=spec, joint_names=arm.joint_names)
    predictive = _first_prediction_rule(rule_set, "")
    specs = {c: spec for c in CONDITIONS}
    rules = {
        "none": None,
        "reactive": RuleSet((dataclasses.replace(predictive, source="signal", tau=None),), rule_set.stale_after_s),
        "predictive": RuleSet((predictive,), rule_set.stale_after_s),
    }
    if IF_PASSED in conditions:
        specs[IF_PASSED] = load_questions(args.if_passed_questions or config_file("reflex_questions_if_passed"))
        other = load_rules(args.if_passed_rules or config_file("reflex_rules_if_passed"), questions=specs[IF_PASSED],
                           joint_names=arm.joint_names)  # fmt: skip
        rules[IF_PASSED] = RuleSet((_first_prediction_rule(other, "--if-passed-rules: "),), other.stale_after_s)
    runs = [
        (condition if start in (None, "pretrained") else f"{condition}_{start}", condition, start)
        for condition in ALL_CONDITIONS
        if condition in conditions
        for start in (starts if condition in LEARNING else [None])
    ]
    obstacle = Obstacle(args.obstacle_low, args.obstacle_high)
    return _Study(_settings(arm), obstacle, specs, rules, runs, predictive, out)


def _names(text: str, known, flag: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    check(bool(names) and all(n in known for n in names), f"{flag} must name some of {', '.join(known)}; got {text!r}")
    return names


def _first_prediction_rule(rule_set: RuleSet, flag: str) -> Rule:
    rule = rule_set.rules[0]
    check(rule.source == "prediction" and rule.tau is not None, f"{flag}the first rule must be a prediction at a tau")
    return rule


def _learner(spec: HordeSpec, warm: _Warm | None) -> HordeLearner:
    """A copy of the warmed Horde, or one from nothing (``warm`` None)."""
    return warm.copy() if warm is not None else HordeLearner.from_spec(spec, rng=np.random.default_rng(spec.seed))


def _watched(spec: HordeSpec, rule_set: RuleSet | None) -> str | None:
    """The on-policy question beside an off-policy rule's (the same cumulant): traced through the same holds."""
    if rule_set is None or rule_set.rules[0].source != "prediction":
        return None
    question = spec.questions[spec.names.index(rule_set.rules[0].question)]
    if question.policy is None:
        return None
    return next((q.name for q in spec.questions if q.policy is None and q.cumulant == question.cumulant), None)


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

    def __init__(self, learner: HordeLearner, folder: pathlib.Path, name: str = WARM_NAME) -> None:
        self.path = learner.save(folder / name)

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


def _warm_learner(
    spec: HordeSpec, settings: dict, obstacle: Obstacle, *, circuits: int, folder: pathlib.Path, name: str = WARM_NAME
):
    return _Warm(warm_up(spec, settings, {0: obstacle}, circuits=circuits), folder, name)


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
        learning = learning_for(learner, spec, recording.joint_names)
        joystick = settings["joystick"]
        for t in range(recording.steps):
            msg = _message(recording.joint_names, recording.position[t], recording.velocity[t], recording.effort[t])
            learning.learn(*_signals(spec, msg))
            if learning.off_policy:  # no reflex in the recording: every command passed as the operator gave it
                given = joystick_to_joint_velocity(
                    recording.axes[t], max_speed=joystick.max_speed, deadzone=joystick.deadzone
                )
                learning.sent(msg, given, given)
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
    window_s: float | None = None,
    watch: str | None = None,
) -> tuple[dict, dict]:
    """One run: the operator drives for ``seconds`` with the reflex of ``rule_set`` (None: none).

    Every rule of the set is observed, as the reflex node observes them: a prediction rule its
    question's (1 - gamma) V at its tau, a signal rule its question's cumulant now. A learner with
    target policies learns each transition with rho of the command sent into it
    (:class:`~gamma_net_studies.reflex_if_passed.OffPolicyLearning`).

    Args:
      learner: learns online through the run; required when a rule is a prediction.
      joint: the joint whose range holds ``obstacle`` (0 the shoulder, 1 the elbow).
      mark_s: also report the contact time up to this moment (``contact_s_at_mark``), e.g. the end of a
        learning time.
      window_s: also report the contact time in each window of this length (``contact_s_windows``).
      watch: another question whose (1 - gamma) V at the first prediction rule's tau is traced (``watched``).

    Returns:
      (result, trace): contact time (s), contacts, peak current (A), circuits (fractional);
      and the per-step time series (time, the joint's position, effort, the first prediction rule's
      prediction, command, whether the first rule is on, the operator's command, then
      :class:`~gamma_net_studies.reflex_if_passed.Probe`'s, NaN where none).
    """
    rules = rule_set.rules if rule_set is not None else ()
    if learner is None and any(r.source == "prediction" for r in rules):
        raise ValueError("a prediction rule needs a learner")
    arm_config, joystick = settings["arm"], settings["joystick"]
    maze, arm, operator, tracker = _at_the_start(settings, {joint: obstacle}, seed)
    reflex = ReflexState(rule_set) if rule_set is not None else None
    q_index = [spec.names.index(r.question) for r in rules]
    plotted = next((i for i, r in enumerate(rules) if r.source == "prediction"), None)
    names = list(arm_config.joint_names)
    learning = learning_for(learner, spec, names)
    probe = None if plotted is None else Probe(learning, rules[plotted], spec, watch, joint)
    marks = _Marks(spec.rate_hz, mark_s, window_s)
    trace = {k: [] for k in TRACE}
    dt = 1.0 / spec.rate_hz
    for step in range(round(seconds * spec.rate_hz)):
        now = step * dt
        position, velocity, effort = arm.measure()
        msg = _message(names, position, velocity, effort)
        inputs, cumulants, continuations = _signals(spec, msg)
        if learning is not None:
            learning.learn(inputs, cumulants, continuations)
        values = _observed(rules, q_index, learner, inputs, cumulants)
        axes = operator.observe(now, position)
        given = joystick_to_joint_velocity(axes, max_speed=joystick.max_speed, deadzone=joystick.deadzone)
        command = given
        if reflex is not None:
            for i, value in enumerate(values):
                reflex.observe(i, value, now)
            reflex.decide(now)
            command = reflex.apply(names, given)
        if learning is not None:
            learning.sent(msg, given, command)
        on = bool(reflex is not None and reflex.status[0].on)
        prediction = values[plotted] if plotted is not None else np.nan
        extra = probe(inputs, given, command) if probe is not None else (np.nan,) * len(Probe.KEYS)
        row = (now, position[joint], effort[joint], prediction, command[joint], on, given[joint], *extra)
        for key, value in zip(trace, row):
            trace[key].append(value if key == "on" else float(value))
        arm.command_velocity(command)
        arm.step(dt)
        tracker.update(arm.tool)
        marks.update(step + 1, arm.contacts[joint].contact_s)
    return _result(arm.contacts[joint], tracker, maze, marks), {k: np.asarray(v) for k, v in trace.items()}


def _observed(rules, q_index, learner, inputs, cumulants) -> list[float]:
    """What each rule watches: a prediction rule its question's (1 - gamma) V at its tau, a signal rule the cumulant."""
    return [
        float(learner.predict(inputs, taus=[r.tau])[q, 0] / r.tau) if r.source == "prediction" else float(cumulants[q])
        for r, q in zip(rules, q_index)
    ]


class _Marks:
    """The contact time at the run's mark and at the end of each window (steps counted from 1)."""

    def __init__(self, rate_hz: float, mark_s: float | None, window_s: float | None) -> None:
        self.mark_step = None if mark_s is None else round(mark_s * rate_hz)
        self.window_steps = None if window_s is None else max(1, round(window_s * rate_hz))
        self.at_mark = None
        self.at_windows = []  # cumulative contact time at each window's end
        self.last = 0.0

    def update(self, steps: int, contact_s: float) -> None:
        if steps == self.mark_step:
            self.at_mark = contact_s
        if self.window_steps is not None and steps % self.window_steps == 0:
            self.at_windows.append(contact_s)
        self.last = contact_s


def _result(contact, tracker: ProgressTracker, maze: MazePath, marks: _Marks) -> dict:
    result = {
        "contact_s": contact.contact_s,
        "contacts": contact.contacts,
        "peak_current_a": contact.peak_torque / TORQUE_CONSTANT,
        "circuits": (tracker.progress - tracker.start) / maze.length,  # fractional: progress along the wire
    }
    if marks.mark_step is not None:
        result["contact_s_at_mark"] = contact.contact_s if marks.at_mark is None else marks.at_mark
    if marks.window_steps is not None:  # whole windows only: a last part window would not compare
        result["contact_s_windows"] = np.diff(np.concatenate(([0.0], marks.at_windows))).round(4).tolist()
    return result


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


def _report(results: dict, held: dict | None, args: argparse.Namespace, files: list[str]) -> Report:
    """The table of every run's totals; with ``held`` (``--window-s``) the windows' and the holds' tables too."""
    table = Table(
        f"reflex study: seeds {args.first_seed}..{args.first_seed + args.seeds - 1} x {args.seconds:g} s, "
        f"shoulder obstacle from {args.obstacle_low:g} rad",
        ["condition", "contact time (s)", "contacts", "peak current (A)", "circuits", "contact vs reactive"],
    )
    reactive_contact = np.mean([r["contact_s"] for r in results["reactive"]])
    data = {}
    for label, rows in results.items():
        columns = {k: np.array([r[k] for r in rows], dtype=float) for k in rows[0] if k != "contact_s_windows"}
        table.add(
            label,
            f"{columns['contact_s'].mean():.2f} ± {columns['contact_s'].std():.2f}",
            f"{columns['contacts'].mean():.1f} ± {columns['contacts'].std():.1f}",
            f"{columns['peak_current_a'].mean():.2f}",
            f"{columns['circuits'].mean():.2f} ± {columns['circuits'].std():.2f}",
            f"{columns['contact_s'].mean() / reactive_contact:.2f}" if reactive_contact > 0 else "-",
        )
        data[label] = {k: v.round(4).tolist() for k, v in columns.items()}
    tables = [table]
    if held is not None:
        tables += _long_run_tables(results, held, args, data)
    return Report(tables=tables, data=data, files=files)


def _long_run_tables(results: dict, held: dict, args: argparse.Namespace, data: dict) -> list[Table]:
    """Contact per window against the reactive rule's, and what each learning run's prediction did in its holds."""
    contact = {label: [r["contact_s_windows"] for r in rows] for label, rows in results.items()}
    windows = window_ratios(contact, resamples=args.resamples)
    n = len(contact["reactive"][0])
    spans = [f"{w * args.window_s / 60:g}-{(w + 1) * args.window_s / 60:g} min" for w in range(n)]
    per_window = Table(
        f"contact per {args.window_s:g} s window (s, mean over {args.seeds} seeds)", ["condition", *spans],
        formats={span: "{:.3f}" for span in spans},
    )  # fmt: skip
    ratios = Table(
        "contact per window / the reactive rule's (bootstrap 95 % over seeds, unpaired)",
        ["condition", *spans, "after the first window"],
    )
    for label, entry in windows.items():
        per_window.add(label, *entry["mean"])
        if "ratio" in entry and label != "none":
            ratios.add(label, *[describe(r) for r in entry["ratio"]], describe(entry["after_first"]))
    held_table = Table(
        "the rule's holds, and its prediction ((1 - gamma) V at its tau) while the reflex changed the command "
        "(mean over seeds)",
        ["condition", "rule on (%)", "holds", "hold (s)", "changed (%)", "prediction while changed",
         "its end / start", "on-policy beside it, end / start"],
        formats={"prediction while changed": "{:.4f}", "its end / start": "{:.2f}", "hold (s)": "{:.2f}",
                 "on-policy beside it, end / start": "{:.2f}", "rule on (%)": "{:.1f}", "changed (%)": "{:.1f}"},
    )  # fmt: skip
    summary = {}
    for label, runs in held.items():
        mean = {k: float(np.nanmean([r.get(k, np.nan) for r in runs])) for k in {k for r in runs for k in r}}
        summary[label] = {"mean": mean, "runs": runs}
        held_table.add(
            label, 100 * mean["on_fraction"], mean["holds"], mean["hold_s"], 100 * mean["changed_fraction"],
            mean.get("in_interventions", np.nan), mean.get("end_over_start", np.nan),
            mean.get("watched_end_over_start", np.nan),
        )  # fmt: skip
    data["windows"] = {"window_s": args.window_s, "contact_s": contact, "by_condition": windows}
    data["holds"] = summary
    return [per_window, ratios, held_table]


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
    for condition, color in zip([c for c in ALL_CONDITIONS if c in traces], ("C0", "C1", "C2", "C3")):
        trace = traces[condition]
        window = (trace["t"] >= centre - before_s) & (trace["t"] <= centre + after_s)
        t = trace["t"][window] - centre
        axes[0].plot(t, trace["position"][window], color=color, label=condition)
        axes[1].plot(t, np.abs(trace["effort"][window]), color=color, label=condition)
        if condition in LEARNING:
            passes = "" if condition == "predictive" else " if the command passes"
            axes[2].plot(t, trace["prediction"][window], color=color, label=f"(1 - γ) V{passes}, τ = {rule.tau:g}")
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
