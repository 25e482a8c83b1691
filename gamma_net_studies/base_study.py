"""`gamma-net reflex base-study`: a predictive rule against a range rule on a mobile base.

A differential-drive base (:mod:`gamma_net_core.signals.base`: a 36-beam LaserScan, a bumper,
odometry, a command latency, acceleration and deceleration limits, a watchdog) wanders a room
with a scripted operator who now and then heads for a wall at speed, straight or obliquely.
Conditions, on the same seeds and for the same simulated time:

- ``none``: no reflex;
- ``reactive``: the range rule of ``config/base_reflex_rules.yaml`` (``front_too_close``: the
  nearest front beam below 0.35 m now holds forward driving);
- ``predictive``: the prediction rule of that file (``near_front_ahead``: (1 - gamma) V of
  "something within 0.35 m ahead" at its tau above its threshold holds forward driving), on its
  own, its Horde (``config/base_reflex_questions.yaml``: the front, left and right ranges and the
  measured speed) pretrained on a recording without a reflex (another seed), learning online;
- ``scratch``: the same rule and Horde, learning from nothing during the run.

Each setting (the operator's dash speed, the base's deceleration limit and command latency) is
run in every condition. Reported per condition: bumps a minute, contact time, distance a minute
and the rule's time on; per setting the predictive/reactive ratio of bumps a minute with a
bootstrap 95 % interval over runs (:func:`gamma_net_studies.reflex_realtime_stats.bootstrap_ratio`)
and the distance ratio (a rule that stops too often locks the base: within 10 % of the reactive
rule's is "no lock").

The loop is the core parts the nodes wrap (base, operator, Horde learner, reflex rules) stepped
at the Horde's rate in simulated time: the same seeds give the same numbers. The node path
(``base_emulator``, the Horde, the reflex) is what ``launch/base.launch.py`` starts.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import pathlib
from types import SimpleNamespace

import numpy as np

from gamma_net_core.cli import check, check_range, output_dir
from gamma_net_core.horde.learner import HordeLearner
from gamma_net_core.horde.questions import HordeSpec, load_questions
from gamma_net_core.paths import config_file
from gamma_net_core.reflex.commands import TWIST_AXES
from gamma_net_core.reflex.evaluation import ReflexState
from gamma_net_core.reflex.rules import RuleSet, load_rules
from gamma_net_core.report import Report, Table
from gamma_net_core.signals.base import BaseConfig, SimulatedBase, WanderConfig, WanderOperator
from gamma_net_studies.reflex_realtime_stats import bootstrap_ratio

CONDITIONS = ("none", "reactive", "predictive", "scratch")
#: The conditions whose rule is the prediction: pretrained and from scratch.
PREDICTIVE = ("predictive", "scratch")
FIGURE_NAME = "base_study.png"
AXES = ("linear.x", "angular.z")  # what the operator commands and the base takes
#: Recording seeds are this far from the runs' so that no run repeats the recording's path.
WARMUP_SEED = 10_000
QUANTITIES = ("bumps_per_min", "contact_s_per_min", "distance_m_per_min", "rule_on_fraction", "dashes_per_min")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seeds", type=int, default=10, help="operator seeds, the same for every condition")
    parser.add_argument("--first-seed", type=int, default=0, help="seeds are first-seed, first-seed + 1, ...")
    parser.add_argument("--minutes", type=float, default=5.0, help="simulated minutes per run")
    parser.add_argument(
        "--warmup-minutes", type=float, default=10.0, help="minutes of the recording the pretrained Horde learns"
    )
    parser.add_argument(
        "--dash-speed", type=float, nargs="+", default=[0.7], help="m/s the operator heads for walls at (a sweep)"
    )
    parser.add_argument(
        "--deceleration", type=float, nargs="+", default=[1.0], help="m/s^2, the base's braking limit (a sweep)"
    )
    parser.add_argument("--latency-s", type=float, nargs="+", default=[0.1], help="s from command to wheels (a sweep)")
    parser.add_argument(
        "--threshold", type=float, default=None, help="the prediction rule's threshold (default: file's)"
    )
    parser.add_argument("--rules", default=None, help="rules YAML (default config/base_reflex_rules.yaml)")
    parser.add_argument("--questions", default=None, help="questions YAML (default config/base_reflex_questions.yaml)")
    parser.add_argument("--out", required=True, help="folder for the figure and the pretrained Hordes")


@dataclasses.dataclass(frozen=True)
class Setting:
    """One point of the sweep: how fast the operator dashes and how the base brakes."""

    dash_speed: float
    """m/s; the operator's speed when heading for a wall."""
    deceleration: float
    """m/s^2; the base's braking limit."""
    latency_s: float
    """s; command to wheels."""

    @property
    def label(self) -> str:
        """The setting in one short line."""
        return f"dash {self.dash_speed:g} m/s, braking {self.deceleration:g} m/s², latency {self.latency_s:g} s"

    def base(self) -> BaseConfig:
        """The base with this setting's limits (its speed limit at least the dash speed)."""
        defaults = BaseConfig()
        return dataclasses.replace(
            defaults,
            deceleration=self.deceleration,
            latency_s=self.latency_s,
            max_linear=max(defaults.max_linear, self.dash_speed),
        )

    def operator(self) -> WanderConfig:
        """The operator with this setting's dash speed."""
        return dataclasses.replace(WanderConfig(), dash_speed=self.dash_speed)


def run(args: argparse.Namespace) -> Report:
    check_range("--seeds", args.seeds, low=1)
    check_range("--first-seed", args.first_seed, low=0)
    check_range("--minutes", args.minutes, above=0.0)
    check_range("--warmup-minutes", args.warmup_minutes, low=0.0)
    for flag, values in (("--dash-speed", args.dash_speed), ("--deceleration", args.deceleration)):
        for value in values:
            check_range(flag, value, above=0.0, high=3.0)
    for value in args.latency_s:
        check_range("--latency-s", value, low=0.0, high=2.0)
    check_range("--threshold", args.threshold)
    out = output_dir("--out", args.out)
    spec = load_questions(args.questions or config_file("base_reflex_questions"))
    rule_set = load_rules(args.rules or config_file("base_reflex_rules"), questions=spec, joint_names=TWIST_AXES)
    rules = study_rules(rule_set, threshold=args.threshold)
    out.mkdir(parents=True, exist_ok=True)
    settings = [Setting(*s) for s in itertools.product(args.dash_speed, args.deceleration, args.latency_s)]
    seconds, seeds = 60.0 * args.minutes, range(args.first_seed, args.first_seed + args.seeds)
    results, files = [], []
    for i, setting in enumerate(settings):
        warm = warm_up(spec, setting, seconds=60.0 * args.warmup_minutes)
        warm_path = warm.save(out / f"warm_horde_{i}.npz")
        files.append(str(warm_path))
        runs = {c: [] for c in CONDITIONS}
        for seed in seeds:
            for condition in CONDITIONS:
                learner = None
                if condition == "predictive":
                    learner = HordeLearner.load(warm_path)
                elif condition == "scratch":
                    learner = HordeLearner.from_spec(spec, rng=np.random.default_rng(spec.seed))
                runs[condition].append(
                    run_condition(setting, spec, rules[condition], learner, seed=seed, seconds=seconds)
                )
        results.append((setting, runs))
    figure = out / FIGURE_NAME
    plot_runs(figure, results)
    return _report(results, args, rules["predictive"], [str(figure), *files])


def study_rules(
    rule_set: RuleSet, *, threshold: float | None = None, scale: float | None = None
) -> dict[str, RuleSet | None]:
    """Each condition's rules: the file's first signal rule (reactive) or first prediction rule alone.

    Args:
      threshold: the prediction rule's threshold instead of the file's (its release scaled with it).
      scale: the prediction rule's response scale instead of the file's (0 stops, 0.3 slows to 30 %).
    """
    reactive = next((r for r in rule_set.rules if r.source == "signal"), None)
    predictive = next((r for r in rule_set.rules if r.source == "prediction" and r.tau is not None), None)
    check(
        reactive is not None and predictive is not None, "the rules need a signal rule and a prediction rule at a tau"
    )
    if threshold is not None:
        release = predictive.release * threshold / predictive.threshold if predictive.threshold else threshold
        predictive = dataclasses.replace(predictive, threshold=threshold, release=release)
    if scale is not None:
        predictive = dataclasses.replace(predictive, response=dataclasses.replace(predictive.response, scale=scale))
    return {
        "none": None,
        "reactive": RuleSet((reactive,), rule_set.stale_after_s),
        "predictive": RuleSet((predictive,), rule_set.stale_after_s),
        "scratch": RuleSet((predictive,), rule_set.stale_after_s),
    }


def _messages(base: SimulatedBase, ranges: np.ndarray, odometry) -> dict[str, SimpleNamespace]:
    """What the emulator publishes, by topic, as plain objects the questions' field paths resolve in."""
    c = base.config
    twist = SimpleNamespace(linear=SimpleNamespace(x=odometry.linear), angular=SimpleNamespace(z=odometry.angular))
    pose = SimpleNamespace(position=SimpleNamespace(x=odometry.x, y=odometry.y))
    return {
        "scan": SimpleNamespace(ranges=ranges.tolist(), range_min=c.range_min, range_max=c.range_max),
        "odom": SimpleNamespace(twist=SimpleNamespace(twist=twist), pose=SimpleNamespace(pose=pose)),
        "bumper": SimpleNamespace(data=bool(base.bumper)),
    }


def _by_topic(spec: HordeSpec, messages: dict) -> dict:
    """Each topic the questions read -> its message, by the topic's last name (``/base/scan`` -> scan)."""
    out = {}
    for topic in spec.topics():
        name = topic.rstrip("/").rsplit("/", 1)[-1]
        if name not in messages:
            raise ValueError(f"the base publishes scan, odom and bumper; the questions read {topic!r}")
        out[topic] = messages[name]
    return out


def signals(spec: HordeSpec, messages: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The Horde's state inputs, cumulants and continuations from the base's messages by topic."""
    inputs = np.array([s.read(messages[s.topic]) for s in spec.state])
    cumulants = np.array([q.cumulant.read(messages[q.cumulant.topic]) for q in spec.questions])
    continuations = np.array(
        [
            1.0
            if q.termination is None
            else q.termination.continuation(q.termination.resolve(messages[q.termination.topic]))
            for q in spec.questions
        ]
    )
    return inputs, cumulants, continuations


def warm_up(spec: HordeSpec, setting: Setting, *, seconds: float, seed: int = WARMUP_SEED) -> HordeLearner:
    """A Horde learner after ``seconds`` of the base wandering without a reflex (a user's recording)."""
    learner = HordeLearner.from_spec(spec, rng=np.random.default_rng(spec.seed))
    if seconds > 0:
        run_condition(setting, spec, None, learner, seed=seed, seconds=seconds)
    return learner


def run_condition(
    setting: Setting,
    spec: HordeSpec,
    rule_set: RuleSet | None,
    learner: HordeLearner | None,
    *,
    seed: int,
    seconds: float,
) -> dict:
    """One run: the operator drives for ``seconds`` with the reflex of ``rule_set`` (None: none).

    Args:
      learner: learns online through the run (None: no Horde); required when a rule is a prediction.

    Returns:
      Per minute: bumps, contact seconds, metres travelled, the operator's dashes; and the
      fraction of ticks the rule was on.
    """
    rules = rule_set.rules if rule_set is not None else ()
    if learner is None and any(r.source == "prediction" for r in rules):
        raise ValueError("a prediction rule needs a learner")
    base = SimulatedBase(setting.base(), rng=np.random.default_rng(seed))
    operator = WanderOperator(setting.operator(), rng=np.random.default_rng([seed, 1]))
    reflex = ReflexState(rule_set) if rule_set is not None else None
    q_index = [spec.names.index(r.question) for r in rules]
    dt = 1.0 / spec.rate_hz
    steps, on_steps = round(seconds * spec.rate_hz), 0
    for step in range(steps):
        now = step * dt
        ranges, odometry, bumper = base.scan(), base.odometry(), base.bumper
        inputs, cumulants, continuations = signals(spec, _by_topic(spec, _messages(base, ranges, odometry)))
        if learner is not None:
            learner.step(inputs, cumulants, continuations)
        command = np.array(operator.observe(now, ranges, odometry, bumper, dt))
        if reflex is not None:
            for i, (rule, q) in enumerate(zip(rules, q_index)):
                value = (
                    learner.predict(inputs, taus=[rule.tau])[q, 0] / rule.tau
                    if rule.source == "prediction"
                    else cumulants[q]
                )
                reflex.observe(i, float(value), now)  # (1 - gamma) V for a prediction, the signal now for a range
            reflex.decide(now)
            command = reflex.apply(AXES, command)
            on_steps += any(s.on for s in reflex.status)
        base.command(float(command[0]), float(command[1]))
        base.step(dt)
    minutes = seconds / 60.0
    counters = base.counters
    return {
        "bumps_per_min": counters.bumps / minutes,
        "contact_s_per_min": counters.contact_s / minutes,
        "distance_m_per_min": counters.distance_m / minutes,
        "rule_on_fraction": on_steps / steps,
        "dashes_per_min": operator.dashes / minutes,
    }


def _column(runs: list[dict], key: str) -> np.ndarray:
    return np.array([r[key] for r in runs], dtype=float)


def _fmt_ratio(ratio: dict) -> str:
    if ratio["ratio"] is None:
        return f"- ({ratio['undefined']})"
    return f"{ratio['ratio']:.2f} [{ratio['low']:.2f}, {ratio['high']:.2f}]"


def _report(results: list, args: argparse.Namespace, predictive: RuleSet, files: list[str]) -> Report:
    rule = predictive.rules[0]
    seeds = f"seeds {args.first_seed}..{args.first_seed + args.seeds - 1} x {args.minutes:g} min"
    tables, data = (
        [],
        {"settings": [], "rule": {"question": rule.question, "tau": rule.tau, "threshold": rule.threshold}},
    )
    summary_table = Table(
        f"base study: predictive/reactive per setting ({seeds}; bootstrap 95 % intervals over runs)",
        ["setting", "start", "bumps ratio [95 %]", "distance ratio", "done (<= 0.5x, high < 1, no lock)"],
    )
    lines = []
    for setting, runs in results:
        table = Table(
            f"base study: {setting.label} ({seeds})",
            ["condition", "bumps / min", "contact s / min", "m / min", "rule on", "dashes / min"],
        )
        entry = {"setting": dataclasses.asdict(setting), "conditions": {}, "ratios": {}}
        for condition in CONDITIONS:
            columns = {k: _column(runs[condition], k) for k in QUANTITIES}
            table.add(
                condition,
                *(f"{columns[k].mean():.3g} ± {columns[k].std():.2g}" for k in QUANTITIES[:3]),
                f"{columns['rule_on_fraction'].mean():.3f}",
                f"{columns['dashes_per_min'].mean():.2f}",
            )
            entry["conditions"][condition] = {k: v.round(5).tolist() for k, v in columns.items()}
        reactive = runs["reactive"]
        for start in PREDICTIVE:
            ratio = bootstrap_ratio(_column(runs[start], "bumps_per_min"), _column(reactive, "bumps_per_min"))
            distance = (
                _column(runs[start], "distance_m_per_min").mean() / _column(reactive, "distance_m_per_min").mean()
            )
            done = ratio["ratio"] is not None and ratio["ratio"] <= 0.5 and ratio["high"] < 1.0 and distance >= 0.9
            summary_table.add(setting.label, start, _fmt_ratio(ratio), f"{distance:.3f}", "yes" if done else "no")
            entry["ratios"][start] = {"bumps": ratio, "distance": float(distance), "done": bool(done)}
            lines.append(f"{start} {_fmt_ratio(ratio)} at {setting.label}")
        tables.append(table)
        data["settings"].append(entry)
    summary = "predictive/reactive bumps a minute: " + "; ".join(lines)
    return Report(tables=[*tables, summary_table], data=data, files=files, summary=summary)


def plot_runs(path: pathlib.Path, results: list) -> None:
    """Bumps and distance a minute, each run a dot, per setting and condition."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(max(6, 2.5 * len(results) + 2), 7), layout="constrained", sharex=True)
    width = 0.8 / len(CONDITIONS)
    rng = np.random.default_rng(0)  # jitter only
    for s, (_, runs) in enumerate(results):
        for c, condition in enumerate(CONDITIONS):
            x = s + (c - (len(CONDITIONS) - 1) / 2) * width
            for ax, key in zip(axes, ("bumps_per_min", "distance_m_per_min")):
                values = _column(runs[condition], key)
                jitter = rng.uniform(-0.25, 0.25, values.size) * width
                ax.scatter(x + jitter, values, s=10, color=f"C{c}", label=condition if s == 0 else None)
                ax.plot([x - width / 2.5, x + width / 2.5], [values.mean()] * 2, color=f"C{c}", lw=2)
    axes[0].set_ylabel("bumps / min")
    axes[1].set_ylabel("distance (m / min)")
    axes[1].set_xticks(range(len(results)), [s.label.replace(", ", "\n") for s, _ in results], fontsize=8)
    axes[0].legend(fontsize=8)
    fig.suptitle("A mobile base: no reflex, a range rule, a predictive rule (pretrained, from scratch)")
    fig.savefig(path, dpi=110)
    plt.close(fig)
