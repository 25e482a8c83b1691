"""`gamma-net horde thresholds`: how an alert's threshold sets its lead time and its false alarms, from a recording.

An alert compares a question's (1 - gamma) V at one tau (the average of its signal over about
the next tau steps, in the signal's units: what ``PredictionView.average`` reads) with a
threshold. On a recording (sampled as ``horde train`` and the node sample it), this command
predicts that value at every fresh tick, finds the events the alert should foresee (a signal
crossing a level, ``--event``; a field's topic is sampled on the same clock, and its staleness
skips ticks as any topic's does), and tabulates per threshold the median lead time before the
events caught, the events caught and the false alarms per minute
(:mod:`gamma_net_core.horde.thresholds` defines each).

The predictions are a learner's after one pass over the recording (its final weights, as a
node resumed from the saved ``horde.npz`` predicts), or those of ``--checkpoint`` (e.g. one
trained on another recording: the honest test of a threshold). Outputs in ``--out``:
``horde_thresholds.json`` (every number), ``horde_thresholds.png`` (lead, events caught and false
alarms per minute against the threshold) and, when it trained one, ``horde.npz``.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import pathlib
import sys
from typing import Any

import numpy as np

from gamma_net_core.paths import config_file
from gamma_net_core.report import Report, Table, write_json

#: Default alarm window, in units of tau: (1 - gamma) V weighs the next 3 tau steps with 95% of its weight.
WINDOW_TAUS = 3.0
#: Default number of candidate thresholds (at quantiles of the prediction).
N_THRESHOLDS = 12
#: The column the event's signal is sampled in when it is a field, not a question.
EVENT_COLUMN = "__event__"


@dataclasses.dataclass(frozen=True)
class EventSpec:
    """An event: ``signal`` crossing ``level`` in ``direction``.

    Attributes:
      question: the question whose cumulant (after its transform) is the signal; or None.
      topic: the topic of a field signal (with ``field``), when ``question`` is None.
      field: the field of ``topic`` (e.g. ``effort[wrist]``).
      direction: ``above`` or ``below``.
      level: the level, in the signal's units.
    """

    question: str | None
    topic: str | None
    field: str | None
    direction: str
    level: float

    def describe(self) -> str:
        what = self.question if self.question is not None else f"{self.topic} {self.field}"
        return f"{what} {self.direction} {self.level:g}"


def parse_event(text: str) -> EventSpec:
    """``"QUESTION above|below LEVEL"`` or ``"TOPIC FIELD above|below LEVEL"``.

    Raises:
      ValueError: one line naming the text and the form expected.
    """
    words = text.split()
    form = "'QUESTION above|below LEVEL' or 'TOPIC FIELD above|below LEVEL'"
    if len(words) not in (3, 4) or words[-2] not in ("above", "below"):
        raise ValueError(f"--event {text!r}: expected {form}")
    try:
        level = float(words[-1])
    except ValueError:
        raise ValueError(f"--event {text!r}: the level {words[-1]!r} is not a number") from None
    if not math.isfinite(level):
        raise ValueError(f"--event {text!r}: the level must be finite")
    if len(words) == 3:
        return EventSpec(question=words[0], topic=None, field=None, direction=words[1], level=level)
    if not words[0].startswith("/"):
        raise ValueError(f"--event {text!r}: a topic starts with '/' (expected {form})")
    return EventSpec(question=None, topic=words[0], field=words[1], direction=words[2], level=level)


def sampling_spec(spec, event: EventSpec, bag: pathlib.Path):
    """``spec`` with the event's field as one more (unlearned) column, its type as the bag has it."""
    from gamma_net_core.data.bags import BagError, open_reader
    from gamma_net_core.horde.fields import parse_field
    from gamma_net_core.horde.questions import Cumulant, Question

    if event.question is not None:
        return spec
    parse_field(event.field)  # a malformed field path is named before the bag is read
    reader = open_reader(bag)
    try:
        found = {c.topic: c.msgtype for c in reader.connections}
    finally:
        reader.close()
    if event.topic not in found:
        raise BagError(f"--event: {bag} has no topic {event.topic!r}; its topics: {sorted(found) or 'none'}")
    column = Question(EVENT_COLUMN, Cumulant(topic=event.topic, type=found[event.topic], field=event.field))
    return dataclasses.replace(spec, questions=(*spec.questions, column))


def learn(spec, signals, *, progress: bool):
    """A Horde learner after one pass over the recording's transitions (as ``horde train``)."""
    from tqdm import tqdm

    from gamma_net_core.horde.learner import HordeLearner
    from gamma_net_core.horde.policies import PolicyReadings
    from gamma_net_core.horde.train_command import stream_of

    stream = stream_of(signals)
    horde = HordeLearner.from_spec(spec)
    Q = len(spec.questions)
    n = stream.index.shape[0]
    for k in tqdm(range(n), desc="learning", unit="step", file=sys.stderr, disable=not progress):
        # Off-policy questions: A_t counted into the behaviour's estimates, then its rho weighs S_t -> S_{t+1}.
        rhos = None if stream.policy is None else horde.ratios(PolicyReadings(*stream.policy[k][:, :Q]))
        try:
            horde.learn(stream.states_t[k], stream.cumulants[k, :Q], stream.states_tp1[k], stream.continuations[k, :Q],
                        rhos=rhos)  # fmt: skip
        except FloatingPointError as exc:
            raise ValueError(f"the learner diverged at transition {k} of {n}: {exc}") from None
    return horde


def predict_average(horde, signals, question: int, tau: float, *, progress: bool) -> np.ndarray:
    """[T] (1 - gamma) V of ``question`` at ``tau`` at every usable tick; NaN elsewhere."""
    from tqdm import tqdm

    out = np.full(signals.times.shape[0], np.nan)
    ticks = np.flatnonzero(signals.usable)
    for t in tqdm(ticks, desc="predicting", unit="tick", file=sys.stderr, disable=not progress):
        out[t] = horde.predict(signals.inputs[t], taus=[tau])[question, 0] / tau
    return out


def plot(path: pathlib.Path, rows: list[dict], *, title: str) -> pathlib.Path:
    from gamma_net_core.plots import compact_png, pyplot, save_figure

    plt = pyplot()
    h = [r["threshold"] for r in rows]
    fig, axes = plt.subplots(3, 1, figsize=(5.5, 6.0), sharex=True)
    panels = [
        ("median_lead_s", "median lead (s)", "o-"),
        ("caught_percent", "events caught (%)", "s-"),
        ("false_alarms_per_minute", "false alarms / min", "^-"),
    ]
    for ax, (key, label, style) in zip(axes, panels):
        ax.plot(h, [np.nan if r[key] is None else r[key] for r in rows], style, ms=4)
        ax.set_ylabel(label, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    axes[1].set_ylim(-5, 105)
    axes[-1].set_xlabel("threshold on (1 - γ) V (the signal's units)", fontsize=8)
    axes[0].set_title(title, fontsize=8)
    fig.tight_layout()
    return compact_png(save_figure(fig, path))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bag", required=True, help="a rosbag2 directory (or .mcap/.db3/.bag) holding the topics")
    parser.add_argument("--questions", default=None, help="the questions file (default: the shipped config/horde.yaml)")
    parser.add_argument(
        "--checkpoint", default=None, help="a trained learner of those questions (horde.npz); default: learn one pass"
    )
    parser.add_argument("--question", default=None, help="the alert's question (default: the event's question)")
    parser.add_argument("--tau", type=float, required=True, help="the alert's timescale, steps (<= tau_max)")
    parser.add_argument(
        "--event",
        required=True,
        help="what the alert should foresee: 'QUESTION above|below LEVEL' (its cumulant) or "
        "'TOPIC FIELD above|below LEVEL' (e.g. '/joint_states effort[wrist] above 1.5')",
    )
    parser.add_argument(
        "--thresholds", type=float, nargs="+", default=None, help="thresholds to score (default: chosen)"
    )
    parser.add_argument(
        "--n-thresholds",
        type=int,
        default=N_THRESHOLDS,
        help="without --thresholds: this many, at quantiles of the prediction from its median to its tail",
    )
    parser.add_argument(
        "--window-s",
        type=float,
        default=None,
        help=f"an alarm at most this long before an event catches it (default {WINDOW_TAUS:g} tau)",
    )
    parser.add_argument(
        "--false-alarms-per-min",
        type=float,
        default=None,
        help="the false alarms per minute you accept: the closing line names the threshold catching the most "
        "events within it (default: any)",
    )
    parser.add_argument(
        "--min-gap-s",
        type=float,
        default=0.0,
        help="a debounce: an event less than this long after the last one is the same event (default 0: none)",
    )
    parser.add_argument("--out", required=True, help="folder for the JSON, the figure and the learner")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


@dataclasses.dataclass(frozen=True)
class _Alert:
    """What the arguments ask, checked: the alert's question and timescale, its events and windows."""

    spec: Any
    question: str
    event: EventSpec
    window_s: float
    window: int
    min_gap: int


def run(args: argparse.Namespace) -> Report:
    from gamma_net_core.horde.learner import HordeLearner
    from gamma_net_core.horde.sampling import read_signals
    from gamma_net_core.horde.thresholds import crossings, quantile_thresholds, score_thresholds

    alert = _configure(args)
    spec, event, names = alert.spec, alert.event, list(alert.spec.names)
    bag = pathlib.Path(args.bag)
    # A checkpoint of other questions is refused before the bag is read.
    horde = HordeLearner.load(args.checkpoint, spec=spec) if args.checkpoint is not None else None
    signals = read_signals(bag, sampling_spec(spec, event, bag))
    if horde is None:
        horde = learn(spec, signals, progress=not args.no_progress)
    average = predict_average(horde, signals, names.index(alert.question), args.tau, progress=not args.no_progress)
    signal = signals.cumulants[:, names.index(event.question) if event.question is not None else len(names)]
    events = crossings(signal, event.level, direction=event.direction, valid=signals.usable, min_gap=alert.min_gap)
    thresholds = (
        np.asarray(args.thresholds, dtype=np.float64)
        if args.thresholds
        else quantile_thresholds(average, args.n_thresholds, direction=event.direction, valid=signals.usable)
    )
    scores = score_thresholds(
        average, events, thresholds, window=alert.window, direction=event.direction, valid=signals.usable
    )
    table, rows = _table(scores, alert, args.tau, len(events), float(signals.usable.sum()) / spec.rate_hz / 60.0)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    files = [] if args.checkpoint is not None else [horde.save(out / "horde.npz")]
    data = _data(args, alert, signals, events, rows, bag)
    line = summary(rows, args.false_alarms_per_min)
    cumulant = signals.cumulants[:, names.index(alert.question)]  # what the alert's (1 - gamma) V averages
    warning = range_warning(rows, args.false_alarms_per_min, cumulant[signals.usable & np.isfinite(cumulant)])
    if warning:
        data["warnings"] = [warning]
        print(f"warning: {warning}", file=sys.stderr)
    title = f"{alert.question}, (1 - γ) V at tau {args.tau:g}; events: {event.describe()} ({len(events)})"
    files.append(plot(out / "horde_thresholds.png", rows, title=title))
    files.append(write_json(out / "horde_thresholds.json", data))
    return Report(tables=[table], data=data, files=[str(f) for f in files], summary=line)


def _configure(args: argparse.Namespace) -> _Alert:
    """The arguments checked, each refusal one line: the questions, the alert and its event."""
    from gamma_net_core.cli import UsageError, check, check_range, input_path, output_dir
    from gamma_net_core.horde.questions import load_questions

    output_dir("--out", args.out)  # before the learning, not after it
    input_path("--bag", args.bag)
    input_path("--checkpoint", args.checkpoint, kind="file")
    check_range("--tau", args.tau, low=1.0)
    check_range("--window-s", args.window_s, low=0.0)
    check_range("--min-gap-s", args.min_gap_s, low=0.0)
    check_range("--false-alarms-per-min", args.false_alarms_per_min, low=0.0)
    check(args.n_thresholds >= 1, f"--n-thresholds must be >= 1; got {args.n_thresholds}")
    for h in args.thresholds or ():
        check_range("--thresholds", h)
    try:
        event = parse_event(args.event)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.questions is None:
        args.questions = str(config_file("horde"))
    spec = load_questions(args.questions)
    names = list(spec.names)
    check(
        event.question is None or event.question in names,
        f"--event: no question {event.question!r} in {args.questions}; its questions: {names} "
        "(or give 'TOPIC FIELD above|below LEVEL')",
    )
    question = args.question if args.question is not None else event.question
    check(question is not None, "--question: name the alert's question (the event names a field, not a question)")
    check(question in names, f"--question {question!r} is not in {args.questions}; its questions: {names}")
    check(
        args.tau <= spec.timescales.tau_max,
        f"--tau {args.tau:g} is beyond the trained tau_max {spec.timescales.tau_max:g}",
    )
    window_s = WINDOW_TAUS * args.tau / spec.rate_hz if args.window_s is None else args.window_s
    min_gap = round((args.min_gap_s or 0.0) * spec.rate_hz)
    return _Alert(spec, question, event, window_s, round(window_s * spec.rate_hz), min_gap)


def _table(scores, alert: _Alert, tau: float, n_events: int, minutes: float) -> tuple[Table, list[dict]]:
    """The table of the thresholds scored, and each one's row of numbers for the JSON."""
    rate, event = alert.spec.rate_hz, alert.event
    table = Table(
        f"Alarms where {alert.question}'s (1 - γ) V at tau {tau:g} goes {event.direction} the threshold; events: "
        f"{event.describe()} ({n_events} in {minutes:.3g} min); caught: an alarm at most {alert.window_s:g} s before",
        ["threshold", "median lead (s)", "caught", "caught (%)", "false alarms", "false / min", "alarms", "on (%)"],
        formats={"caught (%)": "{:.0f}", "on (%)": "{:.1f}", "median lead (s)": "{:.3g}", "false / min": "{:.3g}"},
    )
    rows = []
    for s in scores:
        row = {
            "threshold": s.threshold,
            "median_lead_s": s.median_lead_s(rate),
            "leads_s": (s.leads / rate).tolist(),
            "events": s.events,
            "caught": s.caught,
            "caught_percent": 100.0 * s.caught_fraction,
            "alarms": s.alarms,
            "false_alarms": s.false_alarms,
            "false_alarms_per_minute": s.false_alarms_per_minute(rate),
            "unscored_alarms": s.unscored_alarms,
            "alarm_on_percent": 100.0 * s.alarm_fraction,
        }
        rows.append(row)
        table.add(
            s.threshold,
            row["median_lead_s"],
            f"{s.caught}/{s.events}",
            row["caught_percent"],
            s.false_alarms,
            row["false_alarms_per_minute"],
            s.alarms,
            row["alarm_on_percent"],
        )
    return table, rows


def _data(args: argparse.Namespace, alert: _Alert, signals, events: np.ndarray, rows: list[dict], bag) -> dict:
    """Every number of the run, for horde_thresholds.json."""
    rate = alert.spec.rate_hz
    return {
        "bag": str(bag),
        "questions_file": str(args.questions),
        "checkpoint": args.checkpoint,
        "question": alert.question,
        "tau": float(args.tau),
        "compared": "(1 - gamma) V: the average of the cumulant over about the next tau steps, in its units",
        "event": {**dataclasses.asdict(alert.event), "text": alert.event.describe()},
        "rate_hz": rate,
        "window_s": alert.window_s,
        "window_steps": alert.window,
        "min_gap_s": float(args.min_gap_s or 0.0),
        "min_gap_steps": alert.min_gap,
        "ticks": int(signals.times.shape[0]),
        "valid_ticks": int(signals.usable.sum()),
        "minutes": float(signals.usable.sum()) / rate / 60.0,
        "skips": signals.skips,
        "events": len(events),
        "event_times_s": (signals.times[events] - signals.times[0]).tolist(),
        "rows": rows,
    }


def range_warning(rows: list[dict], budget: float | None, signal: np.ndarray) -> str:
    """A warning when the threshold :func:`summary` names lies outside the range the question's cumulant took.

    (1 - gamma) V averages the cumulant, so it lies within the cumulant's range once learned: a threshold
    outside it (e.g. below 0 for a 0/1 bumper) is one the learner has not learned its way to yet.
    """
    best = best_row(rows, budget)
    if best is None or signal.size == 0:
        return ""
    low, high = float(np.min(signal)), float(np.max(signal))
    if low <= best["threshold"] <= high:
        return ""
    return (
        f"the threshold {best['threshold']:.4g} lies outside the range the question's cumulant took "
        f"[{low:.4g}, {high:.4g}]: the predictions are not yet averages of it (learn longer, or check the "
        "learner's settings) before an alert relies on it"
    )


def summary(rows: list[dict], budget: float | None = None) -> str:
    """One line: the threshold that catches the most events within ``budget`` false alarms per minute.

    Ties go to the fewest false alarms, then the longest median lead.
    """
    within = "" if budget is None else f" within {budget:g} false alarms/min"
    best = best_row(rows, budget)
    if best is None:
        return f"no threshold caught an event{within}: try other thresholds, a longer --window-s or another tau"
    return (
        f"most events caught{within}: threshold {best['threshold']:.4g} catches "
        f"{best['caught']}/{best['events']} with median lead {best['median_lead_s']:.3g} s and "
        f"{best['false_alarms_per_minute']:.3g} false alarms/min"
    )


def best_row(rows: list[dict], budget: float | None = None) -> dict | None:
    """The row catching the most events within ``budget`` false alarms per minute (None if none catches one).

    Ties go to the fewest false alarms, then the longest median lead.
    """
    fits = [r for r in rows if (budget is None or r["false_alarms_per_minute"] <= budget) and r["caught"]]
    return max(fits, key=lambda r: (r["caught"], -r["false_alarms"], r["median_lead_s"]), default=None)
