"""The statistics of `gamma-net reflex realtime-study`: per-run results in, tables and a figure out.

The runs themselves go through ROS processes (:mod:`gamma_net_studies.ros.reflex_realtime`);
what is computed from their JSON is here, without ROS, so it is tested on plain numbers:

- :func:`time_on`: the fraction of a window a rule was on, from its switches;
- :func:`bootstrap_ratio`: the predictive/reactive ratio of mean contact time with a bootstrap
  interval over runs. In real time the same operator seed follows a different path in each
  condition, so runs are not paired: each condition's runs are resampled on their own;
- :func:`summarize`: per start, obstacle and condition mean ± sd, and the ratio, as a
  :class:`Report`. The :data:`SHARED` conditions never read the Horde, so one run per obstacle and
  seed serves every start: each start's tables put the same reactive and none runs beside that
  start's own predictive runs;
- :func:`plot_summary`: contact time per obstacle and condition, each run a dot.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib
from collections.abc import Iterable, Sequence

import numpy as np

from gamma_net_core.report import Report, Table

CONDITIONS = ("none", "reactive", "predictive")
#: The conditions whose commands never depend on the Horde: ``reactive`` (the rule on the present
#: signal) and ``none`` (the predictive rule event-only, fail-safe pass: it never changes a
#: command). Their contact, current and progress are the same whichever start the Horde had, so
#: their runs are made once and used for every start.
SHARED = ("none", "reactive")
#: The Horde's start in the shared runs the study makes: from scratch, which needs no checkpoint.
SHARED_START = "scratch"
#: Per-run quantities in each run's JSON, with their table headings.
QUANTITIES = {
    "contact_s": "contact time (s)",
    "contacts": "contacts",
    "peak_current_a": "peak current (A)",
    "progress_circuits": "progress (circuits)",
    "rule_on_fraction": "rule on (fraction)",
}


def time_on(switches: Iterable[tuple[float, bool]], start: float, end: float, *, on_at_start: bool = False) -> float:
    """The fraction of ``[start, end]`` a rule was on.

    Args:
      switches: ``(time, on)`` each time the rule switched, in time order (times outside the
        window only set the state it starts or ends in).
      start, end: the window, in the switches' clock (``end > start``).
      on_at_start: its state before the first switch.

    Raises:
      ValueError: ``end`` not after ``start``, or switches out of time order.
    """
    if not end > start:
        raise ValueError(f"the window must end after it starts; got {start} .. {end}")
    on, since, total, last = on_at_start, start, 0.0, -math.inf
    for t, active in switches:
        if t < last:
            raise ValueError(f"switches out of time order: {t} after {last}")
        last = t
        t = min(max(t, start), end)
        if on:
            total += t - since
        on, since = bool(active), t
    if on:
        total += end - since
    return total / (end - start)


def bootstrap_ratio(
    numerator: Sequence[float], denominator: Sequence[float], *, resamples: int = 10_000, level: float = 0.95, seed=0
) -> dict:
    """mean(numerator) / mean(denominator) with a percentile bootstrap interval over runs, unpaired.

    Returns:
      ``{"ratio", "low", "high", "runs": [n, m], "undefined": reason or None}``. The ratio is
      undefined (None, with the reason) when the denominator's mean is 0, e.g. a reactive rule
      that never met the obstacle; ``high`` is inf when some resamples' denominators are all 0.
    """
    num, den = np.asarray(numerator, dtype=float), np.asarray(denominator, dtype=float)
    out = {"ratio": None, "low": None, "high": None, "runs": [int(num.size), int(den.size)], "undefined": None}
    if num.size == 0 or den.size == 0:
        out["undefined"] = "no runs"
        return out
    if not np.all(np.isfinite(num)) or not np.all(np.isfinite(den)):
        raise ValueError("contact times must be finite")
    if den.mean() == 0.0:
        out["undefined"] = "the denominator's runs have no contact"
        return out
    rng = np.random.default_rng(seed)
    num_means = num[rng.integers(0, num.size, (resamples, num.size))].mean(axis=1)
    den_means = den[rng.integers(0, den.size, (resamples, den.size))].mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(den_means > 0, num_means / np.where(den_means > 0, den_means, 1.0), np.inf)
    tail = 100.0 * (1.0 - level) / 2.0
    # nearest rank, not interpolated: an inf ratio (a resample without contact) stays inf, never NaN
    low, high = np.percentile(ratios, [tail, 100.0 - tail], method="nearest")
    out.update(ratio=float(num.mean() / den.mean()), low=float(low), high=float(high))
    return out


#: Contact seconds per minute are compared in windows this long (s): long enough for a few
#: overshoots pooled over runs (about one a circuit of about 15 s), short enough to see learning.
WINDOW_S = 30.0
#: The windows' starts are this far apart (s): the resolution of the time to beat.
STEP_S = 1.0


def cumulative_at(series: Sequence[Sequence[float]], times: np.ndarray) -> np.ndarray:
    """A run's cumulative contact time at ``times``, linear between its samples.

    Args:
      series: ``(t, contact_s, ...)`` samples in time order, ``t`` from the run's window start and
        ``contact_s`` the contact time since then (the emulator's counter, polled).

    Raises:
      ValueError: no samples, times out of order, a contact time that decreases or is not finite.
    """
    array = np.asarray([s[:2] for s in series], dtype=float).reshape(-1, 2)
    if array.shape[0] == 0:
        raise ValueError("a contact series needs at least one sample")
    t, c = array[:, 0], array[:, 1]
    if not np.all(np.isfinite(array)):
        raise ValueError("a contact series must be finite")
    if np.any(np.diff(t) < 0) or np.any(np.diff(c) < 0):
        raise ValueError("a contact series must be in time order, its contact time never decreasing")
    if t[0] > 0:  # the counter is read at the window's start: nothing before it
        t, c = np.concatenate([[0.0], t]), np.concatenate([[0.0], c])
    return np.interp(times, t, c)


def window_rates(
    runs: Sequence[Sequence[Sequence[float]]], *, window_s: float, step_s: float, end_s: float
) -> tuple[np.ndarray, np.ndarray]:
    """Each run's contact seconds per minute in sliding windows ``[s, s + window_s]``.

    Returns:
      ``(starts, rates)``: the windows' starts ``0, step_s, ...`` (the last ends at or before
      ``end_s``) and a ``(runs, windows)`` array of contact seconds per minute.
    """
    if not (window_s > 0 and step_s > 0 and end_s >= window_s):
        raise ValueError(f"windows of {window_s} s every {step_s} s need a run of at least that; got {end_s} s")
    starts = np.arange(0.0, end_s - window_s + 1e-9, step_s)
    rates = np.array(
        [60.0 * (cumulative_at(s, starts + window_s) - cumulative_at(s, starts)) / window_s for s in runs]
    ).reshape(len(runs), starts.size)
    return starts, rates


def _first_time_it_stays(beats: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per row, the first window start from which every later window beats; inf where the last does not."""
    stays = np.flip(np.logical_and.accumulate(np.flip(beats, axis=-1), axis=-1), axis=-1)
    first = np.argmax(stays, axis=-1)
    return np.where(stays.any(axis=-1), starts[first], np.inf)


def _beats(predictive: np.ndarray, reactive: np.ndarray, factor: float) -> np.ndarray:
    # A nanosecond a minute of slack: a rate exactly at the factor is not lost to rounding.
    return predictive <= factor * reactive + 1e-9


def time_to_beat(
    predictive: Sequence[Sequence[Sequence[float]]],
    reactive: Sequence[Sequence[Sequence[float]]],
    *,
    window_s: float = WINDOW_S,
    step_s: float = STEP_S,
    factor: float = 0.5,
    resamples: int = 10_000,
    level: float = 0.95,
    seed=0,
) -> dict:
    """The time until the predictive rule first beats the reactive one, and stays ahead, with an interval.

    Each run's contact time since its window's start is sampled as a series (the emulator's
    counter polled every second or two). For each condition the pooled contact rate of a window
    ``[s, s + window_s]`` is the contact seconds per minute in it, averaged over the condition's
    runs. The predictive rule *beats* the reactive one in a window when its pooled rate is at most
    ``factor`` times the reactive rule's (two windows without contact count as beaten: the
    predictive rule did no worse). The time to beat, T, is the earliest window start ``s`` (on
    the grid ``0, step_s, ...``) from which the predictive rule beats the reactive one in that
    window and in every later one up to the end of the shortest run; None ("not within the run")
    when it does not beat it in the last window. T = 0 means it was ahead from the first window.
    With no reactive contact in the whole of the runs there is nothing to beat: T is undefined.

    The interval is a percentile bootstrap over runs, unpaired (each condition's runs resampled on
    their own, as for the contact-time ratio): T of each resample, nearest-rank percentiles; a
    resample in which it never stays ahead counts as later than any run's end, so ``high`` is
    None when more than ``(1 - level) / 2`` of the resamples never do (a resample whose reactive
    runs have no contact counts as never, as its ratio is infinite).

    Returns:
      ``{"T", "low", "high"}`` (s from the window's start, or None: not within the run),
      ``"found"`` (the fraction of resamples in which it stays ahead), ``"runs": [n, m]``,
      ``"window_s"``, ``"step_s"``, ``"end_s"``, ``"factor"``, and ``"rates"``: the windows'
      ``"start"`` times and the pooled ``"predictive"`` and ``"reactive"`` rates (s per minute);
      or ``{"undefined": reason}`` with the rest None when a condition has no series or the
      shortest run is shorter than a window.
    """
    runs = [len(predictive), len(reactive)]
    out = {"T": None, "low": None, "high": None, "found": None, "runs": runs, "undefined": None}
    out.update(window_s=window_s, step_s=step_s, factor=factor, end_s=None, rates=None)
    if not predictive or not reactive:
        out["undefined"] = "no contact series"
        return out
    end_s = min(float(np.asarray([s[0] for s in series]).max(initial=0.0)) for series in [*predictive, *reactive])
    out["end_s"] = end_s
    if end_s < window_s:
        out["undefined"] = f"the shortest run ({end_s:g} s) is shorter than a window ({window_s:g} s)"
        return out
    starts, pred = window_rates(predictive, window_s=window_s, step_s=step_s, end_s=end_s)
    _, react = window_rates(reactive, window_s=window_s, step_s=step_s, end_s=end_s)
    react_total = np.array([cumulative_at(s, np.array([end_s]))[0] for s in reactive])
    if not react_total.sum() > 0:
        out["undefined"] = "the reactive runs have no contact"
        return out
    pooled_pred, pooled_react = pred.mean(axis=0), react.mean(axis=0)
    t = float(_first_time_it_stays(_beats(pooled_pred, pooled_react, factor), starts))
    rng = np.random.default_rng(seed)
    boot_pred = pred[rng.integers(0, pred.shape[0], (resamples, pred.shape[0]))].mean(axis=1)
    chosen = rng.integers(0, react.shape[0], (resamples, react.shape[0]))
    boot_react = react[chosen].mean(axis=1)
    boot = _first_time_it_stays(_beats(boot_pred, boot_react, factor), starts)
    boot[react_total[chosen].sum(axis=1) == 0] = np.inf  # nothing to beat: not shown ahead, as the ratio is inf
    tail = 100.0 * (1.0 - level) / 2.0
    low, high = np.percentile(boot, [tail, 100.0 - tail], method="nearest")
    finite = lambda v: float(v) if math.isfinite(v) else None  # noqa: E731
    out.update(T=finite(t), low=finite(low), high=finite(high), found=float(np.isfinite(boot).mean()))
    out["rates"] = {
        "start": starts.round(6).tolist(),
        "predictive": pooled_pred.round(6).tolist(),
        "reactive": pooled_react.round(6).tolist(),
    }
    return out


def describe_time_to_beat(beat: dict) -> str:
    """``T s (low .. high)``, "not within the run", or why it is undefined, for a table."""
    if beat.get("undefined"):
        return f"undefined: {beat['undefined']}"
    text = lambda v: "not within the run" if v is None else f"{v:g} s"  # noqa: E731
    if beat["T"] is None and beat["high"] is None and beat["low"] is None:
        return "not within the run"
    return f"{text(beat['T'])} ({text(beat['low'])} .. {text(beat['high'])})"


def any_on(switches: Iterable[tuple[str, float, bool]], *, on_at_start: Iterable[str] = ()) -> list[tuple[float, bool]]:
    """Several rules' switches as one: ``(time, on)`` each time *any* rule's being on changes.

    Args:
      switches: ``(rule, time, on)`` in time order.
      on_at_start: the rules on before the first switch.

    Returns:
      ``(time, on)`` in time order, for :func:`time_on` (with ``on_at_start`` = any rule on).
    """
    on = set(on_at_start)
    merged = []
    for rule, t, active in switches:
        was = bool(on)
        (on.add if active else on.discard)(rule)
        if bool(on) != was:
            merged.append((t, bool(on)))
    return merged


def mean_sd(values: Sequence[float], digits: int = 3) -> str:
    """``mean ± sd`` (sample sd, ddof 1; one run: its value ± 0)."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return "-"
    sd = float(v.std(ddof=1)) if v.size > 1 else 0.0
    return f"{v.mean():.{digits}g} ± {sd:.{digits}g}"


def _on_fraction(run: dict) -> float:
    """The fraction of the run any of its rules was on (a predictive run has the reactive floor beside its own)."""
    if "any_rule_on_fraction" in run:
        return float(run["any_rule_on_fraction"])
    fractions = list(run["rule_on_fraction"].values())  # a run of one rule, recorded before the key
    return float(fractions[0]) if fractions else 0.0


#: Each start's name, from a run's ``pretrained`` (a checkpoint's path, or None).
STARTS = ("scratch", "pretrained")
#: The simulated study's reactive contact time per contact (s), which the real-time one must be
#: within 1.5x of: `gamma-net reflex study`, seeds 0-9 pooled, 0.7084 s over 33 contacts
#: (docs/results.md's reflex section; docs/figures/reflex/reflex_study.json and
#: reflex_study_seeds_5_9.json). It has the shoulder obstacle only.
SIMULATED_CONTACT_PER_HIT = {"shoulder": 0.7084 / 33}
#: The issue's "Done when": the ratio at most this, with its interval's upper end below 1 ...
RATIO_GOAL = 0.5
#: ... at most this loss of progress against no reflex ...
PROGRESS_LOSS = 0.05
#: ... and the reactive contact per hit within this factor of the simulated study's.
PER_HIT_FACTOR = 1.5


def start_of(run: dict, default: str = "scratch") -> str:
    """``scratch`` or ``pretrained``: whether the run's Horde started from a checkpoint."""
    if "pretrained" not in run:
        return default
    return "pretrained" if run["pretrained"] else "scratch"


def contact_per_hit(runs: Sequence[dict]) -> float | None:
    """Pooled contact time per contact (s): all the runs' contact time over all their contacts; None without any."""
    contacts = sum(int(r["contacts"]) for r in runs)
    return sum(float(r["contact_s"]) for r in runs) / contacts if contacts else None


def done_when(ratio: dict, progress_change: float | None, per_hit: float | None, simulated: float | None) -> dict:
    """The issue's three checks of one obstacle and start, each ``PASS``, ``FAIL`` or ``n/a`` (with why).

    - ratio: predictive/reactive contact time at most :data:`RATIO_GOAL` and the bootstrap
      interval's upper end below 1 (``n/a`` when the reactive runs met no contact);
    - progress: the predictive rule's progress at most :data:`PROGRESS_LOSS` below no reflex's;
    - per hit: the reactive rule's contact per hit within :data:`PER_HIT_FACTOR` of the simulated
      study's, either way (``n/a`` where the simulated study has no such obstacle, or no contact).
    """
    if ratio["ratio"] is None:
        ratio_check = "n/a"
    else:
        ratio_check = "PASS" if ratio["ratio"] <= RATIO_GOAL and ratio["high"] < 1.0 else "FAIL"
    progress_check = "n/a" if progress_change is None else ("PASS" if progress_change >= -PROGRESS_LOSS else "FAIL")
    if per_hit is None or simulated is None:
        hit_check = "n/a"
    else:
        hit_check = "PASS" if 1.0 / PER_HIT_FACTOR <= per_hit / simulated <= PER_HIT_FACTOR else "FAIL"
    return {"ratio": ratio_check, "progress": progress_check, "per_hit": hit_check}


def runs_of(runs: Sequence[dict], start: str, default: str = "scratch") -> list[dict]:
    """The runs a start's tables use: its own predictive runs and every :data:`SHARED` condition's run."""
    return [r for r in runs if r["condition"] in SHARED or start_of(r, default) == start]


def starts_of(runs: Sequence[dict], default: str = "scratch") -> list[str]:
    """The starts the runs are of: those of the predictive runs (the shared runs serve any), else of all."""
    own = [r for r in runs if r["condition"] not in SHARED] or runs
    return [s for s in STARTS if any(start_of(r, default) == s for r in own)]


def summarize(
    runs: Sequence[dict],
    *,
    seconds: float,
    pretrained: bool = False,
    starts: Sequence[str] | None = None,
    resamples: int = 10_000,
    window_s: float = WINDOW_S,
    step_s: float = STEP_S,
    simulated: dict[str, float | None] | None = None,
    learn_s: float = 0.0,
) -> Report:
    """Tables of the runs: per start and obstacle one row per condition, the ratios, and the checks.

    Args:
      runs: each run's JSON (keys: obstacle, condition, :data:`QUANTITIES`; ``pretrained``, the
        checkpoint or None; ``contact_series`` for the time to beat).
      seconds: each run's length (for the titles).
      pretrained: the start of runs that do not say (no ``pretrained`` key).
      starts: the starts to report (default: :func:`starts_of` the runs). Each start's tables
        use its own predictive runs and all the :data:`SHARED` conditions' runs (one per
        obstacle and seed, whichever start their Horde had); the ``none`` row's rule-on
        fraction, the only number of those runs that is the Horde's, only from the ``none`` runs
        whose Horde had this start ("-" without any).
      window_s, step_s: the time to beat's windows (:func:`time_to_beat`).
      simulated: per obstacle the simulated study's reactive contact per hit (s); default
        :data:`SIMULATED_CONTACT_PER_HIT`.
      learn_s: a from-scratch predictive run's contact counts from this long after its start
        (its Horde's time to learn); the ratio compares contact seconds per minute
        (:func:`counted_contact_rate`), so runs of other lengths compare, and progress compares
        circuits per minute over the whole run. With 0 and runs of one length, the ratio of mean
        contact times and of mean progress.

    Returns:
      Per start: a table per obstacle (mean ± sd over runs per condition) and the ratio table;
      then one table of the issue's checks (:func:`done_when`) and the time to beat per start and
      obstacle. ``data[start][obstacle]`` holds each condition's columns, ``ratio``,
      ``time_to_beat``, ``progress_vs_none``, ``reactive_contact_per_hit`` and ``checks``.
    """
    default = "pretrained" if pretrained else "scratch"
    starts = starts_of(runs, default) if starts is None else list(starts)
    tables, data = [], {}
    checks = _checks_table(window_s, learn_s)
    for start in starts:
        mine = runs_of(runs, start, default)
        learning = learn_s if start == "scratch" else 0.0  # a from-scratch Horde's learning time, not counted
        counted = f", the predictive runs' contact counted from {learning:g} s on" if learning else ""
        ratio_table = Table(
            f"predictive / reactive contact seconds per minute, bootstrap 95 % interval over runs (unpaired), "
            f"{_title(start)}{counted}",
            ["obstacle", "runs (pred, react)", "ratio", "95 % interval", "progress vs reactive"],
        )
        data[start] = {}
        for obstacle in dict.fromkeys(r["obstacle"] for r in mine):
            by = {c: [r for r in mine if r["obstacle"] == obstacle and r["condition"] == c] for c in CONDITIONS}
            table, here = _condition_table(mine, by, obstacle, start, default, seconds)
            tables.append(table)
            data[start][obstacle] = here
            comparison = _Comparison(
                seconds=seconds, learning=learning, resamples=resamples, window_s=window_s, step_s=step_s
            )
            reference = (SIMULATED_CONTACT_PER_HIT if simulated is None else simulated).get(obstacle)
            ratio_row, checks_row = comparison.add(here, by, reference)
            ratio_table.add(obstacle, *ratio_row)
            checks.add(start, obstacle, *checks_row)
        tables.append(ratio_table)
    return Report(tables=[*tables, checks], data=data)


def _title(start: str) -> str:
    return "pretrained" if start == "pretrained" else "learning from scratch"


def _checks_table(window_s: float, learn_s: float) -> Table:
    """The table of :func:`done_when`'s checks and the time to beat, one row per start and obstacle."""
    return Table(
        "the issue's Done when, per start and obstacle: predictive/reactive contact (s per minute) <= 0.5 with the "
        f"95 % interval's upper end < 1{'' if not learn_s else f' (from scratch: counted from {learn_s:g} s on)'}; "
        "progress (circuits per minute) at most 5 % below no reflex's; reactive contact per hit within 1.5x "
        "of the simulated study's; the time from which the predictive rule's contact rate stays at most half "
        f"the reactive rule's ({window_s:g} s windows, pooled over runs, bootstrap 95 %)",
        [
            "start",
            "obstacle",
            "ratio (95 %)",
            "ratio check",
            "progress vs none",
            "progress check",
            "reactive contact per hit (s)",
            "per-hit check",
            "predictive ahead from (95 %)",
        ],
    )


def _condition_table(
    mine: Sequence[dict], by: dict[str, list[dict]], obstacle: str, start: str, default: str, seconds: float
) -> tuple[Table, dict]:
    """One obstacle's table (mean ± sd per condition) and its columns per condition."""
    # Said once per table: which runs are shared, and whose Horde the none row's rule-on is.
    shared = (
        f"; {' and '.join(SHARED)} never read the Horde: their runs are shared by every start, and none's "
        "rule on (the predictive rule's, event only) is given from its runs whose Horde had this start only"
    )
    table = Table(
        f"reflex in real time: {obstacle} obstacle, {_lengths(mine, obstacle, seconds)}, {_title(start)} "
        "(mean ± sd over runs)"
        + (shared if any(r["obstacle"] == obstacle and r["condition"] in SHARED for r in mine) else ""),
        ["condition", "runs", *QUANTITIES.values()],
    )
    here = {}
    for condition, rows in by.items():
        if not rows:
            continue
        # The none rule's on time is its Horde's prediction crossing: another start's Horde is not this one's.
        horde = [r for r in rows if condition != "none" or start_of(r, default) == start]
        columns = {
            k: [_on_fraction(r) for r in horde] if k == "rule_on_fraction" else [float(r[k]) for r in rows]
            for k in QUANTITIES
        }
        table.add(condition, len(rows), *(mean_sd(columns[k]) for k in QUANTITIES))
        here[condition] = columns
    return table, here


@dataclasses.dataclass(frozen=True)
class _Comparison:
    """How one obstacle's predictive runs are compared with its reactive and no-reflex runs."""

    seconds: float
    learning: float
    resamples: int
    window_s: float
    step_s: float

    def add(self, here: dict, by: dict[str, list[dict]], reference: float | None) -> tuple[tuple, tuple]:
        """The ratio, progress, time to beat and checks of one obstacle, put into ``here``.

        Returns:
          The obstacle's cells of the ratio table and of the checks table (after its own name).
        """
        ratio = bootstrap_ratio(
            [counted_contact_rate(r, self.learning, seconds=self.seconds) for r in by["predictive"]],
            [counted_contact_rate(r, seconds=self.seconds) for r in by["reactive"]],
            resamples=self.resamples,
        )
        here["ratio"] = ratio
        progress = {
            c: float(np.mean([progress_rate(r, seconds=self.seconds) for r in by[c]])) if by[c] else None for c in by
        }
        change = _change(progress["predictive"], progress["reactive"])
        runs = f"{ratio['runs'][0]}, {ratio['runs'][1]}"
        shown = "-" if change is None else f"{100 * change:+.1f} %"
        if ratio["ratio"] is None:
            ratio_row = (runs, "undefined", ratio["undefined"], shown)
        else:
            ratio_row = (runs, f"{ratio['ratio']:.2f}", f"{ratio['low']:.2f} .. {ratio['high']:.2f}", shown)
        # A run from before the series were recorded has none: the time to beat uses the runs that do.
        beat = time_to_beat(
            [r["contact_series"] for r in by["predictive"] if r.get("contact_series")],
            [r["contact_series"] for r in by["reactive"] if r.get("contact_series")],
            window_s=self.window_s,
            step_s=self.step_s,
            resamples=self.resamples,
        )
        vs_none = _change(progress["predictive"], progress["none"])
        per_hit = contact_per_hit(by["reactive"]) if by["reactive"] else None
        verdict = done_when(ratio, vs_none, per_hit, reference)
        here.update(
            time_to_beat=beat,
            progress_vs_none=vs_none,
            reactive_contact_per_hit=per_hit,
            simulated_contact_per_hit=reference,
            checks=verdict,
        )
        checks_row = (
            "undefined"
            if ratio["ratio"] is None
            else f"{ratio['ratio']:.2f} ({ratio['low']:.2f} .. {ratio['high']:.2f})",
            verdict["ratio"],
            "-" if vs_none is None else f"{100 * vs_none:+.1f} %",
            verdict["progress"],
            ("-" if per_hit is None else f"{per_hit:.3f}")
            + ("" if reference is None else f" (simulated {reference:.3f})"),
            verdict["per_hit"],
            describe_time_to_beat(beat),
        )
        return ratio_row, checks_row


def counted_contact_rate(run: dict, learn_s: float = 0.0, *, seconds: float | None = None) -> float:
    """A run's contact seconds per minute, counted from ``learn_s`` after its window's start to its end.

    A from-scratch run gives its Horde ``learn_s`` to learn before its contact counts (its
    ``contact_series`` gives the contact before then); runs of any length compare as rates.
    ``seconds``: the run's length where its JSON does not say (``seconds``).
    """
    seconds = float(run.get("seconds", seconds))
    if learn_s <= 0.0:
        return 60.0 * float(run["contact_s"]) / seconds
    if not learn_s < seconds:
        raise ValueError(f"a run of {seconds:g} s has nothing after its first {learn_s:g} s to count")
    if not run.get("contact_series"):
        raise ValueError("counting contact after a learning time needs the run's contact_series")
    before, total = cumulative_at(run["contact_series"], np.array([learn_s, seconds]))
    return 60.0 * float(total - before) / (seconds - learn_s)


def progress_rate(run: dict, *, seconds: float | None = None) -> float:
    """A run's progress in circuits per minute over its whole window (learning included)."""
    return 60.0 * float(run["progress_circuits"]) / float(run.get("seconds", seconds))


def _lengths(runs: Sequence[dict], obstacle: str, seconds: float) -> str:
    """``90 s a run``, or each condition's length where they differ (``predictive 150 s, none 90 s, ...``)."""
    by = {r["condition"]: round(float(r.get("seconds", seconds))) for r in runs if r["obstacle"] == obstacle}
    if len(set(by.values())) <= 1:
        return f"{seconds:g} s a run"
    return "a run " + ", ".join(f"{c} {by[c]:g} s" for c in CONDITIONS if c in by)


def _change(value: float | None, reference: float | None) -> float | None:
    """``value / reference - 1``; None without either or with a reference of 0."""
    if value is None or reference is None or not reference > 0:
        return None
    return value / reference - 1.0


def markdown(tables: Sequence[Table]) -> str:
    """The tables as GitHub markdown, each under its title in bold: ready to paste in docs/results.md."""
    parts = []
    for table in tables:
        lines = [f"**{table.title}**", "", "| " + " | ".join(_markdown_cell(c) for c in table.columns) + " |"]
        lines.append("|" + "---|" * len(table.columns))
        lines += ["| " + " | ".join(_markdown_cell(v) for v in row) + " |" for row in table.rows]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def _markdown_cell(value) -> str:
    text = f"{value:.4g}" if isinstance(value, (float, np.floating)) else str(value)
    return text.replace("|", "\\|")


def plot_time_to_beat(path: pathlib.Path, beats: dict) -> pathlib.Path | None:
    """Pooled contact rate over the run, predictive against reactive, per start and obstacle, with T marked.

    Args:
      beats: ``{(start, obstacle): time_to_beat(...)}``; those without rates are left out.

    Returns:
      ``path``, or None when no pair has rates (nothing drawn).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = {k: b for k, b in beats.items() if b.get("rates")}
    if not shown:
        return None
    fig, axes = plt.subplots(1, len(shown), figsize=(max(6, 4 * len(shown)), 3.5), squeeze=False, layout="constrained")
    for ax, ((start, obstacle), beat) in zip(axes[0], shown.items()):
        rates = beat["rates"]
        ax.plot(rates["start"], rates["reactive"], color="C1", label="reactive")
        ax.plot(rates["start"], np.multiply(rates["reactive"], beat["factor"]), "C1:", label="half the reactive")
        ax.plot(rates["start"], rates["predictive"], color="C2", label="predictive")
        if beat["T"] is not None:
            ax.axvline(beat["T"], color="k", lw=0.8, ls="--", label=f"ahead from {beat['T']:g} s")
        ax.set_title(f"{obstacle}, {start}")
        ax.set_xlabel(f"window start (s), {beat['window_s']:g} s windows")
        ax.set_ylabel("contact s per minute (pooled)")
        ax.legend(fontsize="small")
    fig.suptitle("When the predictive rule gets ahead (ros2 launch, real time)")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_summary(path: pathlib.Path, runs: Sequence[dict], starts: Sequence[str] | None = None) -> pathlib.Path:
    """Contact time per start, obstacle and condition: mean ± sd bars, each run a dot (shared runs in each start's)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    starts = starts_of(runs) if starts is None else starts
    panels = [(s, o) for s in starts for o in dict.fromkeys(r["obstacle"] for r in runs_of(runs, s))]
    fig, axes = plt.subplots(
        1, len(panels), figsize=(max(6, 4 * len(panels)), 3.5), squeeze=False, layout="constrained"
    )
    for ax, (start, obstacle) in zip(axes[0], panels):
        for i, condition in enumerate(CONDITIONS):
            values = [
                r["contact_s"]
                for r in runs_of(runs, start)
                if r["obstacle"] == obstacle and r["condition"] == condition
            ]
            if not values:
                continue
            sd = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
            ax.bar(i, np.mean(values), yerr=sd, color=f"C{i}", alpha=0.6, capsize=4)
            ax.plot(np.full(len(values), i), values, "k.", ms=4)
        ax.set_xticks(range(len(CONDITIONS)), CONDITIONS)
        ax.set_title(f"{obstacle} obstacle, {start}")
        ax.set_ylabel("contact time per run (s)")
    fig.suptitle("The reflex in real time (ros2 launch)")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
