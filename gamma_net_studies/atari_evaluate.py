"""`gamma-net atari evaluate`: the paper's Atari comparison figures from a `gamma-net atari train` run.

For each comparison (:data:`~gamma_net_studies.atari_series.COMPARISONS`: embedding,
embedding activation, matrix embedding, inputs, Γ_t distribution, loss scaling, fixed probes
vs Γ-net, interpolated probes vs Γ-net), as the paper's "Plotting" section describes:

- each run's MSE at each τ against the Monte-Carlo returns over the evaluation points, and
  the correlation between its predictions and the returns along the points in sequence,
  both averaged over the run's steady state: the evaluations made after the first three
  quarters of its transitions (the paper: the last 5M of 20M frames, 10 of 40 evaluations);
- the paper's filter: a series counts only if its correlation is positive (here: the mean
  over seeds, at every τ; :func:`~gamma_net_core.evaluation.is_predictive`); the others are
  named and left out of the MSE panels. The paper does not say whether "positive" is read
  over all τ at once or τ by τ; the first reading drops a series that fails at a single τ
  (at today's scale it drops the reference from every comparison), so the per-τ reading is
  reported beside it (:func:`per_tau_reading`): at each τ, the series whose seed-mean
  correlation is positive there are normalized and compared, and each series' bar averages
  the τ where it passes;
- per τ, the mean MSE over seeds normalized by the largest mean across the series kept, so
  the worst is 1.0; the bars average the normalized means and the normalized variances over
  τ; shading is the min–max over seeds;
- the interpolation comparison is scored at the τ between the probes (1.5, 3.5, ..., 90),
  where the probe networks' predictions are interpolated on the γ or the τ scale
  (:func:`~gamma_net_core.neural.interpolation.interpolate`); it needs Monte-Carlo returns
  at those τ (``gamma-net atari points --taus ...``).

Outputs in ``--out``: ``COMPARISON.png`` (MSE by τ split at τ = 10, bars, correlation; or,
where every series fails the filter, the names of those that failed),
``COMPARISON_learning.png`` (normalized MSE averaged over τ against transitions, the
Atari@200M figures' learning curves), ``predictions_in_time.png`` (the Centipede figure:
predictions along one episode's evaluation points against the Monte-Carlo returns) and
``against_the_mean.png`` (every series' MSE over the variance of the returns in time: below 1 it
beats predicting the points' mean return, and its flatness shows whether training was long
enough) and ``atari_evaluate.json`` (every number).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import pathlib
import warnings
from typing import Any

import numpy as np

from gamma_net_core.report import Report, Table, write_json

#: τ shown in the predictions-in-time figure.
FIGURE_TAUS = (1.0, 5.0, 20.0, 60.0, 100.0)
#: What the paper concluded (Centipede@25M and Atari@200M), for the summary table.
PAPER = {
    "embedding": "little difference; l_embed lowest variance on Centipede, not on other games",
    "embedding_activation": "linear generally slightly better than ReLU (ReLU worse with h_l_embed)",
    "matrix": "matrix learns slower, worse at long τ; ReLU worst",
    "inputs": "γ alone worst; τ and both similar; both best at very short τ, lower variance",
    "distribution": "γ-scale draws worst, mostly at long τ; both scales recommended",
    "scaling": "Centipede: scaling clearly better; other games: better at short τ, worse at long",
    "fixed_vs_gamma_net": "probe networks somewhat more accurate than the Γ-net",
    "interpolation": "interpolated probes (either scale) beat the Γ-net",
}


# ----------------------------------------------------------------------------- loading


@dataclasses.dataclass
class SeriesRuns:
    """Every seed of one series, stacked: predictions [runs, evaluations, points, τ]."""

    name: str
    seeds: list[int]
    transitions: np.ndarray  # [E]
    taus: np.ndarray  # [G]
    predictions: np.ndarray  # [R, E, P, G]
    seconds: list[float]
    stopped: list[str | None]


def load_study(run: str | pathlib.Path, *, seeds: int | None = None) -> tuple[dict[str, Any], dict[str, SeriesRuns]]:
    """``study.json`` and every finished run of a `gamma-net atari train` folder.

    Args:
      seeds: use seeds 0 .. seeds - 1 only (the same seeds for every series); None: every seed found.

    Raises:
      FileNotFoundError: no study in ``run``.
      ValueError: no finished run, or a run of another study or evaluation schedule.
    """
    from gamma_net_studies.atari_series import PREDICTIONS, SERIES, STUDY, RunPredictions

    run = pathlib.Path(run)
    if not (run / STUDY).is_file():
        raise FileNotFoundError(f"no Atari study at {run} ({STUDY} is missing): run `gamma-net atari train` first")
    study = json.loads((run / STUDY).read_text())
    identity = study["identity"]
    series: dict[str, SeriesRuns] = {}
    for name in SERIES:
        files = sorted((run / name).glob(f"seed-*/{PREDICTIONS}"), key=lambda p: int(p.parent.name[5:]))
        files = [f for f in files if seeds is None or int(f.parent.name[5:]) < seeds]
        loaded = [RunPredictions.load(f) for f in files]
        if not loaded:
            continue
        for f, r in zip(files, loaded):
            if r.config.get("study") != identity:
                raise ValueError(f"{f} belongs to another study than {run / STUDY}")
            if not (np.array_equal(r.transitions, loaded[0].transitions) and np.allclose(r.taus, loaded[0].taus)):
                raise ValueError(f"{f}: its evaluation schedule or τ differ from {files[0]}")
        series[name] = SeriesRuns(
            name=name,
            seeds=[int(r.config["seed"]) for r in loaded],
            transitions=loaded[0].transitions,
            taus=loaded[0].taus,
            predictions=np.stack([r.predictions for r in loaded]),
            seconds=[float(r.meta.get("seconds", np.nan)) for r in loaded],
            stopped=[r.meta.get("stopped") for r in loaded],
        )
    if not series:
        raise ValueError(f"{run} holds no finished run (no */seed-*/{PREDICTIONS})")
    return study, series


def load_points(points_dir: str | pathlib.Path, study: dict[str, Any]):
    """The evaluation points and their Monte-Carlo returns; both must be the ones the study trained against."""
    from gamma_net_core.atari.evaluation_points import EvaluationPoints
    from gamma_net_core.atari.policies import file_sha256
    from gamma_net_core.atari.rollouts import MonteCarloReturns

    points_dir = pathlib.Path(points_dir)
    points_file, returns_file = points_dir / "points.npz", points_dir / "returns.npz"
    for f in (points_file, returns_file):
        if not f.is_file():
            raise FileNotFoundError(f"{f} is missing: make it with `gamma-net atari points --out {points_dir}`")
    sha = file_sha256(points_file)
    if sha != study["identity"]["points"]["sha256"]:
        raise ValueError(f"{points_file} is not the set of points the study was trained against (SHA-256 differs)")
    returns = MonteCarloReturns.load(returns_file)
    if returns.config.get("points_sha256") not in (None, sha):
        raise ValueError(f"{returns_file} was computed from other points than {points_file}")
    trained, estimated = study["identity"].get("cumulant", "raw"), returns.config.get("cumulant", "raw")
    if trained != estimated:
        raise ValueError(
            f"the study learned the {trained} reward, {returns_file} holds returns of the {estimated} reward: "
            f"make them with `gamma-net atari points --cumulant {trained}`"
        )
    return EvaluationPoints.load(points_file), returns


# ----------------------------------------------------------------------------- the math


@contextlib.contextmanager
def _quiet():
    """NaN (diverged runs, undefined correlations) is expected here: no warnings about all-NaN slices."""
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def steady_state_count(transitions) -> int:
    """How many of the last evaluations are the steady state: those after 3/4 of the transitions.

    The paper averaged over the last 5M of 20M frames with an evaluation every 500k frames:
    the 10 evaluations at 15.5M ... 20M. At least the last evaluation is always kept.
    """
    t = np.asarray(transitions, dtype=np.float64)
    if t.ndim != 1 or t.size == 0:
        raise ValueError(f"transitions must be a non-empty [E] array; got shape {t.shape}")
    return max(1, int(np.sum(t > 0.75 * t[-1])))


def member_predictions(member, runs: dict[str, SeriesRuns], taus) -> np.ndarray:
    """A comparison member's predictions at ``taus``: [runs, evaluations, points, n_tau].

    A series' own predictions are selected by τ; an interpolated member's come from the probe
    networks' predictions at their own τ, interpolated on the member's scale.
    """
    from gamma_net_core.neural.interpolation import interpolate
    from gamma_net_core.timescales import gamma_from_tau
    from gamma_net_studies.atari_series import columns

    s = runs[member.series]
    taus = np.asarray(taus, dtype=np.float64)
    if member.interpolation is None:
        return s.predictions[..., columns(s.taus, taus, what=f"the {s.name} predictions")]
    R, E, P, G = s.predictions.shape
    values = interpolate(
        np.atleast_1d(gamma_from_tau(s.taus)),
        s.predictions.reshape(-1, G),
        np.atleast_1d(gamma_from_tau(taus)),
        scale=member.interpolation,
    )
    return values.reshape(R, E, P, taus.size)


def learning_curves(predictions: dict[str, np.ndarray], returns) -> dict[str, np.ndarray]:
    """Normalized MSE averaged over τ at every evaluation: label -> [runs, evaluations].

    Per τ, every run's MSE is divided by the largest mean-over-runs MSE of any series at any
    evaluation (the Atari@200M learning curves), then averaged over τ.
    """
    from gamma_net_core.evaluation import scores_at_points

    mse = {label: scores_at_points(p, returns)[0] for label, p in predictions.items()}  # [R, E, n_tau]
    with _quiet():
        top = np.nanmax(np.stack([np.nanmax(np.nanmean(m, axis=0), axis=0) for m in mse.values()]), axis=0)
        return {label: np.mean(m / np.where(top > 0, top, 1.0), axis=-1) for label, m in mse.items()}


@dataclasses.dataclass
class ComparisonResult:
    """One comparison: what was compared, the paper's scores, the learning curves, and notes."""

    spec: Any  # ComparisonSpec
    taus: np.ndarray
    labels: tuple[str, ...]
    missing: tuple[str, ...]  # members whose series was not trained
    points: Any  # PointComparison or None
    steady_mse: dict[str, np.ndarray]  # label -> [runs, n_tau], averaged over the steady state
    curves: dict[str, np.ndarray]  # label -> [runs, evaluations]
    transitions: np.ndarray
    note: str | None = None
    failing: tuple[str, ...] = ()  # series whose correlation fails the filter (dropped unless --no-filter)
    per_tau: PerTauReading | None = None  # the filter read τ by τ, reported beside the all-τ reading

    def to_json(self) -> dict[str, Any]:
        return {
            "title": self.spec.title,
            "taus": self.taus,
            "members": {m.label: {"series": m.series, "interpolation": m.interpolation} for m in self.spec.members},
            "missing": list(self.missing),
            "note": self.note,
            "fails_filter": list(self.failing),
            "result": self.points.to_json() if self.points is not None else None,
            "per_tau_filter": self.per_tau.to_json() if self.per_tau is not None else None,
            "steady_state_mse_by_run": self.steady_mse,
            "learning_curves": {"transitions": self.transitions, "normalized_mse_by_run": self.curves},
        }


@dataclasses.dataclass(frozen=True)
class PerTauReading:
    """The correlation filter read τ by τ: at each τ, only the series predictive there are compared.

    Arrays are [n_series, n_tau] unless noted, series in ``names`` order.
    """

    names: tuple[str, ...]
    taus: np.ndarray  # [n_tau]
    passes: np.ndarray  # bool: seed-mean correlation > 0 at that τ (True where the returns are flat there)
    norm_mean: np.ndarray  # seed-mean MSE / the largest among the series passing at that τ; NaN where it fails
    bar_mean: np.ndarray  # [n_series]: norm_mean averaged over the τ where the series passes (NaN: none)

    @property
    def passed(self) -> np.ndarray:
        """int [n_series]: at how many τ each series passes."""
        return self.passes.sum(axis=1)

    def best(self) -> str | None:
        """The series passing at the most τ, ties broken by the lowest bar; None if none passes anywhere."""
        bars = np.where(np.isfinite(self.bar_mean), self.bar_mean, np.inf)
        order = np.lexsort((bars, -self.passed))
        return self.names[int(order[0])] if self.passed[order[0]] > 0 else None

    def to_json(self) -> dict[str, Any]:
        return {
            "names": list(self.names),
            "taus": self.taus.tolist(),
            "passes": self.passes.tolist(),
            "norm_mean": self.norm_mean.tolist(),
            "bar_mean": self.bar_mean.tolist(),
            "best": self.best(),
        }


def per_tau_reading(errors: dict[str, np.ndarray], correlations: dict[str, np.ndarray], informative, taus):
    """The filter's per-τ reading (see the module docstring).

    Args:
      errors: label -> steady-state MSE [runs, n_tau].
      correlations: label -> steady-state correlation [runs, n_tau].
      informative: bool [n_tau], False where the returns are equal at every point (correlation ignored there).
      taus: [n_tau].

    Returns:
      A :class:`PerTauReading`.
    """
    names = tuple(errors)
    with _quiet():
        mean = np.stack([np.nanmean(np.asarray(errors[n], dtype=np.float64), axis=0) for n in names])
        corr = np.stack([np.mean(np.asarray(correlations[n], dtype=np.float64), axis=0) for n in names])
    informative = np.asarray(informative, dtype=bool)
    passes = np.where(informative[None, :], np.isfinite(corr) & (corr > 0.0), True) & np.isfinite(mean)
    kept = np.where(passes, mean, np.nan)
    with _quiet():
        worst = np.nanmax(kept, axis=0)  # NaN where no series passes
        norm = kept / np.where(worst > 0, worst, 1.0)[None, :]
        bars = np.nanmean(norm, axis=1)
    return PerTauReading(names, np.asarray(taus, dtype=np.float64), passes, norm, bars)


def filtered_comparison(predictions: dict[str, np.ndarray], returns, taus, *, last: int, apply_filter: bool = True):
    """The paper's filter, then its normalized comparison, over each run's last ``last`` evaluations.

    As :func:`~gamma_net_core.evaluation.compare_at_points`, except that the filter looks only at
    the τ where the Monte-Carlo returns differ between points: where they are all equal (e.g.
    no reward one step after any point), correlation is undefined for every series alike and
    says nothing about which is predictive. The MSE is compared at every τ.

    Args:
      predictions: label -> [runs, evaluations, points, n_tau].
      returns: [points, n_tau].
      apply_filter: False keeps every series in the comparison (a diagnosis when the filter drops
        the reference); which series fail it is still returned.

    Returns:
      (PointComparison, informative: bool [n_tau], steady MSE: label -> [runs, n_tau], failing: the
      labels that fail the filter, dropped from the comparison when ``apply_filter``).
    """
    from gamma_net_core.evaluation import PointComparison, compare, is_predictive, scores_at_points

    returns = np.asarray(returns, dtype=np.float64)
    informative = returns.std(axis=0) > 0
    errors, correlations, failing = {}, {}, []
    for label, values in predictions.items():
        mse, corr = scores_at_points(values, returns)  # [runs, evaluations, n_tau]
        with np.errstate(invalid="ignore"):
            mse, corr = mse[:, -last:].mean(axis=1), corr[:, -last:].mean(axis=1)
        errors[label], correlations[label] = mse, corr
        if not (informative.any() and is_predictive(corr[:, informative])):
            failing.append(label)
    excluded = tuple(failing) if apply_filter else ()
    kept = {label: e for label, e in errors.items() if label not in excluded}
    comparison = compare(kept, taus) if kept else None
    return PointComparison(comparison, correlations, excluded), informative, errors, tuple(failing)


def evaluate_comparison(
    spec, runs: dict[str, SeriesRuns], returns, taus, *, last: int, apply_filter: bool = True
) -> ComparisonResult:
    """Score one comparison's members at ``taus`` against ``returns`` [P, n_tau] over the last ``last`` evaluations."""
    taus = np.asarray(taus, dtype=np.float64)
    present = [m for m in spec.members if m.series in runs]
    missing = tuple(m.label for m in spec.members if m.series not in runs)
    transitions = next(iter(runs.values())).transitions
    if len(present) < 2:
        note = f"not run: needs at least two of its series trained; missing {list(missing)}"
        return ComparisonResult(spec, taus, (), missing, None, {}, {}, transitions, note)
    predictions = {m.label: member_predictions(m, runs, taus) for m in present}
    result, informative, steady, failing = filtered_comparison(
        predictions, returns, taus, last=last, apply_filter=apply_filter
    )
    per_tau = per_tau_reading(steady, result.correlations, informative, taus)
    notes = []
    if missing:
        notes.append(f"not trained: {', '.join(missing)}")
    if not informative.all():
        flat = ", ".join(f"{t:g}" for t in taus[~informative])
        notes.append(f"τ {flat}: the returns are equal at every point, so the filter ignores correlation there")
    diverged = [f"{m.label} ({sum(x is not None for x in runs[m.series].stopped)} of {len(runs[m.series].seeds)} seeds)"
                for m in present if any(x is not None for x in runs[m.series].stopped)]  # fmt: skip
    if diverged:
        notes.append(f"training diverged (NaN after it): {', '.join(diverged)}")
    if failing:
        verdict = "dropped by" if apply_filter else "kept (--no-filter) though they fail"
        notes.append(f"{verdict} the positive-correlation filter: {', '.join(failing)}")
    return ComparisonResult(
        spec,
        taus,
        tuple(predictions),
        missing,
        result,
        steady,
        learning_curves(predictions, returns),
        transitions,
        "; ".join(notes) or None,
        failing,
        per_tau,
    )


# ----------------------------------------------------------------------------- figures


def plot_learning_curves(result: ComparisonResult, path: pathlib.Path, *, last: int) -> pathlib.Path:
    """Normalized MSE averaged over τ against transitions: mean over seeds, min–max shading, log scale."""
    from gamma_net_core.plots import pyplot, save_figure

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    x = result.transitions
    for i, label in enumerate(result.labels):
        curves = result.curves[label]
        color = "black" if label == result.spec.reference_label else f"C{i}"
        with _quiet():
            ax.plot(x, np.nanmean(curves, axis=0), "-", color=color, label=label, linewidth=1.2)
            ax.fill_between(x, np.nanmin(curves, axis=0), np.nanmax(curves, axis=0), color=color, alpha=0.12)
    ax.axvspan(x[-last] if last <= x.size else x[0], x[-1], color="gray", alpha=0.08, label="steady state")
    ax.set_yscale("log")
    ax.set_xlabel("transitions observed")
    ax.set_ylabel("normalized MSE, mean over τ")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    ax.set_title(f"{result.spec.title}: learning curves", fontsize=9)
    return save_figure(fig, path)


@dataclasses.dataclass(frozen=True)
class AgainstTheMean:
    """Each series' error as a fraction of predicting the points' mean return: the check that the study measures.

    A network whose MSE is not clearly below the variance of the Monte-Carlo returns (the MSE of
    the best constant) has learned nothing the comparisons could rank. Arrays are over the
    series in ``names`` order.
    """

    names: tuple[str, ...]
    taus: np.ndarray  # [n_tau]
    transitions: np.ndarray  # [E]
    curves: dict[str, np.ndarray]  # name -> [runs, E]: MSE / variance, averaged over τ
    steady: np.ndarray  # [n_series, n_tau]: steady-state MSE / variance, mean over runs
    change: np.ndarray  # [n_series]: fall of the curve from the steady state's first half to its second, / the first

    def to_json(self) -> dict[str, Any]:
        return {
            "names": list(self.names),
            "taus": self.taus,
            "transitions": self.transitions,
            "steady_mse_over_variance": self.steady,
            "steady_state_change": self.change,
            "curves_by_run": self.curves,
        }


def against_the_mean(runs: dict[str, SeriesRuns], returns, taus, *, last: int) -> AgainstTheMean | None:
    """Every series' MSE over the variance of the returns at each τ, in time and in the steady state.

    Args:
      runs: the study's series.
      returns: [P, n_tau] Monte-Carlo returns at ``taus``.
      taus: the probe τ.
      last: evaluations in the steady state (:func:`steady_state_count`).

    Returns:
      None if the returns do not vary at any τ (nothing to compare against).
    """
    from gamma_net_core.evaluation import scores_at_points
    from gamma_net_studies.atari_series import columns

    variance = np.asarray(returns, dtype=np.float64).var(axis=0)
    if not np.any(variance > 0):
        return None
    scale = np.where(variance > 0, variance, np.nan)
    names, curves, steady, change = [], {}, [], []
    for s in runs.values():
        mse = scores_at_points(s.predictions[..., columns(s.taus, taus, what=f"the {s.name} predictions")], returns)[0]
        ratio = mse / scale  # [R, E, n_tau]
        with _quiet():
            curve = np.nanmean(ratio, axis=-1)  # [R, E]
            mean_curve = np.nanmean(curve, axis=0)[-last:]
            half = max(1, last // 2)
            first, second = np.nanmean(mean_curve[: last - half]), np.nanmean(mean_curve[last - half :])
            change.append((first - second) / first if last >= 2 and first > 0 else np.nan)
            steady.append(np.nanmean(ratio[:, -last:, :], axis=(0, 1)))
        names.append(s.name)
        curves[s.name] = curve
    transitions = next(iter(runs.values())).transitions
    return AgainstTheMean(
        tuple(names), np.asarray(taus, dtype=np.float64), transitions, curves, np.stack(steady), np.asarray(change)
    )


def plot_against_the_mean(check: AgainstTheMean, path: pathlib.Path, *, last: int) -> pathlib.Path:
    """MSE / variance of the returns (1: as good as predicting the mean) against transitions, every series."""
    from gamma_net_core.plots import pyplot, save_figure

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7.2, 4.0))
    x = check.transitions
    for i, name in enumerate(check.names):
        color = "black" if name == "reference" else f"C{i % 10}"
        style = "--" if i >= 10 else "-"
        with _quiet():
            ax.plot(x, np.nanmean(check.curves[name], axis=0), style, color=color, label=name, linewidth=1.1)
    ax.axhline(1.0, color="red", linewidth=0.8, linestyle=":", label="predicting the mean")
    ax.axvspan(x[-last] if last <= x.size else x[0], x[-1], color="gray", alpha=0.08, label="steady state")
    ax.set_yscale("log")
    ax.set_xlabel("transitions observed")
    ax.set_ylabel("MSE / variance of the returns, mean over τ")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=6, ncol=2)
    ax.set_title("Every series against predicting the points' mean return (mean over seeds)", fontsize=9)
    return save_figure(fig, path)


def plot_nothing_kept(title: str, failing, path: pathlib.Path) -> pathlib.Path:
    """The figure of a comparison whose every series failed the filter: the verdict, not an empty plot.

    Written where the comparison's figure goes, so a figure of an earlier evaluation in the same
    folder is not left standing beside this evaluation's numbers.
    """
    from gamma_net_core.plots import pyplot, save_figure

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 2.4))
    ax.axis("off")
    ax.set_title(title, fontsize=10)
    ax.text(
        0.5,
        0.5,
        "every series failed the positive-correlation filter:\n"
        + ", ".join(failing)
        + "\n\n(`gamma-net atari evaluate --no-filter` compares them all)",
        ha="center",
        va="center",
        fontsize=9,
        wrap=True,
    )
    return save_figure(fig, path)


def plot_predictions_in_time(runs, points, returns, out: pathlib.Path, *, episode: int) -> pathlib.Path | None:
    """The Centipede figure: the reference Γ-net's (and the probes') final predictions along one episode's points."""
    from gamma_net_core.plots import plot_predictions
    from gamma_net_core.timescales import gamma_from_tau
    from gamma_net_studies.atari_series import columns

    if "reference" not in runs:
        return None
    rows = np.flatnonzero(points.episodes == episode)
    if rows.size < 2:
        raise ValueError(
            f"--episode {episode} has {rows.size} evaluation points; the points hold episodes "
            f"{sorted(set(points.episodes.tolist()))}"
        )
    taus = np.array([t for t in FIGURE_TAUS if np.isclose(returns.taus, t).any()])
    target = returns.returns[rows][:, columns(returns.taus, taus, what="the returns")]
    shown = {}
    for name, label in (("reference", "Γ-net (direct)"), ("probes", "fixed probes")):
        if name in runs and np.isclose(runs[name].taus[:, None], taus[None, :]).any(axis=0).all():
            r = runs[name]
            shown[f"{label}, seed {r.seeds[0]}"] = r.predictions[0, -1][rows][:, columns(r.taus, taus, what=name)]
    return plot_predictions(
        points.steps[rows],
        target,
        shown,
        np.atleast_1d(gamma_from_tau(taus)),
        out / "predictions_in_time.png",
        title=f"End of training: predictions along episode {episode}'s evaluation points; dashed: Monte-Carlo return",
        xlabel="step of the episode",
    )


# ----------------------------------------------------------------------------- the command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--run", required=True, help="folder of `gamma-net atari train --out`")
    parser.add_argument("--points", required=True, help="evaluation points folder (points.npz and returns.npz)")
    parser.add_argument(
        "--out", default=None, help="folder for the figures and atari_evaluate.json (default RUN/evaluation)"
    )
    parser.add_argument("--episode", type=int, default=0, help="episode of the points shown in predictions_in_time.png")
    parser.add_argument("--seeds", type=int, default=None, help="use seeds 0 .. N-1 of every series (default: all)")
    parser.add_argument(
        "--no-filter",
        action="store_true",
        help="keep series that fail the positive-correlation filter in the MSE panels (still named as failing)",
    )


def nanmean(values, axis=None):
    """Mean ignoring NaN (a diverged run, an undefined correlation); NaN where nothing is left, silently."""
    with _quiet():
        return np.nanmean(np.asarray(values, dtype=np.float64), axis=axis)


@dataclasses.dataclass(frozen=True)
class EvaluationInputs:
    """A trained study, its evaluation points and returns, and the columns and steady state read from them."""

    study: dict[str, Any]
    runs: dict[str, SeriesRuns]
    points: Any  # EvaluationPoints
    returns: Any  # PointReturns
    out: pathlib.Path
    probe_taus: np.ndarray
    probe_cols: np.ndarray
    between_cols: np.ndarray | None  # None: the returns hold no τ between the probes
    between_note: str | None
    transitions: np.ndarray
    last: int


def parse_arguments(args: argparse.Namespace) -> None:
    """Check the arguments before anything is read (one-line UsageErrors)."""
    from gamma_net_core.cli import check_range, input_path, output_dir

    check_range("--seeds", args.seeds, low=1)
    check_range("--episode", args.episode, low=0)
    input_path("--run", args.run, kind="dir")
    input_path("--points", args.points, kind="dir")
    output_dir("--out", args.out or pathlib.Path(args.run) / "evaluation")


def load_inputs(args: argparse.Namespace) -> EvaluationInputs:
    """Read the study and the points, check they belong together, and make the output folder."""
    from gamma_net_core.cli import check
    from gamma_net_studies.atari_series import INTERPOLATION_TAUS, columns

    study, runs = load_study(args.run, seeds=args.seeds)
    points, returns = load_points(args.points, study)
    if "reference" in runs:  # the figure along one episode: refused now, not after the other figures
        shown = int(np.sum(points.episodes == args.episode))
        check(
            shown >= 2,
            f"--episode {args.episode} has {shown} evaluation points; the points hold episodes "
            f"{sorted(set(points.episodes.tolist()))}",
        )
    out = pathlib.Path(args.out) if args.out else pathlib.Path(args.run) / "evaluation"
    out.mkdir(parents=True, exist_ok=True)
    for s in runs.values():
        if s.predictions.shape[2] != len(points):
            raise ValueError(
                f"series {s.name} predicted at {s.predictions.shape[2]} points; {args.points} holds {len(points)}"
            )
    probe_taus = np.sort(np.asarray(study["identity"]["reference"]["probe_taus"], dtype=np.float64))
    probe_cols = columns(returns.taus, probe_taus, what=f"{args.points}/returns.npz")
    transitions = next(iter(runs.values())).transitions
    between_note = None
    try:
        between_cols = columns(returns.taus, INTERPOLATION_TAUS, what=f"{args.points}/returns.npz")
    except ValueError as exc:
        between_cols = None
        taus_text = " ".join(f"{t:g}" for t in sorted({*probe_taus.tolist(), *INTERPOLATION_TAUS}))
        between_note = f"not run: {exc}; make the returns with `gamma-net atari points --taus {taus_text}`"
    return EvaluationInputs(
        study,
        runs,
        points,
        returns,
        out,
        probe_taus,
        probe_cols,
        between_cols,
        between_note,
        transitions,
        steady_state_count(transitions),
    )


def comparison_table(spec, result: ComparisonResult, taus: np.ndarray) -> Table:
    """One comparison's steady-state MSE by τ, normalized bars, correlation and filter, per series."""
    pc = result.points
    table = Table(
        f"{spec.title}: steady-state MSE by τ (mean over seeds), normalized bars, correlation\n"
        f"  the paper: {PAPER[spec.name]}" + (f"\n  note: {result.note}" if result.note else ""),
        ["series", "seeds", "bar mean", "bar var", "corr", "filter", "per-τ: passes", "per-τ bar",
         *[f"τ={t:g}" for t in taus]],
    )  # fmt: skip
    for j, label in enumerate(result.labels):
        kept = pc.comparison is not None and label in pc.comparison.names
        i = pc.comparison.names.index(label) if kept else None
        table.add(
            label,
            result.steady_mse[label].shape[0],
            float(pc.comparison.bar_mean[i]) if kept else float("nan"),
            float(pc.comparison.bar_var[i]) if kept else float("nan"),
            float(nanmean(pc.correlations[label])),
            ("fails" if label in result.failing else "passes") + ("" if kept else ", dropped"),
            f"{int(result.per_tau.passed[j])}/{taus.size}",
            float(result.per_tau.bar_mean[j]),
            *nanmean(result.steady_mse[label], axis=0).tolist(),
        )
    return table


def comparison_figures(args: argparse.Namespace, spec, result: ComparisonResult, inputs: EvaluationInputs) -> list[str]:
    """Write one comparison's bar figure (or why nothing is shown) and its learning curves; their paths."""
    from gamma_net_core.plots import compact_png, plot_comparison

    out, pc = inputs.out, result.points
    files = []
    if pc.comparison is None:  # every series failed the filter: say so where its figure would be
        files.append(str(compact_png(plot_nothing_kept(spec.title, result.failing, out / f"{spec.name}.png"))))
    else:
        with _quiet():  # NaN correlation where the returns are equal at every point
            path = plot_comparison(
                pc.comparison,
                out / f"{spec.name}.png",
                title=f"{spec.title} (steady state, {len(next(iter(inputs.runs.values())).seeds)} seeds"
                + (", no filter)" if args.no_filter else ")"),
                correlation=pc.correlations,
                reference=spec.reference_label,
            )
        files.append(str(compact_png(path)))
    files.append(str(compact_png(plot_learning_curves(result, out / f"{spec.name}_learning.png", last=inputs.last))))
    return files


def run_comparisons(
    args: argparse.Namespace, inputs: EvaluationInputs
) -> tuple[dict[str, ComparisonResult], Table, list[Table], list[str]]:
    """Evaluate every comparison: (results, the summary table, a table each, the figures written)."""
    from gamma_net_studies.atari_series import COMPARISONS, INTERPOLATION_TAUS

    transitions, last = inputs.transitions, inputs.last
    files: list[str] = []
    results: dict[str, ComparisonResult] = {}
    tables: list[Table] = []
    summary = Table(
        f"atari evaluate{' (--no-filter)' if args.no_filter else ''}: {len(inputs.points)} points, "
        f"steady state = last {last} of {transitions.size} evaluations "
        f"(after {int(0.75 * transitions[-1])} of {int(transitions[-1])} transitions)",
        ["comparison", "best (lowest bar mean)", "failing the filter", "best, per-τ filter", "not trained"],
    )
    for spec in COMPARISONS:
        if spec.at == "between":
            if inputs.between_cols is None:
                results[spec.name] = ComparisonResult(
                    spec, np.asarray(INTERPOLATION_TAUS), (), (), None, {}, {}, transitions, inputs.between_note
                )
                summary.add(spec.name, "-", "-", "-", "needs returns between the probes")
                continue
            taus, cols = np.asarray(INTERPOLATION_TAUS), inputs.between_cols
        else:
            taus, cols = inputs.probe_taus, inputs.probe_cols
        result = evaluate_comparison(
            spec, inputs.runs, inputs.returns.returns[:, cols], taus, last=last, apply_filter=not args.no_filter
        )
        results[spec.name] = result
        if result.points is None:
            summary.add(spec.name, "-", "-", "-", ", ".join(result.missing) or "-")
            continue
        files.extend(comparison_figures(args, spec, result, inputs))
        tables.append(comparison_table(spec, result, taus))
        pc = result.points
        best = pc.comparison.best() if pc.comparison is not None else "-"
        per_tau_best = result.per_tau.best() or "-"
        summary.add(spec.name, best, ", ".join(result.failing) or "-", per_tau_best, ", ".join(result.missing) or "-")
    return results, summary, tables, files


def against_the_mean_table(check: AgainstTheMean, probe_taus: np.ndarray) -> Table:
    """Each series' steady-state MSE over that of predicting the points' mean return, by τ."""
    against = Table(
        "Against a constant: steady-state MSE / the MSE of predicting the points' mean return (mean over "
        "seeds; below 1 beats the constant), and the curve's fall over the steady state (first half to second; "
        "near 0: flat)",
        ["series", "worst τ", "mean over τ", "fall", *[f"τ={t:g}" for t in probe_taus]],
    )
    for i, name in enumerate(check.names):
        with _quiet():
            worst, mean = float(np.nanmax(check.steady[i])), float(np.nanmean(check.steady[i]))
        against.add(name, worst, mean, float(check.change[i]), *check.steady[i].tolist())
    return against


def noise_table(returns) -> tuple[Table, np.ndarray]:
    """The Monte-Carlo targets by τ, with their noise floor (also returned, by τ)."""
    se = returns.standard_errors
    floor = np.nanmean(se**2, axis=0) if np.isfinite(se).any() else np.full(returns.taus.shape, np.nan)
    noise = Table(
        "Monte-Carlo targets by τ: mean return, the MSE of predicting 0 and of predicting the mean at every point, "
        "and the noise floor (mean squared standard error of the targets)",
        ["τ", "mean return", "MSE of 0", "MSE of the mean", "noise floor"],
    )
    for g, tau in enumerate(returns.taus):
        column = returns.returns[:, g]
        noise.add(float(tau), float(column.mean()), float(np.mean(column**2)), float(column.var()), float(floor[g]))
    return noise, floor


def evaluation_data(
    args: argparse.Namespace,
    inputs: EvaluationInputs,
    results: dict[str, ComparisonResult],
    check: AgainstTheMean | None,
    floor: np.ndarray,
) -> dict[str, Any]:
    """What ``atari_evaluate.json`` holds: the study, the targets, the steady state and every comparison."""
    points, returns, transitions = inputs.points, inputs.returns, inputs.transitions
    return {
        "study": inputs.study,
        "points": {
            "count": len(points),
            "episodes": sorted(set(points.episodes.tolist())),
            "rollouts": returns.config.get("rollouts"),
        },
        "returns": {
            "taus": returns.taus,
            "mean": returns.returns.mean(axis=0),
            "mse_of_zero": np.mean(returns.returns**2, axis=0),
            "mse_of_mean": returns.returns.var(axis=0),
            "noise_floor": floor,
        },
        "steady_state": {"evaluations": inputs.last, "of": int(transitions.size), "transitions": transitions},
        "series": {
            s.name: {"seeds": s.seeds, "seconds": s.seconds, "stopped": s.stopped, "taus": s.taus}
            for s in inputs.runs.values()
        },
        "comparisons": {name: r.to_json() for name, r in results.items()},
        "against_the_mean": check.to_json() if check is not None else None,
        "paper": PAPER,
        "filter_applied": not args.no_filter,
    }


def run(args: argparse.Namespace) -> Report:
    """Parse, read the study and points, run the comparisons, and write the figures, tables and JSON."""
    from gamma_net_core.plots import compact_png

    parse_arguments(args)
    inputs = load_inputs(args)
    results, summary, tables, files = run_comparisons(args, inputs)
    figure = plot_predictions_in_time(inputs.runs, inputs.points, inputs.returns, inputs.out, episode=args.episode)
    if figure is not None:
        files.append(str(compact_png(figure)))
    check = against_the_mean(
        inputs.runs, inputs.returns.returns[:, inputs.probe_cols], inputs.probe_taus, last=inputs.last
    )
    if check is not None:
        files.append(
            str(compact_png(plot_against_the_mean(check, inputs.out / "against_the_mean.png", last=inputs.last)))
        )
        tables.append(against_the_mean_table(check, inputs.probe_taus))
    noise, floor = noise_table(inputs.returns)
    data = evaluation_data(args, inputs, results, check, floor)
    json_path = inputs.out / "atari_evaluate.json"
    files.append(str(write_json(json_path, data, digits=4, compact=True)))  # compact: committed beside the figures
    return Report(
        tables=[summary, *tables, noise],
        data={
            "comparisons": {
                k: {"best": t[1], "dropped": t[2], "best_per_tau_filter": t[3], "not_trained": t[4]}
                for k, t in zip(results, summary.rows)
            }
        },
        files=files,
    )
