"""The robot-arm study's numbers: per-gamma errors over seeds and the tables printed and saved (Table 2).

Part of `gamma-net arm train` (:mod:`gamma_net_studies.arm_train`).
"""

from __future__ import annotations

import numpy as np

from gamma_net_core.report import Table
from gamma_net_studies.arm_workers import StudySettings

#: The paper's Table 2: gamma -> (Γ-net, baseline) cumulative absolute error.
PAPER_TABLE2 = {0.9: (1025.0, 1124.0), 0.9666: (602.0, 822.0), 0.98333: (379.0, 440.0), 0.99: (273.0, 253.0)}


def summarize(study: dict, settings: StudySettings) -> dict:
    """Per-gamma errors over seeds: each seed's, mean, sample std, the ratio Γ-net / baseline, and references.

    ``constant`` holds the errors of two predictors that ignore the state: the mean of the true
    return over the scored steps (the best constant, known only in hindsight) and zero. A learner
    above the first has learned less about the return than its average.
    """
    runs = study["runs"]
    gammas = np.array(settings.gammas)
    out: dict = {"gammas": list(settings.gammas), "taus": (1.0 / (1.0 - gammas)).tolist()}
    for key in ("gamma_net", "baseline", "gamma_net_all", "baseline_all"):
        e = np.array([r[key] for r in runs])  # [seeds, G]
        out[key] = {
            "by_seed": e,
            "mean": e.mean(0),
            "std": e.std(0, ddof=1) if len(runs) > 1 else np.zeros(len(gammas)),
            "scaled_mean": e.mean(0) * (1.0 - gammas),
        }
    for suffix in ("", "_all"):
        ratio = out[f"gamma_net{suffix}"]["by_seed"] / out[f"baseline{suffix}"]["by_seed"]
        out[f"ratio{suffix}"] = {
            "by_seed": ratio,
            "mean": ratio.mean(0),
            "min": ratio.min(0),
            "max": ratio.max(0),
            "of_means": out[f"gamma_net{suffix}"]["mean"] / out[f"baseline{suffix}"]["mean"],
            "gamma_net_wins": (ratio < 1.0).sum(0),
        }
    # Context for the learners' errors: the best constant (the mean return, known in hindsight) and zero.
    scored = study["returns"][: study["returns"].shape[0] - settings.tail]
    out["constant"] = {"mean": np.abs(scored - scored.mean(0)).sum(0), "zero": np.abs(scored).sum(0)}
    paper = np.array([PAPER_TABLE2.get(g, (np.nan, np.nan)) for g in settings.gammas])
    out["paper"] = {"gamma_net": paper[:, 0], "baseline": paper[:, 1], "ratio": paper[:, 0] / paper[:, 1]}
    return out


def tables(summary: dict, recording: dict, skips: dict, timing: dict, settings: StudySettings, seeds: int):
    rec = Table("recording", ["quantity", "value"], formats={"value": "{:.5g}"})
    for key, value in recording.items():
        rec.add(key, value)
    skip_table = Table("messages skipped, by kind (never reach the learners)", ["kind", "count"])
    for kind, count in skips.items():
        skip_table.add(kind, count)
    skip_table.add("total", sum(skips.values()))

    n = seeds
    table2 = Table(
        f"Table 2: cumulative absolute error after training ({n} seeds: mean ± sample std; last {settings.tail} "
        "steps unscored), next to the paper's",
        [
            "gamma",
            "tau",
            "Γ-net",
            "± std",
            "baseline",
            "± std",
            "ratio Γ/base",
            "ratio min",
            "ratio max",
            "Γ-net better (seeds)",
            "mean-return constant",
            "paper Γ-net",
            "paper baseline",
            "paper ratio",
        ],
        formats={
            "gamma": "{:g}",
            "tau": "{:.4g}",
            "ratio Γ/base": "{:.3f}",
            "ratio min": "{:.3f}",
            "ratio max": "{:.3f}",
            "paper ratio": "{:.3f}",
        },
    )
    g, b, r, p = summary["gamma_net"], summary["baseline"], summary["ratio"], summary["paper"]
    for k, gamma in enumerate(settings.gammas):
        table2.add(
            gamma,
            summary["taus"][k],
            g["mean"][k],
            g["std"][k],
            b["mean"][k],
            b["std"][k],
            r["mean"][k],
            r["min"][k],
            r["max"][k],
            f"{int(r['gamma_net_wins'][k])}/{n}",
            summary["constant"]["mean"][k],
            p["gamma_net"][k],
            p["baseline"][k],
            p["ratio"][k],
        )
    other = Table(
        "the same errors scaled by (1 - gamma) (the trend over gamma compares with the paper's), and over every "
        "step (the return truncated at the recording's end)",
        ["gamma", "Γ-net × (1-γ)", "baseline × (1-γ)", "Γ-net, every step", "baseline, every step", "ratio"],
        formats={"gamma": "{:g}", "ratio": "{:.3f}"},
    )
    ga, ba, ra = summary["gamma_net_all"], summary["baseline_all"], summary["ratio_all"]
    for k, gamma in enumerate(settings.gammas):
        other.add(gamma, g["scaled_mean"][k], b["scaled_mean"][k], ga["mean"][k], ba["mean"][k], ra["mean"][k])
    speed = Table(
        "seconds per seed (in its worker process; numba kernels loaded beforehand)",
        ["quantity", "mean", "max"],
        formats={"mean": "{:.3f}", "max": "{:.3f}"},
    )
    for key in ("gamma_net", "baselines", "train", "evaluate", "warm_up"):
        values = np.array(timing["by_seed"][key])
        speed.add({"train": "train (Γ-net + baselines)"}.get(key, key), float(values.mean()), float(values.max()))
    speed.add("study wall time (all seeds)", timing["wall"], timing["wall"])
    return [rec, skip_table, table2, other, speed]
