"""`gamma-net reflex realtime-study`: the reflex study through the real processes, in real time.

Each run is ``ros2 launch gamma_net_ros reflex.launch.py`` (servo emulator with the obstacle,
``dynamixel_driver``, teleop, the overshooting operator, the Horde and the reflex) with the
run's operator seed, obstacle and rules file, for ``--seconds`` of wall time. Three conditions,
each a rules file the study writes (``OUT/rules/``):

- ``none``: the predictive rule as an event-only rule (``response: {event: true}``, fail-safe
  ``pass``): the reflex is in the path but never changes a command; its on time says how often
  the predictive rule would have acted;
- ``reactive``: the rule on the present signal (``source: signal``: the joint's |effort| now);
- ``predictive``: the rule on the Horde's prediction ((1 - gamma) V at its tau), with the reactive
  rule beside it as its floor (as config/reflex_rules.yaml ships them): from scratch, before the
  Horde has learned, it is the reactive rule; what it gains over ``reactive`` is the prediction's.

Two starts (``--starts``): the Horde learns from scratch (in memory), or starts each run from a
copy of a checkpoint: ``--pretrained CHECKPOINT``, or one the study warms up per obstacle
(``OUT/pretrained/OBSTACLE.npz``: ``--warmup-circuits`` circuits of a simulated recording with that
obstacle, as `gamma-net reflex study` pretrains). The questions file is the study's own,
``OUT/questions.yaml``: config/reflex_questions.yaml plus the questions the other obstacles' rules
need (:data:`EXTRA_QUESTIONS`); a checkpoint must be of those questions. Only ``predictive`` reads
the Horde: ``reactive`` and ``none`` (never changing a command) move the arm the same whichever
start the Horde had, so they run once per obstacle and seed, with the Horde from scratch (no
checkpoint to warm up), and every start's tables use those runs beside its own predictive runs;
``none``'s rule-on fraction is that Horde's, so a pretrained table leaves it out (:data:`SHARED`).

Measured per run, over the window from the Horde's first prediction to ``--seconds`` later:
contact time, contacts and peak current from the emulator's own obstacle counters (its control
socket), read every ``--poll-s`` as well (``contact_series``, for the time until the predictive
rule is ahead); the fraction of the time the run's rules were on, each and any (from ``reflex/events``); progress
in circuits along the wire, from ``joint_states`` as the simulated study measures it (the tool's
position projected on the wire, :class:`ProgressTracker`); the load average before and after,
and the wall time of the whole launch. One JSON per run in ``OUT/runs/``; a run whose JSON
exists is skipped, so an interrupted study resumes (a shared run is also found under the name a
pretrained start once gave it, ``pretrained-OBSTACLE-CONDITION-seedN.json``). At the end, per
start and obstacle (:mod:`gamma_net_studies.reflex_realtime_stats`): the tables, the
predictive/reactive ratio with a bootstrap interval, the issue's checks (PASS/FAIL), the time
until the predictive rule's contact rate stays at most half the reactive rule's, two figures,
and with ``--markdown`` the tables for docs/results.md. ``--plan`` prints the runs and the time
they need (the shared runs once), and runs none.

``--priorities DRIVER,REFLEX,HORDE`` gives those three processes of each launch their own FIFO
priority (every thread), once the launch gives its first prediction, as docs/robustness.md
advises; the study itself, the emulator, teleop and the operator stay at normal priority.

The runs use the environment's ``ROS_DOMAIN_ID``: on a shared machine give the study a domain
of its own, or another user's ``joint_states`` would be counted.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
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
from gamma_net_core.horde.questions import load_questions
from gamma_net_core.paths import config_file
from gamma_net_core.reflex.rules import load_rules
from gamma_net_core.report import Report, Table, write_json
from gamma_net_core.signals.arm import ArmConfig, ArmKinematics
from gamma_net_core.signals.maze import MazeConfig, MazePath, ProgressTracker
from gamma_net_core.signals.obstacle import Obstacle
from gamma_net_studies.reflex_realtime_stats import (
    CONDITIONS,
    SHARED,
    SHARED_START,
    SIMULATED_CONTACT_PER_HIT,
    STARTS,
    WINDOW_S,
    any_on,
    contact_per_hit,
    markdown,
    plot_summary,
    plot_time_to_beat,
    summarize,
    time_on,
)
from gamma_net_studies.reflex_study import run_condition, study_settings, warm_up

#: Each obstacle: the servo whose range holds it (rad), the joint the operator overshoots toward
#: it, and the rules adapted to it: the floor's question (|effort|), the predictive rule's (contact,
#: the effort past the floor's threshold in the push's direction), the joint and direction.
OBSTACLES = {
    # The launch's default: 0.05 rad past the shoulder's reach on the route (-0.27 rad at most).
    "shoulder": {
        "servo": 1, "low": -0.2, "high": 0.5, "joint": 0, "direction": 1,
        "question": "shoulder_effort", "ahead": "shoulder_contact",
    },
    # Just past the elbow's reach on the route (2.16 rad at most).
    "elbow": {
        "servo": 2, "low": 2.27, "high": 2.9, "joint": 1, "direction": 1,
        "question": "elbow_effort", "ahead": "elbow_contact",
    },
    # The other way: below the shoulder's lowest on the route (-1.25 rad), the rule's direction negative.
    "shoulder_low": {
        "servo": 1, "low": -1.55, "high": -1.3, "joint": 0, "direction": -1,
        "question": "shoulder_effort", "ahead": "shoulder_contact_below",
    },
}  # fmt: skip
JOINTS = ("shoulder", "elbow")


def _effort(joint: str, **transform) -> dict:
    return {"topic": "/joint_states", "type": "sensor_msgs/msg/JointState", "field": f"effort[{joint}]", **transform}


#: The questions the obstacles' rules need beyond config/reflex_questions.yaml's (shoulder_effort,
#: shoulder_contact): the elbow's, and contact pushing the shoulder down (its effort below -0.06 N m).
EXTRA_QUESTIONS = [
    {"name": "elbow_effort", "cumulant": _effort("elbow", transform="abs")},
    {"name": "elbow_contact", "cumulant": _effort("elbow", transform="indicator", threshold=0.06, direction="above")},
    {
        "name": "shoulder_contact_below",
        "cumulant": _effort("shoulder", transform="indicator", threshold=-0.06, direction="below"),
    },
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=10, help="runs per condition and obstacle (operator seeds)")
    parser.add_argument("--first-seed", type=int, default=0, help="operator seeds first-seed, first-seed + 1, ...")
    parser.add_argument("--seconds", type=float, default=90.0, help="wall seconds a run, from the first prediction")
    parser.add_argument(
        "--scratch-seconds",
        type=float,
        default=None,
        help="wall seconds of a from-scratch predictive run, whose Horde learns in it (default: --seconds)",
    )
    parser.add_argument(
        "--learn-s",
        type=float,
        default=0.0,
        help="s of a from-scratch predictive run before its contact counts in the ratio (its time to learn; "
        "contact is compared per minute, progress per minute over the whole run)",
    )
    parser.add_argument(
        "--obstacles",
        default="shoulder,elbow,shoulder_low",
        help=f"comma-separated, of {', '.join(OBSTACLES)}; NAME=N gives that obstacle N runs instead of --runs",
    )
    parser.add_argument(
        "--conditions", default=",".join(CONDITIONS), help="comma-separated, of none,reactive,predictive"
    )
    parser.add_argument(
        "--starts",
        default=None,
        help="comma-separated, of scratch,pretrained: the Horde from nothing, or from a checkpoint "
        "(default: pretrained with --pretrained, else scratch)",
    )
    parser.add_argument(
        "--pretrained",
        default=None,
        help="the checkpoint every pretrained run starts from (default: the study warms one up per obstacle, "
        "OUT/pretrained/OBSTACLE.npz)",
    )
    parser.add_argument(
        "--warmup-circuits",
        type=int,
        default=20,
        help="circuits of a simulated recording with the obstacle that the study's own checkpoints learn",
    )
    parser.add_argument(
        "--priorities",
        default=None,
        help="real-time FIFO priorities DRIVER,REFLEX,HORDE given to those processes of each launch, e.g. 80,70,60 "
        "(needs CAP_SYS_NICE or an RLIMIT_RTPRIO that high; default: none)",
    )
    parser.add_argument("--poll-s", type=float, default=1.0, help="s between readings of the obstacle's counters")
    parser.add_argument(
        "--window-s", type=float, default=WINDOW_S, help="s windows of the time until the predictive rule is ahead"
    )
    parser.add_argument(
        "--start-timeout", type=float, default=120.0, help="s for a launch to give its first prediction"
    )
    parser.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples of the ratio")
    parser.add_argument(
        "--simulated-seeds",
        type=int,
        default=10,
        help="seeds of 120 s of the simulated study's reactive runs per obstacle, the contact per hit's reference "
        "(0: the shoulder's published number only)",
    )
    parser.add_argument(
        "--plan", action="store_true", help="print the runs the study would make and its time; run none"
    )
    parser.add_argument("--markdown", default=None, help="also write the tables as markdown to this file")
    parser.add_argument("--out", required=True, help="folder for the runs' JSON, rules, logs, tables and figure")


def _names(text: str, known, flag: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    check(bool(names) and not unknown, f"{flag} must name some of {', '.join(known)}; got {text!r}")
    return names


def _obstacle_runs(text: str, runs: int) -> dict[str, int]:
    """``--obstacles``: each name with its runs (``NAME=N``, or ``runs``)."""
    counts = {}
    for item in (i.strip() for i in text.split(",") if i.strip()):
        name, _, count = item.partition("=")
        check(name.strip() in OBSTACLES, f"--obstacles must name some of {', '.join(OBSTACLES)}; got {text!r}")
        check(
            not count or (count.strip().isdigit() and int(count) >= 1),
            f"--obstacles {item}: runs must be a whole number, at least 1",
        )
        counts[name.strip()] = int(count) if count else runs
    check(bool(counts), f"--obstacles must name some of {', '.join(OBSTACLES)}; got {text!r}")
    return counts


@dataclasses.dataclass(frozen=True)
class _Study:
    """What a study's arguments ask for, checked."""

    obstacles: dict[str, int]
    conditions: list[str]
    starts: list[str]
    pretrained: pathlib.Path | None
    priorities: dict[str, int]
    out: pathlib.Path
    markdown_file: pathlib.Path | None


def run(args: argparse.Namespace) -> Report:
    study = _configure(args)
    # Per obstacle and seed its runs side by side, so the conditions compared meet the same load;
    # a shared condition's run once, for every start.
    plan = [
        (start, obstacle, seed, condition)
        for obstacle, count in study.obstacles.items()
        for seed in range(args.first_seed, args.first_seed + count)
        for condition in study.conditions
        for start in ([SHARED_RUN] if condition in SHARED else study.starts)
    ]
    if args.plan:
        return _plan(plan, study.out, args, study.pretrained, study.starts)
    if study.priorities:
        _check_priorities(study.priorities)  # refused before any launch, not in the first one
    for sub in ("runs", "rules", "logs"):
        (study.out / sub).mkdir(parents=True, exist_ok=True)
    questions = _write_questions(study.out / "questions.yaml")
    rules = {
        (o, c): _write_rules(study.out / "rules" / f"{o}-{c}.yaml", o, c, questions)
        for o in study.obstacles
        for c in study.conditions
    }
    runs = _run_plan(args, study, plan, questions, rules)
    simulated = dict(SIMULATED_CONTACT_PER_HIT)
    if args.simulated_seeds:
        simulated = _simulated_per_hit(study.out, study.obstacles, rules, questions, seeds=args.simulated_seeds)
    return _report(args, study, runs, simulated)


def _configure(args: argparse.Namespace) -> _Study:
    check_range("--runs", args.runs, low=1)
    check_range("--first-seed", args.first_seed, low=0)
    check_range("--seconds", args.seconds, above=0.0)
    args.scratch_seconds = args.seconds if args.scratch_seconds is None else args.scratch_seconds
    check_range("--scratch-seconds", args.scratch_seconds, above=0.0)
    check_range("--learn-s", args.learn_s, low=0.0)
    check(
        args.learn_s < args.scratch_seconds,
        f"--learn-s {args.learn_s:g} leaves nothing of a {args.scratch_seconds:g} s run to count",
    )
    check_range("--start-timeout", args.start_timeout, above=0.0)
    check_range("--resamples", args.resamples, low=100)
    check_range("--warmup-circuits", args.warmup_circuits, low=1)
    check_range("--poll-s", args.poll_s, above=0.0, high=10.0)
    check_range("--window-s", args.window_s, above=0.0)
    check_range("--simulated-seeds", args.simulated_seeds, low=0)
    obstacles = _obstacle_runs(args.obstacles, args.runs)
    conditions = _names(args.conditions, CONDITIONS, "--conditions")
    starts = _names(args.starts or ("pretrained" if args.pretrained else "scratch"), STARTS, "--starts")
    pretrained = None
    if args.pretrained:
        check("pretrained" in starts, f"--pretrained {args.pretrained} needs --starts with pretrained")
        pretrained = pathlib.Path(args.pretrained).expanduser().resolve()
        check(pretrained.is_file(), f"--pretrained {args.pretrained}: no such checkpoint file")
    priorities = _priorities(args.priorities)
    out = output_dir("--out", args.out)
    markdown_file = pathlib.Path(args.markdown) if args.markdown else None
    if markdown_file is not None:
        check(not markdown_file.is_dir(), f"--markdown {args.markdown} is a folder; it must name a file")
    return _Study(obstacles, conditions, starts, pretrained, priorities, out, markdown_file)


def _run_plan(
    args: argparse.Namespace, study: _Study, plan: list[tuple], questions: pathlib.Path, rules: dict
) -> list[dict]:
    """Each planned run's results, in the plan's order: run now, or read back from an earlier call."""
    out = study.out
    checkpoints: dict[str, pathlib.Path] = {}
    # Resumable: a run done is read back, not run again.
    found = {key: _done(out, *key) for key in plan}
    runs = {key: json.loads(path.read_text()) for key, path in found.items() if path is not None}
    for key, result in runs.items():  # a run of another length is another study's: refused, not pooled
        want, got = _seconds_of(args, key[0], key[3]), float(result.get("seconds", args.seconds))
        check(
            abs(got - want) <= 1.0,
            f"{found[key]} is a run of {got:g} s where this study's are {want:g} s: move it away, or give "
            "the length it was made with",
        )
    watching = _Watcher() if len(runs) < len(plan) else contextlib.nullcontext()
    with _terminate_as_interrupt(), watching as watcher:
        for key in plan:
            if key in runs:
                continue
            start, obstacle, seed, condition = key
            path = _run_path(out, start, obstacle, condition, seed)
            checkpoint = None
            if (SHARED_START if start == SHARED_RUN else start) == "pretrained":
                if obstacle not in checkpoints:
                    checkpoints[obstacle] = study.pretrained or _warm_checkpoint(
                        out, obstacle, questions, args.warmup_circuits
                    )
                checkpoint = checkpoints[obstacle]
            shown = f"{SHARED_START} (for {', '.join(study.starts)})" if start == SHARED_RUN else start
            seconds = _seconds_of(args, start, condition)
            print(f"[realtime-study] {shown} {obstacle} {condition} seed {seed}: {seconds:g} s", flush=True)
            result = run_once(
                watcher,
                obstacle=obstacle,
                condition=condition,
                seed=seed,
                seconds=seconds,
                rules_file=rules[(obstacle, condition)],
                questions_file=questions,
                pretrained=checkpoint,
                log=out / "logs" / f"{path.stem}.log",
                start_timeout=args.start_timeout,
                poll_s=args.poll_s,
                priorities=study.priorities,
            )
            write_json(path, result)
            runs[key] = result
    return [runs[key] for key in plan]


def _report(args: argparse.Namespace, study: _Study, runs: list[dict], simulated: dict) -> Report:
    """The summary's tables, its figures and the checks' count."""
    out = study.out
    report = summarize(
        runs,
        seconds=args.seconds,
        starts=study.starts,
        resamples=args.resamples,
        window_s=args.window_s,
        learn_s=args.learn_s,
        simulated=simulated,
    )
    figure = plot_summary(out / "reflex_realtime.png", runs, study.starts)
    beats = {(s, o): d["time_to_beat"] for s, by in report.data.items() for o, d in by.items()}
    timeline = plot_time_to_beat(out / "reflex_realtime_ahead.png", beats)
    if timeline is None:
        (out / "reflex_realtime_ahead.png").unlink(missing_ok=True)  # not an earlier summary's
    report.files += [str(figure), *([str(timeline)] if timeline else []), str(out / "runs")]
    if study.markdown_file is not None:
        study.markdown_file.write_text(markdown(report.tables))
        report.files.append(str(study.markdown_file))
    report.data["runs"] = len(runs)
    checks = [
        c for by in report.data.values() if isinstance(by, dict) for d in by.values() for c in d["checks"].values()
    ]
    report.summary = (
        f"{len(runs)} runs; Done when checks: {checks.count('PASS')} PASS, {checks.count('FAIL')} FAIL, "
        f"{checks.count('n/a')} n/a (table above)"
    )
    return report


#: The start of a shared condition's run in the plan: made once (its Horde :data:`SHARED_START`'s)
#: and used for every start.
SHARED_RUN = "shared"


@contextlib.contextmanager
def _terminate_as_interrupt():
    """SIGTERM (``kill``, a supervisor, a job scheduler) ends the study as Ctrl-C does.

    The run's launch is stopped with it, the run is not recorded, and the study says
    "interrupted" in one line; without it a SIGTERM would end the study and leave the launch's
    processes running. Only the main thread can set a handler; elsewhere nothing changes.
    """

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, interrupt)
    except ValueError:
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _seconds_of(args: argparse.Namespace, start: str, condition: str) -> float:
    """A run's wall seconds: ``--scratch-seconds`` for a from-scratch predictive run, else ``--seconds``."""
    return args.scratch_seconds if (start, condition) == ("scratch", "predictive") else args.seconds


def _run_path(out: pathlib.Path, start: str, obstacle: str, condition: str, seed: int) -> pathlib.Path:
    """Where a run is written: a from-scratch or shared run under the name from-scratch runs always had."""
    prefix = "pretrained-" if start == "pretrained" else ""
    return out / "runs" / f"{prefix}{obstacle}-{condition}-seed{seed}.json"


def _done(out: pathlib.Path, start: str, obstacle: str, seed: int, condition: str) -> pathlib.Path | None:
    """The JSON of a run already made, or None.

    A shared run may also be one a pretrained start made under its own name before runs were shared.
    """
    names = [_run_path(out, start, obstacle, condition, seed)]
    if start == SHARED_RUN:
        names.append(_run_path(out, "pretrained", obstacle, condition, seed))
    return next((path for path in names if path.exists()), None)


#: Seconds a run takes besides its window when no run has measured it yet: the launch to its first
#: prediction and Ctrl-C to every process ended (7.7-8.7 s a run in a pilot on the 2-core
#: development machine at load 11-13).
RUN_OVERHEAD_S = 10.0
#: Seconds to warm up a checkpoint per obstacle when none is given (20 circuits, simulated).
WARMUP_S = 60.0
#: Seconds for an obstacle's per-hit reference (10 simulated reactive runs of 120 s).
REFERENCE_S = 30.0


def _plan(plan: list[tuple], out: pathlib.Path, args: argparse.Namespace, pretrained, starts: list[str]) -> Report:
    """The runs the study would make, which are done already (their JSON in OUT/runs), and the time left."""
    found = {key: _done(out, *key) for key in plan}
    done = [key for key, path in found.items() if path is not None]
    measured = []  # each run's start and stop: its wall time beyond its window
    for key in done:
        result = json.loads(found[key].read_text())
        if result.get("wall_s") is not None:
            measured.append(float(result["wall_s"]) - float(result.get("seconds", args.seconds)))
    overhead = (sum(measured) / len(measured)) if measured else RUN_OVERHEAD_S
    warmups = 0
    if pretrained is None:
        warm = {o for s, o, _, _ in plan if s == "pretrained"}
        warmups = sum(1 for o in warm if not (out / "pretrained" / f"{o}.npz").exists())
    known = json.loads((out / "simulated.json").read_text()) if (out / "simulated.json").exists() else {}
    references = 0
    if args.simulated_seeds:
        references = sum(
            1 for o in dict.fromkeys(o for _, o, _, _ in plan) if f"{o} seeds {args.simulated_seeds}" not in known
        )
    left = len(plan) - len(done)
    to_run = sum(_seconds_of(args, key[0], key[3]) + overhead for key in plan if key not in done)
    seconds = to_run + warmups * WARMUP_S + references * REFERENCE_S
    shared = [c for c in SHARED if any(k[3] == c for k in plan)]
    table = Table(
        f"gamma-net reflex realtime-study --plan: runs of {args.seconds:g} s"
        + (
            f" ({args.scratch_seconds:g} s from scratch with the prediction, its first {args.learn_s:g} s to learn)"
            if args.scratch_seconds != args.seconds or args.learn_s
            else ""
        )
        + f", operator seeds from {args.first_seed}"
        + (
            f"; {' and '.join(shared)} never read the Horde: one run per obstacle and seed, the Horde from "
            f"{SHARED_START}, for {' and '.join(starts)}"
            if shared
            else ""
        ),
        ["start", "obstacle", "condition", "runs", "done", "to run"],
    )
    for start, obstacle, condition in dict.fromkeys((s, o, c) for s, o, _, c in plan):
        mine = [k for k in plan if (k[0], k[1], k[3]) == (start, obstacle, condition)]
        finished = [k for k in mine if k in done]
        shown = ", ".join(starts) if start == SHARED_RUN else start
        table.add(shown, obstacle, condition, len(mine), len(finished), len(mine) - len(finished))
    basis = f"each run's length + {overhead:.0f} s start and stop" + (
        f", the mean of {len(measured)} done" if measured else ""
    )
    hours, minutes = divmod(round(seconds / 60), 60)
    summary = (
        f"{left} of {len(plan)} runs to make, about {hours} h {minutes:02d} min ({basis}"
        + (
            f"; {warmups} checkpoint{'s' if warmups > 1 else ''} to warm up, about {WARMUP_S:g} s each"
            if warmups
            else ""
        )
        + (
            f"; {references} simulated reference{'s' if references > 1 else ''}, about {REFERENCE_S:g} s each"
            if references
            else ""
        )
        + ")"
    )
    data = {"runs": len(plan), "done": len(done), "to_run": left, "overhead_s": overhead, "estimate_s": seconds}
    return Report(tables=[table], data={"plan": data}, summary=summary)


def _warm_checkpoint(out: pathlib.Path, obstacle: str, questions: pathlib.Path, circuits: int) -> pathlib.Path:
    """OUT/pretrained/OBSTACLE.npz: the study's questions learned on a simulated recording with the obstacle.

    As the simulated study pretrains (`gamma-net reflex study`): ``circuits`` circuits with the
    obstacle in the same joint's range and the operator overshooting toward it, on a seed no run
    has; made once and kept, so a resumed study starts from the same checkpoint.
    """
    path = out / "pretrained" / f"{obstacle}.npz"
    if path.exists():
        return path
    place = OBSTACLES[obstacle]
    arm = load_config(ArmConfig, config_file("arm"), "/**", "arm")
    settings = study_settings(arm, overshoot_joint=place["joint"], overshoot_direction=place["direction"])
    print(f"[realtime-study] warming up {path} on {circuits} simulated circuits", flush=True)
    learner = warm_up(
        load_questions(questions), settings, {place["joint"]: Obstacle(place["low"], place["high"])}, circuits=circuits
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    return learner.save(path)


#: Simulated seconds of each reactive run of the contact per hit's reference (the simulated study's).
SIMULATED_S = 120.0


def _simulated_per_hit(
    out: pathlib.Path, obstacles, rules: dict, questions: pathlib.Path, *, seeds: int
) -> dict[str, float | None]:
    """Per obstacle, the reactive rule's contact per hit in simulated time (the simulated study's loop).

    The study's own reactive rule and obstacle, operator seeds 0 .. seeds - 1 of
    :data:`SIMULATED_S` each, stepped in simulated time as `gamma-net reflex study` does (on the
    shoulder with 10 seeds, its published 0.021 s); kept in OUT/simulated.json, so a resumed study
    does not run them again.
    """
    path = out / "simulated.json"
    known = json.loads(path.read_text()) if path.exists() else {}
    spec = load_questions(questions)
    arm = load_config(ArmConfig, config_file("arm"), "/**", "arm")
    for obstacle in obstacles:
        key = f"{obstacle} seeds {seeds}"
        if key in known or (obstacle, "reactive") not in rules:
            continue
        place = OBSTACLES[obstacle]
        settings = study_settings(arm, overshoot_joint=place["joint"], overshoot_direction=place["direction"])
        rule_set = load_rules(rules[(obstacle, "reactive")], questions=spec, joint_names=JOINTS)
        print(f"[realtime-study] {obstacle}: the reactive rule in simulated time, {seeds} seeds", flush=True)
        results = [
            run_condition(
                settings,
                Obstacle(place["low"], place["high"]),
                rule_set,
                None,
                spec,
                seed=seed,
                seconds=SIMULATED_S,
                joint=place["joint"],
            )[0]
            for seed in range(seeds)
        ]
        known[key] = contact_per_hit(results)
        write_json(path, known)
    return {o: known.get(f"{o} seeds {seeds}") for o in obstacles}


#: The processes that get ``--priorities``, in its order (docs/robustness.md's order: the driver
#: above the reflex above the Horde), by the name the launch gives them.
PRIORITY_PROCESSES = ("dynamixel_driver", "reflex", "horde")


def _priorities(text: str | None) -> dict[str, int] | None:
    if not text:
        return None
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    low, high = os.sched_get_priority_min(os.SCHED_FIFO), os.sched_get_priority_max(os.SCHED_FIFO)
    check(
        len(values) == len(PRIORITY_PROCESSES) and all(low <= v <= high for v in values),
        f"--priorities must be three FIFO priorities {low}..{high} for {', '.join(PRIORITY_PROCESSES)}; got {text!r}",
    )
    check(
        values[0] > values[1] > values[2],
        f"--priorities must be distinct and falling, driver above reflex above horde; got {text!r}",
    )
    return dict(zip(PRIORITY_PROCESSES, values))


def _check_priorities(priorities: dict[str, int]) -> None:
    """Refuse (one line) where this user may not give a process the highest of them."""
    top = max(priorities.values())
    before = os.sched_getscheduler(0), os.sched_getparam(0)
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(top))
    except PermissionError:
        check(
            False,
            f"--priorities needs FIFO priority {top}: run as root, or raise this shell's limit first "
            f"(sudo prlimit --pid $$ --rtprio={top})",
        )
    finally:
        os.sched_setscheduler(0, before[0], before[1])  # lowering back is always allowed


def _write_questions(path: pathlib.Path) -> pathlib.Path:
    doc = yaml.safe_load(config_file("reflex_questions").read_text())
    names = {q["name"] for q in doc["questions"]}
    doc["questions"] += [copy.deepcopy(q) for q in EXTRA_QUESTIONS if q["name"] not in names]
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _write_rules(path: pathlib.Path, obstacle: str, condition: str, questions: pathlib.Path) -> pathlib.Path:
    """The shipped rules (config/reflex_rules.yaml's), on the obstacle's joint, as ``condition`` has them."""
    doc = yaml.safe_load(config_file("reflex_rules").read_text())
    place = OBSTACLES[obstacle]
    rule, reactive = dict(doc["rules"][0]), dict(doc["rules"][1])
    joint = JOINTS[place["joint"]]
    response = {
        **rule["response"],
        "joints": [joint],
        "direction": "positive" if place["direction"] > 0 else "negative",
    }
    rule.update(name=f"{joint}_stall_ahead", question=place["ahead"], response=response)
    reactive.update(name=f"{joint}_stall", question=place["question"], response=response)
    if condition == "reactive":
        rules = [reactive]
    elif condition == "none":
        # In the path, never acting: what the predictive rule would do, reported, not done.
        rules = [{**rule, "response": {"event": True}, "fail_safe": "pass"}]
    else:
        # The prediction in front of the reactive rule, as config/reflex_rules.yaml ships them: a
        # Horde that has not learned yet, or a contact it did not see coming, still meets the floor.
        rules = [rule, reactive]
    top = {"stale_after_s": doc["stale_after_s"], "fail_safe": doc["fail_safe"], "rules": rules}
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

        from gamma_net_ros.spin_thread import SpinThread

        arm = load_config(ArmConfig, config_file("arm"), "/**", "arm")
        self.kinematics = ArmKinematics.from_config(arm)
        self.maze = MazePath.from_config(load_config(MazeConfig, config_file("arm"), "/**", "maze"))
        self.lock = threading.Lock()
        self.reset()
        # Ctrl-C is the study's (a KeyboardInterrupt that stops the run's launch and ends the study in one
        # line), not rclpy's: its handler would end this node's thread with a traceback and the study go on.
        rclpy.init(signal_handler_options=rclpy.signals.SignalHandlerOptions.NO)
        self.node = rclpy.create_node("reflex_realtime_study")
        self.node.create_subscription(ReflexEvent, "reflex/events", self._event, 100)
        self.node.create_subscription(JointState, "joint_states", self._state, qos_profile_sensor_data)
        self.node.create_subscription(PredictionArray, "horde/predictions", self._prediction, qos_profile_sensor_data)
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self.spinner = SpinThread(self.executor)
        return self

    def __exit__(self, *exc) -> None:
        import rclpy

        self.spinner.stop()
        self.node.destroy_node()
        rclpy.try_shutdown()

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
    poll_s: float = 1.0,
    priorities: dict[str, int] | None = None,
) -> dict:
    """One launch for ``seconds`` from its first prediction; its results (the module docstring's).

    ``contact_series``: the obstacle's counters since the window's start, ``[t, contact_s, contacts]``
    read every ``poll_s`` through the emulator's control socket (a late reading counts in ``polls_missed``).
    """
    from gamma_net_ros.hardware.emulator.client import EmulatorClient

    place = OBSTACLES[obstacle]
    folder = pathlib.Path(tempfile.mkdtemp(prefix="gnrt-"))  # short: a Unix socket path has ~100 characters
    port = folder / "ttyDXL"
    arguments = _launch_arguments(place, port=port, seed=seed, rules_file=rules_file, questions=questions_file)
    if pretrained is not None:  # a copy: the Horde saves into it
        arguments["checkpoint_path"] = str(shutil.copyfile(pretrained, folder / pretrained.name))
    # An empty value is not a launch argument: '' (from scratch) is the launch's default.
    given = [f"{k}:={v}" for k, v in arguments.items() if v != ""]
    command = ["ros2", "launch", "gamma_net_ros", "reflex.launch.py", *given]
    watcher.reset()
    launched = time.monotonic()
    load_before = os.getloadavg()
    applied = {}
    with open(log, "w") as log_file:
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            client = EmulatorClient(f"{port}.ctl")
            _wait_for_first_prediction(watcher, process, time.monotonic() + start_timeout, start_timeout, log)
            if priorities:
                applied = _apply_priorities(process.pid, priorities)
            before = client.state()["servos"][place["servo"]]["obstacle"]
            watcher.start_window()
            start = time.monotonic()
            # A reading late by more than its interval is skipped, not waited for: the window's end is kept.
            poller = EmulatorClient(f"{port}.ctl", timeout=poll_s)
            series, missed = _poll_contact(poller, place["servo"], process, before, start, seconds, poll_s, log)
            after = client.state()["servos"][place["servo"]]["obstacle"]
            end = time.monotonic()
            series.append(_since(before, after, end - start))
            progress, states, switches = watcher.stop_window()
        finally:
            exit_code = _stop(process)
            shutil.rmtree(folder, ignore_errors=True)
    wall = time.monotonic() - launched
    on_fraction, any_on_fraction = _on_fractions(switches, rules_file, start, end)
    return {
        "obstacle": obstacle,
        "condition": condition,
        "seed": seed,
        "seconds": round(end - start, 3),
        "pretrained": str(pretrained) if pretrained else None,
        "contact_s": after["contact_s"] - before["contact_s"],
        "contacts": after["contacts"] - before["contacts"],
        "contact_series": series,
        "polls_missed": missed,
        "peak_current_a": after["peak_current"],
        "progress_circuits": progress,
        "rule_on_fraction": on_fraction,
        "any_rule_on_fraction": any_on_fraction,
        "rule_switches": sum(1 for _, t, _ in switches if start < t <= end),
        "joint_states": states,
        "launch_exit": exit_code,
        "wall_s": round(wall, 3),
        "load_average": [round(v, 2) for v in (*load_before, *os.getloadavg())],
        "priorities": applied,
        "arguments": {k: str(v) for k, v in arguments.items() if k not in ("port", "checkpoint_path")},
        "log": str(log),
    }


def _launch_arguments(place: dict, *, port: pathlib.Path, seed: int, rules_file, questions) -> dict:
    """reflex.launch.py's arguments for one run at an obstacle's ``place``, from scratch."""
    return {
        "port": port,
        "operator_seed": seed,
        "overshoot_joint": place["joint"],
        "overshoot_direction": place["direction"],
        "obstacle_servo": place["servo"],
        "obstacle_low": place["low"],
        "obstacle_high": place["high"],
        "rules_file": rules_file,
        "questions_file": questions,
        "checkpoint_path": "",
    }


def _on_fractions(switches: list, rules_file: pathlib.Path, start: float, end: float) -> tuple[dict, float]:
    """Each rule's fraction of the window it was on, and any rule's."""
    rules = sorted({rule for rule, _, _ in switches}) or [yaml.safe_load(rules_file.read_text())["rules"][0]["name"]]
    # Every switch since the launch: time_on takes those before the window as the state it starts in.
    on_fraction = {rule: time_on([(t, on) for r, t, on in switches if r == rule], start, end) for rule in rules}
    return on_fraction, time_on(any_on(switches), start, end)


def _wait_for_first_prediction(
    watcher: _Watcher, process: subprocess.Popen, deadline: float, start_timeout: float, log: pathlib.Path
) -> None:
    """Until the watcher has heard a prediction; a launch that ends or stays silent is an error naming its log."""
    while watcher.first_prediction is None:
        if process.poll() is not None:
            raise ChildProcessError(f"the launch ended (exit {process.returncode}) before a prediction: see {log}")
        if time.monotonic() > deadline:
            raise ChildProcessError(f"no prediction within {start_timeout:g} s of the launch: see {log}")
        time.sleep(0.05)


def _poll_contact(
    poller,
    servo: int,
    process: subprocess.Popen,
    before: dict,
    start: float,
    seconds: float,
    poll_s: float,
    log: pathlib.Path,
) -> tuple[list, int]:
    """The obstacle's contact series over the window (from ``[0, 0, 0]``) and the readings missed."""
    series, missed = [[0.0, 0.0, 0]], 0
    next_poll = start + poll_s
    while time.monotonic() - start < seconds:
        if process.poll() is not None:
            raise ChildProcessError(f"the launch ended (exit {process.returncode}) during the run: see {log}")
        if time.monotonic() >= next_poll:
            next_poll += poll_s
            try:
                now = poller.state()["servos"][servo]["obstacle"]
            except (OSError, ValueError):  # a busy emulator's late reply: the next reading will do
                missed += 1
            else:
                series.append(_since(before, now, time.monotonic() - start))
        time.sleep(min(0.1, max(0.0, next_poll - time.monotonic())))
    return series, missed


def _since(before: dict, now: dict, t: float) -> list:
    """One reading of the contact series: ``[t, contact_s, contacts]`` since the window's start."""
    return [round(t, 4), round(now["contact_s"] - before["contact_s"], 6), now["contacts"] - before["contacts"]]


def _launched(root: int) -> dict[str, int]:
    """The launch's processes under ``root``: executable name -> pid (a node's script or a module's name)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = pathlib.Path(f"/proc/{entry}/stat").read_text()
            except OSError:  # ended meanwhile
                continue
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = {}, [root]
    while frontier:
        children = [pid for pid, parent in parents.items() if parent in frontier]
        for pid in children:
            try:
                argv = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            # ros2 run's scripts start as `python SCRIPT --ros-args ...` (or SCRIPT itself)
            for arg in argv[:2]:
                found.setdefault(os.path.basename(arg.decode(errors="replace")), pid)
        frontier = children
    return found


def _apply_priorities(root: int, priorities: dict[str, int]) -> dict[str, int]:
    """Give each named process of the launch its FIFO priority, every thread of it.

    Returns:
      name -> the priority its main thread has now (read back).

    Raises:
      ChildProcessError: a process is not under the launch, or would not take its priority.
    """
    pids = _launched(root)
    applied = {}
    for name, priority in priorities.items():
        if name not in pids:
            raise ChildProcessError(f"--priorities: no {name} process under the launch (pid {root})")
        try:
            # Each thread its own: a policy set on a process's pid is its main thread's only.
            for task in os.listdir(f"/proc/{pids[name]}/task"):
                os.sched_setscheduler(int(task), os.SCHED_FIFO, os.sched_param(priority))
            applied[name] = os.sched_getparam(pids[name]).sched_priority
        except OSError as error:
            raise ChildProcessError(
                f"--priorities: {name} (pid {pids[name]}) refused FIFO {priority}: {error}"
            ) from error
    return applied


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
