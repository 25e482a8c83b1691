"""Error measures of the paper's studies: MSE by tau, normalized comparisons, correlation.

The paper's comparison figures (section "Plotting") are built from, per series (a
configuration) and per probe timescale tau:
- the MSE of each run (seed), then its mean and variance across runs;
- each tau normalized across series by the largest mean (and, separately, the largest
  variance), so that the worst series is 1.0 at every tau;
- a bar per series: the normalized means and normalized variances averaged over tau.
The Atari study also filters configurations by the correlation between predicted and
expected returns along the sequence of evaluation points (positive is required).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np


def mse(predictions, targets, axis=0) -> np.ndarray:
    """Mean squared error along ``axis`` (e.g. over steps or evaluation points)."""
    p = np.asarray(predictions, dtype=np.float64)
    t = np.asarray(targets, dtype=np.float64)
    if p.shape != t.shape:
        raise ValueError(f"predictions {p.shape} and targets {t.shape} must have the same shape")
    return np.mean((p - t) ** 2, axis=axis)


def cumulative_absolute_error(predictions, targets, axis=0) -> np.ndarray:
    """Sum of |prediction - return| along ``axis``: the paper's Table 2 measure."""
    p = np.asarray(predictions, dtype=np.float64)
    t = np.asarray(targets, dtype=np.float64)
    if p.shape != t.shape:
        raise ValueError(f"predictions {p.shape} and targets {t.shape} must have the same shape")
    return np.sum(np.abs(p - t), axis=axis)


def correlation(predictions, targets, axis=0) -> np.ndarray:
    """Pearson correlation along ``axis``; NaN where either side is constant (not predictive)."""
    p = np.asarray(predictions, dtype=np.float64)
    t = np.asarray(targets, dtype=np.float64)
    if p.shape != t.shape:
        raise ValueError(f"predictions {p.shape} and targets {t.shape} must have the same shape")
    pc = p - p.mean(axis=axis, keepdims=True)
    tc = t - t.mean(axis=axis, keepdims=True)
    denom = np.sqrt((pc**2).sum(axis=axis) * (tc**2).sum(axis=axis))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (pc * tc).sum(axis=axis) / np.where(denom > 0, denom, 1.0), np.nan)


@dataclass(frozen=True)
class Comparison:
    """Series compared at the same probe timescales, as in the paper's figures.

    Arrays are [n_series, n_tau] unless noted; series are in ``names`` order.
    """

    names: tuple[str, ...]
    taus: np.ndarray  # [n_tau]
    mean: np.ndarray  # mean over runs of each run's MSE
    var: np.ndarray  # variance over runs
    low: np.ndarray  # min over runs (the figures' shading)
    high: np.ndarray  # max over runs
    norm_mean: np.ndarray  # mean / max over series of mean, per tau
    norm_var: np.ndarray  # var / max over series of var, per tau
    bar_mean: np.ndarray  # [n_series]: norm_mean averaged over tau
    bar_var: np.ndarray  # [n_series]: norm_var averaged over tau

    def best(self) -> str:
        """The paper's ranking: lowest averaged normalized MSE, ties broken by variance."""
        order = np.lexsort((self.bar_var, self.bar_mean))
        return self.names[int(order[0])]

    def to_json(self) -> dict:
        return {
            "names": list(self.names),
            "taus": self.taus.tolist(),
            **{k: getattr(self, k).tolist() for k in ("mean", "var", "low", "high", "norm_mean", "norm_var")},
            "bar_mean": self.bar_mean.tolist(),
            "bar_var": self.bar_var.tolist(),
            "best": self.best(),
        }


def _normalize_by_max(values: np.ndarray) -> np.ndarray:
    top = values.max(axis=0, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(top > 0, values / np.where(top > 0, top, 1.0), 0.0)


def compare(errors: Mapping[str, np.ndarray], taus) -> Comparison:
    """Compare series by their per-run errors at each probe tau.

    Args:
      errors: series name -> [n_runs, n_tau] error of each run (e.g. MSE over the last
        5k steps); runs may differ in number between series.
      taus: the probe timescales [n_tau].
    """
    taus = np.asarray(taus, dtype=np.float64)
    if not errors:
        raise ValueError("compare needs at least one series")
    names = tuple(errors)
    stats = []
    for name in names:
        e = np.asarray(errors[name], dtype=np.float64)
        if e.ndim != 2 or e.shape[1] != taus.shape[0]:
            raise ValueError(f"series {name!r}: errors must be [runs, {taus.shape[0]}]; got {e.shape}")
        stats.append((e.mean(0), e.var(0), e.min(0), e.max(0)))
    mean, var, low, high = (np.stack(s) for s in zip(*stats))
    norm_mean = _normalize_by_max(mean)
    norm_var = _normalize_by_max(var)
    return Comparison(
        names=names,
        taus=taus,
        mean=mean,
        var=var,
        low=low,
        high=high,
        norm_mean=norm_mean,
        norm_var=norm_var,
        bar_mean=norm_mean.mean(axis=1),
        bar_var=norm_var.mean(axis=1),
    )


def scores_at_points(predictions, returns) -> tuple[np.ndarray, np.ndarray]:
    """MSE and correlation along a sequence of evaluation points, per probe τ (the Atari study).

    Args:
      predictions: [..., P, n_tau]: predictions at P evaluation points, in their recorded order
        (leading axes, e.g. runs and checkpoints, are kept).
      returns: [P, n_tau]: the Monte-Carlo returns at the same points (broadcast over leading axes).

    Returns:
      (mse, correlation), each [..., n_tau]; correlation is NaN where predictions are constant.
    """
    p = np.asarray(predictions, dtype=np.float64)
    r = np.asarray(returns, dtype=np.float64)
    if p.ndim < 2 or p.shape[-2:] != r.shape:
        raise ValueError(f"predictions [..., P, n_tau] must end in the returns' shape {r.shape}; got {p.shape}")
    r = np.broadcast_to(r, p.shape)
    return mse(p, r, axis=-2), correlation(p, r, axis=-2)


def is_predictive(correlations) -> bool:
    """The paper's filter: a configuration counts only if its correlation is positive.

    Read here as: the mean over runs of the correlation is positive at every probe τ. A
    network that outputs a constant (the failure the filter exists for) has NaN correlation
    and fails.

    Args:
      correlations: [runs, n_tau] (or [n_tau]).
    """
    c = np.atleast_2d(np.asarray(correlations, dtype=np.float64))
    mean = c.mean(axis=0)
    return bool(np.all(np.isfinite(mean) & (mean > 0.0)))


@dataclass(frozen=True)
class PointComparison:
    """Series compared at evaluation points: the paper's figures after its correlation filter."""

    comparison: Comparison | None  # the series that passed the filter (None if none did)
    correlations: dict[str, np.ndarray]  # every series: [runs, n_tau]
    excluded: tuple[str, ...]  # series whose correlation was not positive

    def to_json(self) -> dict:
        return {
            "comparison": self.comparison.to_json() if self.comparison else None,
            "correlations": {k: v.tolist() for k, v in self.correlations.items()},
            "excluded": list(self.excluded),
        }


def compare_at_points(predictions: Mapping[str, np.ndarray], returns, taus, *, last: int | None = None):
    """MSE by τ, the per-τ normalization and bars, and the correlation filter, from raw predictions.

    Args:
      predictions: series -> [runs, P, n_tau], or [runs, evaluations, P, n_tau] for predictions
        saved during training (the paper evaluates every 500k frames).
      returns: [P, n_tau] Monte-Carlo returns at the evaluation points.
      taus: the probe timescales [n_tau].
      last: with evaluations, average each run's MSE and correlation over the last ``last``
        of them (the paper: the last 5M of 20M frames, i.e. the last 10 evaluations).

    Returns:
      A :class:`PointComparison`.
    """
    errors, correlations, excluded = {}, {}, []
    for name, values in predictions.items():
        v = np.asarray(values, dtype=np.float64)
        if v.ndim not in (3, 4):
            raise ValueError(f"series {name!r}: predictions must be [runs, (evaluations,) P, n_tau]; got {v.shape}")
        err, corr = scores_at_points(v, returns)
        if v.ndim == 4:
            window = slice(-last, None) if last else slice(None)
            err, corr = err[:, window].mean(axis=1), corr[:, window].mean(axis=1)
        correlations[name] = corr
        if is_predictive(corr):
            errors[name] = err
        else:
            excluded.append(name)
    comparison = compare(errors, taus) if errors else None
    return PointComparison(comparison=comparison, correlations=correlations, excluded=tuple(excluded))
