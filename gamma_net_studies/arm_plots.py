"""The robot-arm study's Table 2 figure. Part of `gamma-net arm train` (:mod:`gamma_net_studies.arm_train`)."""

from __future__ import annotations

import pathlib

import numpy as np


def plot_table2(path: pathlib.Path, summary: dict, gammas) -> pathlib.Path:
    """Errors by gamma (mean, each seed) and the ratio Γ-net / baseline against the paper's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.arange(len(gammas))
    labels = [f"{g:g}" for g in gammas]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
    for i, (key, name, color) in enumerate((("gamma_net", "Γ-net", "C1"), ("baseline", "baseline", "C2"))):
        e = summary[key]
        offset = -0.18 if i == 0 else 0.18
        ax.bar(x + offset, e["mean"], 0.36, color=color, label=name, alpha=0.85)
        for row in e["by_seed"]:
            ax.plot(x + offset, row, "k.", markersize=3)
    ax.plot(x, summary["constant"]["mean"], "_", color="k", markersize=28, mew=2, label="mean-return constant")
    ax.set_xticks(x, labels)
    ax.set_xlabel("γ")
    ax.set_ylabel("cumulative |prediction − return|")
    ax.set_title("error after training (bars: mean; dots: seeds)", fontsize=9)
    ax.legend(fontsize=8)
    ratio = summary["ratio"]
    for row in ratio["by_seed"]:
        bx.plot(x, row, ".", color="C1", alpha=0.6, markersize=5)
    bx.plot(x, ratio["mean"], "o-", color="C1", label="this study (mean; dots: seeds)")
    bx.plot(x, summary["paper"]["ratio"], "s--", color="k", label="paper (Table 2)")
    bx.axhline(1.0, color="0.5", lw=1)
    bx.set_xticks(x, labels)
    bx.set_xlabel("γ")
    bx.set_ylabel("Γ-net / baseline")
    bx.set_title("below 1: the Γ-net is better", fontsize=9)
    bx.legend(fontsize=8)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
