"""The Atari study's configurations, comparisons and run files (`gamma-net atari train` / `evaluate`).

The paper's Atari section compares Γ-net configurations against one reference
configuration — direct embedding, γ and τ/τ_max inputs, Γ_t drawn on both scales, loss
scaling — each series changing a single setting of it ("For each of the other
configurations only a single setting was modified from this reference"), plus the
fixed-timescale probe networks (same architecture, no timescale input, loss scaling). The
reference is read from the neural predictor's YAML (``config/atari.yaml``, section
``neural_predictor``, group ``learner``), so the study and the ROS node learn with the same
settings; :data:`SERIES` holds each series' one change.

A run directory (``gamma-net atari train --out RUN``) holds ``study.json`` (what every run
shares: the reference learner, the data, the evaluation schedule) and, per series and seed,
``SERIES/seed-K/predictions.npz`` (:class:`RunPredictions`) and ``SERIES/seed-K/learner.pt``
(the final :class:`~gamma_net_core.neural.learner.NeuralLearner` checkpoint, which the
``neural_predictor`` node can resume from).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from collections.abc import Mapping
from typing import Any

import numpy as np

#: The YAML section the study's reference comes from (the neural predictor node's).
NODE, GROUP = "neural_predictor", "learner"
#: The paper's "Estimation by Interpolation": τ between the probe timescales.
INTERPOLATION_TAUS = (1.5, 3.5, 7.5, 15.0, 30.0, 50.0, 70.0, 90.0)
#: What the comparisons assume of the reference (the paper's reference configuration).
REFERENCE_SETTINGS = {
    "network": "gamma_net",
    "embedding": "direct",
    "embedding_activation": "linear",
    "timescale_inputs": "both",
    "scaling": "delta",
}


@dataclasses.dataclass(frozen=True)
class Series:
    """One configuration: the reference with ``changes`` applied.

    Attributes:
      name: its directory name and the key of ``--series``.
      changes: NeuralConfig fields that differ from the reference ("distribution" series are
        computed from the reference's number of draws, see :func:`series_config`).
      cost: time per update relative to the reference (measured here, 1 thread): orders the work.
    """

    name: str
    changes: Mapping[str, Any]
    cost: float = 1.0


SERIES: dict[str, Series] = {
    s.name: s
    for s in (
        Series("reference", {}),
        Series("l_embed", {"embedding": "l_embed"}),
        Series("h_l_embed", {"embedding": "h_l_embed"}, 1.25),
        Series("l_embed_relu", {"embedding": "l_embed", "embedding_activation": "relu"}),
        Series("h_l_embed_relu", {"embedding": "h_l_embed", "embedding_activation": "relu"}, 1.25),
        Series("matrix", {"embedding": "matrix"}, 4.5),
        Series("matrix_relu", {"embedding": "matrix", "embedding_activation": "relu"}, 4.5),
        Series("input_gamma", {"timescale_inputs": "gamma"}),
        Series("input_tau", {"timescale_inputs": "tau"}),
        Series("draws_gamma", {"draws": "gamma"}),
        Series("draws_tau", {"draws": "tau"}),
        Series("unscaled", {"scaling": "none"}),
        Series("scaled_theta", {"scaling": "delta_theta"}),
        Series("probes", {"network": "probes"}, 2.0),
    )
}


@dataclasses.dataclass(frozen=True)
class Member:
    """One curve of a comparison figure.

    Attributes:
      label: its name in the figure (the paper's words).
      series: the trained series it comes from.
      interpolation: for ``probes`` at timescales between them: ``gamma`` or ``tau``, the scale the
        bracketing probes are interpolated on; None: the series' own predictions.
    """

    label: str
    series: str
    interpolation: str | None = None


@dataclasses.dataclass(frozen=True)
class ComparisonSpec:
    """One of the paper's comparison figures: its members and the timescales it is scored at."""

    name: str
    title: str
    members: tuple[Member, ...]
    at: str = "probe"  # "probe": the probe τ; "between": INTERPOLATION_TAUS

    @property
    def reference_label(self) -> str | None:
        """The member drawn in black (the paper's reference configuration)."""
        return next((m.label for m in self.members if m.series == "reference"), None)


COMPARISONS: tuple[ComparisonSpec, ...] = (
    ComparisonSpec(
        "embedding",
        "Embedding (Γ-nets and the fixed-timescale probes)",
        (
            Member("direct", "reference"),
            Member("l_embed", "l_embed"),
            Member("h_l_embed", "h_l_embed"),
            Member("fixed probes", "probes"),
        ),
    ),
    ComparisonSpec(
        "embedding_activation",
        "Linear and ReLU embedding activations",
        (
            Member("direct", "reference"),
            Member("l_embed", "l_embed"),
            Member("l_embed ReLU", "l_embed_relu"),
            Member("h_l_embed", "h_l_embed"),
            Member("h_l_embed ReLU", "h_l_embed_relu"),
        ),
    ),
    ComparisonSpec(
        "matrix",
        "Matrix embedding",
        (Member("direct", "reference"), Member("2D_l_embed", "matrix"), Member("2D_relu_embed", "matrix_relu")),
    ),
    ComparisonSpec(
        "inputs",
        "Timescale inputs",
        (Member("gamma", "input_gamma"), Member("tau", "input_tau"), Member("both", "reference")),
    ),
    ComparisonSpec(
        "distribution",
        "Gamma_t distribution",
        (Member("gamma scale", "draws_gamma"), Member("tau scale", "draws_tau"), Member("both scales", "reference")),
    ),
    ComparisonSpec(
        "scaling",
        "Loss scaling",
        (
            Member("none", "unscaled"),
            Member("scaled delta", "reference"),
            Member("scaled delta and theta", "scaled_theta"),
        ),
    ),
    ComparisonSpec(
        "fixed_vs_gamma_net",
        "Fixed-timescale probes vs Γ-net",
        (Member("Γ-net (direct)", "reference"), Member("fixed probes", "probes")),
    ),
    ComparisonSpec(
        "interpolation",
        "Interpolated probes vs Γ-net, between the probe timescales",
        (
            Member("Γ-net (direct)", "reference"),
            Member("probes, gamma interpolation", "probes", "gamma"),
            Member("probes, tau interpolation", "probes", "tau"),
        ),
        at="between",
    ),
)


def parse_series(text: str) -> list[str]:
    """``--series``: ``all`` or comma-separated names, in :data:`SERIES` order.

    Raises:
      ValueError: an unknown name (the message lists the known ones), or none given.
    """
    names = [s.strip() for s in text.split(",") if s.strip()]
    if names == ["all"]:
        return list(SERIES)
    unknown = [n for n in names if n not in SERIES]
    if unknown or not names:
        raise ValueError(f"unknown series {unknown or [text]!r}; known: {', '.join(SERIES)} (or 'all')")
    return [n for n in SERIES if n in names]


def check_reference(reference) -> None:
    """The comparisons vary one setting from the paper's reference: refuse a YAML that is another configuration."""
    differs = {k: getattr(reference, k) for k, v in REFERENCE_SETTINGS.items() if getattr(reference, k) != v}
    if differs or reference.n_gamma < 1 or reference.n_tau < 1:
        raise ValueError(
            f"the study's reference must be the paper's ({REFERENCE_SETTINGS}, Γ_t drawn on both scales); "
            f"the parameter file has {differs or {'n_gamma': reference.n_gamma, 'n_tau': reference.n_tau}}"
        )


def series_config(reference, name: str, seed: int):
    """The NeuralConfig of series ``name`` for seed index ``seed`` (the reference's seed + ``seed``)."""
    changes = dict(SERIES[name].changes)
    draws = changes.pop("draws", None)
    if draws is not None:
        total = reference.n_gamma + reference.n_tau
        changes.update(n_gamma=total if draws == "gamma" else 0, n_tau=total if draws == "tau" else 0)
    return dataclasses.replace(reference, **changes, seed=reference.seed + int(seed))


def study_taus(probe_taus) -> np.ndarray:
    """Where Γ-nets predict: the probe τ and the in-between τ, increasing."""
    return np.unique(np.concatenate([np.asarray(probe_taus, dtype=np.float64), INTERPOLATION_TAUS]))


def columns(available, wanted, *, what: str) -> np.ndarray:
    """Indices of ``wanted`` τ in ``available`` (matched to 1e-9 relative).

    Raises:
      ValueError: some τ are missing; the message names them and ``what`` holds them.
    """
    available = np.asarray(available, dtype=np.float64)
    index, missing = [], []
    for tau in np.asarray(wanted, dtype=np.float64):
        hits = np.flatnonzero(np.isclose(available, tau, rtol=1e-9, atol=0.0))
        if hits.size:
            index.append(int(hits[0]))
        else:
            missing.append(float(tau))
    if missing:
        raise ValueError(f"{what} has no τ {missing} (it has {available.tolist()})")
    return np.asarray(index, dtype=np.int64)


def run_path(run: str | os.PathLike, series: str, seed: int) -> pathlib.Path:
    return pathlib.Path(run) / series / f"seed-{int(seed)}"


# ----------------------------------------------------------------------------- predictions file

PREDICTIONS_KIND = "atari_gamma_net_predictions"
PREDICTIONS_VERSION = 1
PREDICTIONS = "predictions.npz"
CHECKPOINT = "learner.pt"
STUDY = "study.json"


@dataclasses.dataclass
class RunPredictions:
    """One series and seed: its predictions at the evaluation points during training.

    File (``predictions.npz``, :func:`gamma_net_core.checkpoint.save_npz`, no pickle):

    ============  ===================  ==================================================
    array         dtype, shape         meaning
    ============  ===================  ==================================================
    transitions   int64 [E]            transitions observed at evaluation e (0 first)
    updates       int64 [E]            learning updates made by then
    taus, gammas  float64 [G]          where it predicted (probes: their own τ only)
    predictions   float64 [E, P, G]    V(φ of point p, γ_g) at evaluation e (NaN after a divergence)
    losses        float64 [U]          every update's loss
    ============  ===================  ==================================================

    The header's ``config`` holds the series, seed, learner configuration and the study's
    identity (data, points, schedule); ``meta`` the wall time and why training stopped, if it did.
    """

    config: dict[str, Any]
    transitions: np.ndarray
    updates: np.ndarray
    taus: np.ndarray
    gammas: np.ndarray
    predictions: np.ndarray
    losses: np.ndarray
    meta: dict[str, Any]

    def save(self, path: str | os.PathLike) -> pathlib.Path:
        from gamma_net_core.checkpoint import save_npz

        arrays = {
            "transitions": np.asarray(self.transitions, dtype=np.int64),
            "updates": np.asarray(self.updates, dtype=np.int64),
            "taus": np.asarray(self.taus, dtype=np.float64),
            "gammas": np.asarray(self.gammas, dtype=np.float64),
            "predictions": np.asarray(self.predictions, dtype=np.float64),
            "losses": np.asarray(self.losses, dtype=np.float64),
        }
        return save_npz(
            path, kind=PREDICTIONS_KIND, version=PREDICTIONS_VERSION, config=self.config, arrays=arrays, meta=self.meta
        )

    @classmethod
    def load(cls, path: str | os.PathLike) -> RunPredictions:
        from gamma_net_core.checkpoint import load_npz

        config, arrays, meta = load_npz(path, kind=PREDICTIONS_KIND, version=PREDICTIONS_VERSION)
        e, g = arrays["transitions"].shape[0], arrays["taus"].shape[0]
        if arrays["predictions"].ndim != 3 or arrays["predictions"].shape[::2] != (e, g):
            raise ValueError(f"{path}: predictions {arrays['predictions'].shape} do not match {e} evaluations, {g} τ")
        names = ("transitions", "updates", "taus", "gammas", "predictions", "losses")
        return cls(config=config, meta=meta, **{k: arrays[k] for k in names})
