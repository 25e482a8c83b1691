"""Checkpoints of the linear learners: atomic saves and validated loads (format in :mod:`gamma_net_core.linear`)."""

from __future__ import annotations

import os
import pathlib

import numpy as np

from gamma_net_core import config as config_lib
from gamma_net_core.checkpoint import CheckpointError, load_npz, save_npz

#: 2: with loss scaling the weights hold f = (1 - gamma) V (version 1: V, its updates scaled).
VERSION = 2


def save_learner(learner, path: str | os.PathLike) -> pathlib.Path:
    """Atomically write a linear learner's full state (weights, tile coder, update count).

    Args:
      learner: a :class:`~gamma_net_core.linear.LinearGammaNet` or :class:`~gamma_net_core.linear.FixedTimescaleTD`.
      path: the ``.npz`` file to write (replaced whole, or left as it was).

    Returns:
      The path written.
    """
    meta = {"update_count": int(learner.update_count), "n_features": learner.n_features, "n_dims": learner.coder.n_dims}
    return save_npz(
        path,
        kind=learner.kind,
        version=VERSION,
        config=config_lib.to_mapping(learner.config),
        arrays=learner.to_state_dict(),
        meta=meta,
    )


def load_learner(cls, path: str | os.PathLike, *, config=None):
    """A ``cls`` learner restored from :func:`save_learner`; with ``config``, the file must have been made with it.

    Raises:
      CheckpointError: another kind, version, configuration, or arrays of the wrong shape.
    """
    expected = None if config is None else config_lib.to_mapping(config)
    saved, arrays, meta = load_npz(path, kind=cls.kind, version=VERSION, config=expected)
    try:
        cfg = config_lib.from_mapping(cls._config_class, saved, where=str(path))
    except ValueError as exc:
        raise CheckpointError(f"{path}: unusable configuration: {exc}") from None
    return learner_from_arrays(cls, cfg, arrays, update_count=meta.get("update_count"), source=str(path))


def learner_from_arrays(cls, config, arrays, *, update_count, source: str = "state"):
    """A ``cls`` learner from ``to_state_dict`` arrays (e.g. a checkpoint holding more than the learner).

    Raises:
      CheckpointError: arrays that do not fit ``config``, non-finite weights, a bad count.
    """
    weights = arrays.get("weights")
    try:
        coder_state = {k: arrays[k] for k in ("offsets", "mult", "base")}
        learner = cls(config, _state={"tiles": coder_state, "weights": np.zeros(0), "update_count": 0})
    except (KeyError, ValueError) as exc:
        raise CheckpointError(f"{source}: tile coder state does not fit its configuration: {exc}") from None
    if weights is None or weights.dtype != np.float64 or weights.shape != (learner.n_features,):
        got = None if weights is None else f"{weights.dtype}{list(weights.shape)}"
        raise CheckpointError(f"{source}: weights are {got}; expected float64[{learner.n_features}]")
    if not np.all(np.isfinite(weights)):
        raise CheckpointError(f"{source}: weights hold non-finite values")
    if not isinstance(update_count, int) or update_count < 0:
        raise CheckpointError(f"{source}: bad update_count {update_count!r}")
    learner._weights = np.array(weights)
    learner.update_count = update_count
    return learner
