"""The statistics of `gamma-net reflex realtime-study`: per-run results in, tables and a figure out.

The runs themselves go through ROS processes (:mod:`gamma_net_ros.studies.reflex_realtime`);
what is computed from their JSON is here, without ROS, so it is tested on plain numbers:

- :func:`time_on`: the fraction of a window a rule was on, from its switches;
- :func:`bootstrap_ratio`: the predictive/reactive ratio of mean contact time with a bootstrap
  interval over runs. In real time the same operator seed follows a different path in each
  condition, so runs are not paired: each condition's runs are resampled on their own;
- :func:`summarize`: per obstacle and condition mean ± sd, and the ratio, as a :class:`Report`;
- :func:`plot_summary`: contact time per obstacle and condition, each run a dot.
"""

from __future__ import annotations

import math
import pathlib
from collections.abc import Iterable, Sequence

import numpy as np

from gamma_net_core.report import Report, Table

CONDITIONS = ("none", "reactive", "predictive")
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


def mean_sd(values: Sequence[float], digits: int = 3) -> str:
    """``mean ± sd`` (sample sd, ddof 1; one run: its value ± 0)."""
    v = np.asarray(values, dtype=float)
    if v.size == 0:
        return "-"
    sd = float(v.std(ddof=1)) if v.size > 1 else 0.0
    return f"{v.mean():.{digits}g} ± {sd:.{digits}g}"


def _on_fraction(run: dict) -> float:
    """The run's own rule's on fraction (one rule a run)."""
    fractions = list(run["rule_on_fraction"].values())
    return float(fractions[0]) if fractions else 0.0


def summarize(runs: Sequence[dict], *, seconds: float, pretrained: bool, resamples: int = 10_000) -> Report:
    """Tables of the runs: per obstacle, one row per condition (mean ± sd), and the ratio table.

    Args:
      runs: each run's JSON (keys: obstacle, condition, and :data:`QUANTITIES`).
      seconds: each run's length (for the titles).
      pretrained: whether the Horde started from a checkpoint (for the titles).
    """
    start = "pretrained" if pretrained else "learning from scratch"
    obstacles = list(dict.fromkeys(r["obstacle"] for r in runs))
    tables, data = [], {}
    ratio_table = Table(
        f"predictive / reactive contact time, bootstrap 95 % interval over runs (unpaired), {start}",
        ["obstacle", "runs (pred, react)", "ratio", "95 % interval", "progress vs reactive"],
    )
    for obstacle in obstacles:
        table = Table(
            f"reflex in real time: {obstacle} obstacle, {seconds:g} s a run, {start} (mean ± sd over runs)",
            ["condition", "runs", *QUANTITIES.values()],
        )
        by = {c: [r for r in runs if r["obstacle"] == obstacle and r["condition"] == c] for c in CONDITIONS}
        data[obstacle] = {}
        for condition, rows in by.items():
            if not rows:
                continue
            columns = {
                k: [(_on_fraction(r) if k == "rule_on_fraction" else float(r[k])) for r in rows] for k in QUANTITIES
            }
            table.add(condition, len(rows), *(mean_sd(columns[k]) for k in QUANTITIES))
            data[obstacle][condition] = columns
        tables.append(table)
        ratio = bootstrap_ratio(
            [r["contact_s"] for r in by["predictive"]], [r["contact_s"] for r in by["reactive"]], resamples=resamples
        )
        data[obstacle]["ratio"] = ratio
        progress = [np.mean([r["progress_circuits"] for r in by[c]]) if by[c] else math.nan for c in CONDITIONS[1:]]
        change = f"{100 * (progress[1] / progress[0] - 1):+.1f} %" if progress[0] > 0 else "-"
        if ratio["ratio"] is None:
            ratio_table.add(
                obstacle, f"{ratio['runs'][0]}, {ratio['runs'][1]}", "undefined", ratio["undefined"], change
            )
        else:
            interval = f"{ratio['low']:.2f} .. {ratio['high']:.2f}"
            ratio_table.add(
                obstacle, f"{ratio['runs'][0]}, {ratio['runs'][1]}", f"{ratio['ratio']:.2f}", interval, change
            )
    return Report(tables=[*tables, ratio_table], data=data)


def plot_summary(path: pathlib.Path, runs: Sequence[dict]) -> pathlib.Path:
    """Contact time per obstacle and condition: mean ± sd bars, each run a dot."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    obstacles = list(dict.fromkeys(r["obstacle"] for r in runs))
    fig, axes = plt.subplots(
        1, len(obstacles), figsize=(max(6, 4 * len(obstacles)), 3.5), squeeze=False, layout="constrained"
    )
    for ax, obstacle in zip(axes[0], obstacles):
        for i, condition in enumerate(CONDITIONS):
            values = [r["contact_s"] for r in runs if r["obstacle"] == obstacle and r["condition"] == condition]
            if not values:
                continue
            sd = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
            ax.bar(i, np.mean(values), yerr=sd, color=f"C{i}", alpha=0.6, capsize=4)
            ax.plot(np.full(len(values), i), values, "k.", ms=4)
        ax.set_xticks(range(len(CONDITIONS)), CONDITIONS)
        ax.set_title(f"{obstacle} obstacle")
        ax.set_ylabel("contact time per run (s)")
    fig.suptitle("The reflex in real time (ros2 launch)")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
