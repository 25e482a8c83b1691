"""Figures as in the paper: comparisons by probe tau (split axis at tau = 10), bars, predictions.

All functions write a PNG and return its path; matplotlib runs headless (Agg).
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping, Sequence

import numpy as np

from gamma_net_core.evaluation import Comparison


def pyplot():
    """matplotlib.pyplot on the headless Agg backend."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def compact_png(path: str | os.PathLike, colors: int = 96) -> pathlib.Path:
    """Rewrite a figure with an adaptive palette: a few times smaller, visually the same (line plots)."""
    from PIL import Image

    path = pathlib.Path(path)
    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=colors, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    small.save(path, optimize=True)
    return path


def _by_tau_axes(fig, spec, taus: np.ndarray, split_at: float | None):
    """One axis, or two sharing y with the x-axis split at ``split_at`` (the paper's tau plots)."""
    if split_at is None or not (taus.min() < split_at < taus.max()):
        return [fig.add_subplot(spec)]
    inner = spec.subgridspec(1, 2, wspace=0.0)
    left = fig.add_subplot(inner[0])
    right = fig.add_subplot(inner[1], sharey=left)
    left.set_xlim(taus.min() - 0.5, split_at)
    right.set_xlim(split_at, taus.max() + 2)
    right.axvline(split_at, color="black", linewidth=1.2)
    right.tick_params(labelleft=False)
    left.set_xticks([t for t in taus if t <= split_at], [f"{t:g}" for t in taus if t <= split_at])
    right.set_xticks([t for t in taus if t > split_at], [f"{t:g}" for t in taus if t > split_at])
    return [left, right]


def plot_comparison(
    comparison: Comparison,
    path: str | os.PathLike,
    *,
    title: str,
    correlation: Mapping[str, np.ndarray] | None = None,
    split_at: float | None = 10.0,
    reference: str | None = None,
) -> pathlib.Path:
    """The paper's comparison figure: normalized MSE by tau, the averaged bars, and correlation.

    Args:
      comparison: from :func:`gamma_net_core.evaluation.compare`.
      correlation: optional series name -> [n_runs, n_tau] correlations (third panel: mean, min-max shading).
      split_at: tau where the x-axis splits into a short- and a long-timescale half (None: one axis).
      reference: series drawn in black (the paper's reference configuration).
    """
    plt = pyplot()
    panels = 3 if correlation else 2
    fig = plt.figure(figsize=(5.2 * panels, 3.6))
    grid = fig.add_gridspec(1, panels, width_ratios=[1.4, 1.0] + ([1.4] if correlation else []), wspace=0.3)
    taus = comparison.taus
    colors = {name: f"C{i}" for i, name in enumerate(comparison.names)}
    if reference in colors:
        colors[reference] = "black"
    top = comparison.mean.max(axis=0, keepdims=True)
    low = comparison.low / np.where(top > 0, top, 1.0)
    high = comparison.high / np.where(top > 0, top, 1.0)
    axes = _by_tau_axes(fig, grid[0], taus, split_at)
    for ax in axes:
        for i, name in enumerate(comparison.names):
            ax.plot(taus, comparison.norm_mean[i], "o-", color=colors[name], label=name, markersize=3)
            ax.fill_between(taus, low[i], high[i], color=colors[name], alpha=0.12, linewidth=0)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("normalized MSE")
    axes[0].set_title("MSE by tau", loc="left")
    fig.text(0.5 * grid[0].get_position(fig).x0 + 0.5 * grid[0].get_position(fig).x1, 0.01, "tau (steps)", ha="center")
    axes[0].legend(fontsize=7, loc="best")

    bar_ax = fig.add_subplot(grid[1])
    x = np.arange(len(comparison.names))
    bar_ax.bar(x - 0.2, comparison.bar_mean, 0.4, label="mean", color=[colors[n] for n in comparison.names])
    bar_ax.bar(x + 0.2, comparison.bar_var, 0.4, label="variance", color="lightgray", edgecolor="gray")
    bar_ax.set_xticks(x, comparison.names, rotation=30, ha="right", fontsize=8)
    bar_ax.set_title("average normalized MSE | variance", loc="left", fontsize=9)
    bar_ax.grid(axis="y", alpha=0.3)

    if correlation:
        corr_axes = _by_tau_axes(fig, grid[2], taus, split_at)
        for ax in corr_axes:
            for name, values in correlation.items():
                v = np.atleast_2d(np.asarray(values, dtype=np.float64))
                ax.plot(taus, np.nanmean(v, axis=0), "o-", color=colors.get(name), label=name, markersize=3)
                ax.fill_between(taus, np.nanmin(v, axis=0), np.nanmax(v, axis=0), color=colors.get(name), alpha=0.12)
            ax.set_ylim(-0.05, 1.05)
            ax.grid(alpha=0.3)
        corr_axes[0].set_title("correlation", loc="left")
    fig.suptitle(title)
    return save_figure(fig, path)


def plot_predictions(
    steps: np.ndarray,
    returns: np.ndarray,
    predictions: Mapping[str, np.ndarray],
    gammas: Sequence[float],
    path: str | os.PathLike,
    *,
    title: str,
    scaled: bool = True,
    xlabel: str = "step",
) -> pathlib.Path:
    """Predictions against the true return, one panel per gamma (as the paper's square-wave and arm figures).

    Args:
      steps: [T] x values (steps or seconds).
      returns: [T, G] true returns.
      predictions: series name -> [T, G] predicted returns.
      scaled: show values times (1 - gamma), as the paper does "for display purposes".
    """
    plt = pyplot()
    gammas = np.asarray(gammas, dtype=np.float64)
    scale = (1.0 - gammas) if scaled else np.ones_like(gammas)
    fig, axes = plt.subplots(len(gammas), 1, figsize=(9, 1.9 * len(gammas)), sharex=True, squeeze=False)
    for k, ax in enumerate(axes[:, 0]):
        ax.plot(steps, returns[:, k] * scale[k], "--", color="C0", label="return", linewidth=1.2)
        for i, (name, values) in enumerate(predictions.items()):
            ax.plot(steps, values[:, k] * scale[k], color=f"C{i + 1}", label=name, linewidth=1.0)
        tau = 1.0 / (1.0 - gammas[k])
        ax.set_ylabel(f"γ={gammas[k]:.5g}\nτ={tau:.3g}", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=7, loc="upper right", ncol=1 + len(predictions))
    axes[-1, 0].set_xlabel(xlabel)
    fig.suptitle(title + (" (values × (1-γ))" if scaled else ""))
    return save_figure(fig, path)


def save_figure(fig, path) -> pathlib.Path:
    """Write ``fig`` as a PNG (folders made as needed) and close it."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    pyplot().close(fig)
    return path
