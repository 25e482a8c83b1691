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
