"""Checkpoints of the linear learners: atomic saves and validated loads (format in :mod:`gamma_net_core.linear`)."""

from __future__ import annotations

import os
import pathlib

import numpy as np

from gamma_net_core import config as config_lib
from gamma_net_core.checkpoint import CheckpointError, check_same_config, load_npz, save_npz
from gamma_net_core.linear.settings import GammaNetConfig, saved_learner_mapping

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
    saved, arrays, meta = load_npz(path, kind=cls.kind, version=VERSION)
    try:
        saved = saved_learner_mapping(saved, gamma_net=issubclass(cls._config_class, GammaNetConfig))
        cfg = config_lib.from_mapping(cls._config_class, saved, where=str(path))
    except ValueError as exc:
        raise CheckpointError(f"{path}: unusable configuration: {exc}") from None
    if config is not None:
        # Compared with its defaults filled in: a file from before a setting existed (e.g. lam) has its default.
        check_same_config(path, config_lib.to_mapping(cfg), config_lib.to_mapping(config))
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
    if learner._window is not None:
        from gamma_net_core.linear.lambda_return import Window
        from gamma_net_core.linear.settings import lambda_horizon

        try:
            horizon = lambda_horizon(config)
            learner._window = Window.from_arrays(horizon, config.n_state, learner._plain_coding, arrays)
        except ValueError as exc:
            raise CheckpointError(f"{source}: {exc}") from None
    elif config.lam > 0.0:
        learner._traces, learner._work = _traces_from_arrays(arrays, learner.n_features, source)
    return learner


def _traces_from_arrays(arrays, n_features: int, source: str):
    """The TD(lambda) traces a ``lam`` > 0 learner saved (None before its first update), validated."""
    from gamma_net_core.linear.kernels import traced_work
    from gamma_net_core.linear.traces import Traces

    z, gammas = arrays.get("traces"), arrays.get("trace_gammas")
    if z is None or gammas is None:
        raise CheckpointError(f"{source}: lam > 0 but no traces saved (a TD(lambda) learner's state includes them)")
    if gammas.dtype != np.float64 or gammas.ndim != 1:
        raise CheckpointError(f"{source}: trace_gammas are {gammas.dtype}{list(gammas.shape)}; expected float64[K]")
    K = gammas.shape[0]
    if z.dtype != np.float64 or z.shape != (K, n_features):
        raise CheckpointError(f"{source}: traces are {z.dtype}{list(z.shape)}; expected float64[{K}, {n_features}]")
    if not (np.all(np.isfinite(z)) and np.all((gammas >= 0.0) & (gammas < 1.0))):
        raise CheckpointError(f"{source}: traces or trace_gammas hold non-finite or out-of-range values")
    if K == 0:
        return None, None
    return Traces.from_arrays(gammas, z[None]), traced_work(n_features, K)
