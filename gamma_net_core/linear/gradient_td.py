"""The off-policy linear Γ-net: a GVF's policy learned stably at every timescale by GTD(lambda) / TDC.

A GVF asks about a policy pi, a cumulant and a timescale. The data come from a behaviour b; each transition
carries rho_t = pi(A_t | S_t) / b(A_t | S_t), given by the caller. :class:`OffPolicyGammaNet` learns
v_pi(s, gamma) for every gamma from that stream, with the tile coding over state and timescale of
:class:`~gamma_net_core.linear.LinearGammaNet` for both its primary weights theta and its secondary weights h
(GTD's estimate of the expected TD error), and Algorithm 1's Gamma_t: every gamma_k in it gets its own TD error
and its own gradient correction. The update is :mod:`gamma_net_core.linear.gradient_td_kernels`'s; the plain
NumPy oracle is :func:`gamma_net_core.reference.off_policy_step`
(:class:`~gamma_net_core.reference.ReferenceOffPolicyTD`).

``method`` "gtd": GTD(lambda) (Maei 2011; with lam 0 TDC, Sutton et al. 2009), stable off-policy under linear
function approximation for any gamma. "td": off-policy TD(lambda) with per-decision importance sampling, the
naive baseline, which can diverge (Baird's counterexample, tests/test_baird.py). With rho = 1 on pi's own data
"td" at lam 0 is Algorithm 1 (:class:`~gamma_net_core.linear.LinearGammaNet`) exactly.

Importance ratios are clipped to [0, ``rho_max``]: a rare target action behind a tiny b makes rho huge and one
step then moves the weights by rho times a normal step; clipping bounds that variance at the price of a bias
towards b (none while every rho is below the clip). Negative or non-finite ratios are refused.

Checkpoint (``save`` / ``load``): an ``.npz`` (:func:`gamma_net_core.checkpoint.save_npz`) of kind
``"linear_off_policy_gamma_net"``, version :data:`VERSION`, the configuration, meta ``{"update_count",
"n_features"}``, and the arrays ``weights`` float64 [n_features] (theta), ``secondary_weights`` float64
[n_features] (h; zeros for "td"), ``offsets``, ``mult``, ``base`` (the tile coder, as in
:mod:`gamma_net_core.linear`), ``traces`` float64 [K, n_features] and ``trace_gammas`` float64 [K] (lam > 0:
the ladder's traces; K = 0 before the first update and with lam 0). Loads are validated: kind, version,
configuration, shapes, dtypes, finite values.
"""

from __future__ import annotations

import os
import pathlib
from dataclasses import dataclass

import numpy as np

from gamma_net_core import config as config_lib
from gamma_net_core.checkpoint import CheckpointError, check_same_config, load_npz, save_npz
from gamma_net_core.config import setting
from gamma_net_core.linear import coding, knots
from gamma_net_core.linear.gradient_td_kernels import (
    GTD,
    TD,
    OffPolicyRecording,
    OffPolicyRule,
    OffPolicyWeights,
    learn_off_policy,
)
from gamma_net_core.linear.kernels import predict_many
from gamma_net_core.linear.settings import DEFAULT_SECONDARY_REGULARIZATION, GammaNetConfig, check_ridge
from gamma_net_core.timescales import TimescaleSampler, validate_gammas, validate_taus

#: Checkpoint format version of :class:`OffPolicyGammaNet`.
VERSION = 1
METHODS = {"td": TD, "gtd": GTD}


@dataclass(frozen=True)
class OffPolicyConfig(GammaNetConfig):
    """A linear Γ-net learning a target policy's values from a behaviour's data (the settings of
    :class:`~gamma_net_core.linear.GammaNetConfig`, plus these)."""

    method: str = setting(
        "gtd",
        "gtd: GTD(lambda) (TDC at lam 0), stable off-policy; td: off-policy TD(lambda) with per-decision "
        "importance sampling, the naive baseline (may diverge)",
        choices=("gtd", "td"),
    )
    secondary_step_size: float = setting(
        0.1,
        "beta of the secondary weights h before it is divided by the active features, decayed like alpha; "
        "GTD needs h to track the expected TD error faster than theta moves (beta >= alpha is usual)",
        low=0.0,
        high=1e3,
    )
    secondary_regularization: float = setting(
        DEFAULT_SECONDARY_REGULARIZATION,
        "kappa: h's ridge on its active features (TDRC, Ghiassian et al. 2020), h . x settling at 1 / (1 + kappa) "
        "of the expected TD error; learns about as fast as off-policy TD where that converges, stable where it "
        "does not (Baird); 0: GTD(lambda) / TDC exactly",
        low=0.0,
        high=10.0,
    )
    rho_max: float = setting(
        10.0,
        "importance ratios pi / b are clipped to [0, rho_max]: bounds a step's variance, biased towards b "
        "only where a ratio exceeds it",
        low=1.0,
        high=1e9,
    )
    bias_unit: str = setting(
        "scaled",
        "the off-policy kernels have the paper's bias unit only (feature value 1 in f = (1 - gamma) V); "
        "bias: false leaves it out",
        choices=("scaled",),
    )
    lambda_view: str = setting(
        "backward",
        "off-policy TD(lambda) and GTD(lambda) learn by traces: one per gamma of a fixed ladder (Gamma_t the "
        "same every step when lam > 0)",
        choices=("backward",),
    )


class OffPolicyGammaNet:
    """A linear Γ-net of a target policy's values, learned from a behaviour's transitions.

    Args:
      config: its settings (:class:`OffPolicyConfig`).
      rng: draws the tile offsets and hashing constants (seed it per run).

    A loop::

        net = OffPolicyGammaNet(OffPolicyConfig(...), rng=np.random.default_rng(seed))
        net.learn(s, cumulant, s_next, False, sampler.sample(), rho=pi(a | s) / b(a | s))
        values = net.predict(s_next, gammas)
    """

    kind = "linear_off_policy_gamma_net"

    def __init__(self, config: OffPolicyConfig, *, rng: np.random.Generator | None = None, _state=None) -> None:
        if not isinstance(config, OffPolicyConfig):
            raise TypeError(f"OffPolicyGammaNet needs an OffPolicyConfig; got {type(config).__name__}")
        check_ridge(config.secondary_step_size, config.secondary_regularization, "")
        self.config = config
        mode = config.timescale_input
        if _state is None:
            if rng is None:
                raise ValueError("a new learner needs rng, a numpy Generator for its tile offsets")
            self.coder = coding.make_coder(config, mode, rng=rng)
        else:
            self.coder = coding.make_coder(config, mode, state=_state)
        self._coding = coding.make_coding(config, mode, self.coder)
        self._plain_coding = self._coding.plain()
        self._knots = knots.config_knots(config) if mode == "knots" else None  # linear/knots.py
        n = self.coder.n_features
        self._theta = np.zeros(n)
        self._h = np.zeros(n)
        self._z = np.zeros((0, n))
        self._trace_gammas = np.zeros(0)
        self.update_count = 0

    # -- state

    @property
    def n_features(self) -> int:
        return self.coder.n_features

    @property
    def n_active(self) -> int:
        return self.coder.n_active

    @property
    def weights(self) -> np.ndarray:
        """theta, read-only: tiles, then the bias unit; gives f = s V."""
        return _read_only(self._theta)

    @property
    def secondary_weights(self) -> np.ndarray:
        """h, read-only: GTD's estimate of the expected TD error, on the same coding (zeros for "td")."""
        return _read_only(self._h)

    @property
    def traces(self) -> np.ndarray:
        """Read-only [K, n_features]: one trace per gamma of :attr:`trace_gammas` (K = 0 with lam 0)."""
        return _read_only(self._z)

    @property
    def trace_gammas(self) -> np.ndarray:
        return self._trace_gammas.copy()

    def reset_traces(self) -> None:
        """Cut the traces (an episode boundary the transitions do not mark as terminal)."""
        self._z[:] = 0.0

    def step_size(self) -> float:
        """alpha per active feature for the next update."""
        return coding.step_size(self.config, self.update_count, self.n_active)

    # -- learning

    def learn(self, state_t, cumulant, state_tp1, terminal, gammas, *, rho) -> np.ndarray:
        """One update on a transition taken by the behaviour, summed over every gamma in Gamma_t.

        Args:
          state_t, state_tp1: S_t and S_{t+1} [n_state] (``state_tp1`` may be None when ``terminal``).
          cumulant: C_{t+1}.
          terminal: S_{t+1} ends the episode (the return stops; the traces are cut after the update).
          gammas: Gamma_t [K], each in [0, 1); with lam > 0 the same ladder every step.
          rho: pi(A_t | S_t) / b(A_t | S_t) >= 0, clipped to ``rho_max``.

        Returns:
          The TD errors delta_V [K] before the update, in the cumulant's units.
        """
        s_t = coding.check_state(state_t, self.config.n_state, "state_t")
        s_tp1 = s_t if (terminal and state_tp1 is None) else coding.check_state(state_tp1, self.config.n_state,
                                                                                 "state_tp1")  # fmt: skip
        c = _finite(cumulant, "cumulant")
        g = validate_gammas(gammas, name="Gamma_t")
        if self._knots is not None:
            knots.check_on_knots(g, self._knots)
        rhos = self._clipped(np.array([_finite(rho, "rho")]))
        recording = OffPolicyRecording(s_t[None], s_tp1[None], np.array([c]), np.array([bool(terminal)]), rhos)
        return self._run(recording, np.ascontiguousarray(g[None, :]))

    def learn_recording(self, *, states_t, cumulants, states_tp1, rhos, timescales, terminals=None) -> None:
        """Learn from a whole recording at numba speed: the same updates as :meth:`learn` per step.

        Args:
          states_t, states_tp1: [T, n_state] (or [T] for one state input).
          cumulants: [T]; ``cumulants[t]`` is C_{t+1}.
          rhos: [T] importance ratios of each step's action.
          timescales: a :class:`TimescaleSampler` (one ``sample()`` per step) or gammas [T, K].
          terminals: optional bool [T].
        """
        c = np.ascontiguousarray(np.asarray(cumulants, dtype=np.float64))
        if c.ndim != 1 or not np.all(np.isfinite(c)):
            raise ValueError(f"cumulants must be finite [T]; got shape {c.shape}")
        T = c.shape[0]
        r = np.ascontiguousarray(np.asarray(rhos, dtype=np.float64))
        if r.shape != (T,):
            raise ValueError(f"rhos must be [{T}] like cumulants; got shape {r.shape}")
        s_t = coding.check_states(states_t, self.config.n_state, "states_t", T)
        s_tp1 = coding.check_states(states_tp1, self.config.n_state, "states_tp1", T)
        ends = np.zeros(T, dtype=np.bool_) if terminals is None else np.asarray(terminals, dtype=np.bool_)
        if ends.shape != (T,):
            raise ValueError(f"terminals must be [{T}] like cumulants; got shape {ends.shape}")
        if isinstance(timescales, TimescaleSampler):
            g = timescales.sample_many(T)
        else:
            g = np.asarray(timescales, dtype=np.float64)
            if g.ndim != 2 or g.shape[0] != T or g.shape[1] == 0:
                raise ValueError(f"timescales must be a TimescaleSampler or gammas [T={T}, K >= 1]; got {g.shape}")
            validate_gammas(g.reshape(-1), name="Gamma_t")
        if self._knots is not None:
            knots.check_on_knots(g, self._knots)
        recording = OffPolicyRecording(s_t, s_tp1, c, np.ascontiguousarray(ends), self._clipped(r))
        self._run(recording, np.ascontiguousarray(g))

    def _clipped(self, rhos: np.ndarray) -> np.ndarray:
        bad = ~np.isfinite(rhos) | (rhos < 0.0)
        if np.any(bad):
            step = int(np.flatnonzero(bad)[0])
            raise ValueError(f"rho must be a finite ratio pi / b >= 0; got {float(rhos[step])!r} at step {step}")
        return np.minimum(rhos, self.config.rho_max)

    def _ladder(self, gammas: np.ndarray) -> None:
        """lam > 0: the traces' fixed Gamma, set by the first update and the same at every step after."""
        if self.config.lam == 0.0 or gammas.shape[0] == 0:
            return
        if self._trace_gammas.shape[0] == 0:
            self._trace_gammas = gammas[0].copy()
            self._z = np.zeros((gammas.shape[1], self.n_features))
        if gammas.shape[1] != self._trace_gammas.shape[0] or not np.all(gammas == self._trace_gammas[None, :]):
            row = int(np.flatnonzero(np.any(gammas != self._trace_gammas[None, :], axis=1))[0]) if (
                gammas.shape[1] == self._trace_gammas.shape[0]) else 0  # fmt: skip
            raise ValueError(
                f"GTD(lambda) keeps one trace per timescale, so Gamma_t must be the same ladder every step: got "
                f"{gammas[row].tolist()} after {self._trace_gammas.tolist()} (TimescaleSampler(..., fixed=True) with "
                "no draws, or lam 0)"
            )

    def _run(self, recording: OffPolicyRecording, gammas: np.ndarray) -> np.ndarray:
        cfg = self.config
        # A refused call leaves the learner as it was: weights, traces and the traces' ladder.
        before = (self._theta.copy(), self._h.copy(), self._z.copy(), self._trace_gammas.copy())
        try:
            self._ladder(gammas)
        except ValueError:
            self._restore(before)
            raise
        rule = OffPolicyRule(METHODS[cfg.method], cfg.lam, cfg.step_size, cfg.secondary_step_size,
                             cfg.secondary_regularization, cfg.step_size_decay_steps, self.update_count,
                             self.n_active)  # fmt: skip
        deltas = np.zeros(gammas.shape[1])
        bad = learn_off_policy(OffPolicyWeights(self._theta, self._h, self._z), recording, gammas, rule,
                               self._plain_coding, deltas)  # fmt: skip
        if bad >= 0:
            self._restore(before)
            raise FloatingPointError(
                f"update {self.update_count + bad} (cumulant {float(recording.cumulants[bad])!r}, rho "
                f"{float(recording.rhos[bad])!r}) would make weights non-finite or too large; learner unchanged: "
                "lower step_size, secondary_step_size or rho_max, or use method 'gtd'"
            )
        self.update_count += recording.cumulants.shape[0]
        return deltas

    def _restore(self, saved) -> None:
        self._theta, self._h, self._z, self._trace_gammas = saved

    # -- predictions

    def predict(self, state, gammas=None, *, taus=None) -> np.ndarray:
        """v_pi(state, gamma) in the cumulant's units: [G] for one state [n_state], [N, G] for [N, n_state]."""
        if (gammas is None) == (taus is None):
            raise ValueError("give exactly one of gammas or taus")
        g = validate_gammas(gammas, name="gammas") if gammas is not None else 1.0 - 1.0 / validate_taus(taus)
        g = np.ascontiguousarray(g, dtype=np.float64)
        at = g if self._knots is None else self._knots  # a knotted Γ-net answers between its knots
        x = np.asarray(state, dtype=np.float64)
        n = self.config.n_state
        if x.ndim == 0 or (x.ndim == 1 and x.shape[0] == n):
            one = coding.check_state(x, n, "state")[None, :]
            values = predict_many(self._theta, one, at, self._plain_coding)[0]
        else:
            values = predict_many(self._theta, coding.check_states(x, n, "states"), at, self._plain_coding)
        return values if self._knots is None else values @ knots.blend(g, self._knots).T

    # -- checkpoints

    def to_state_dict(self) -> dict[str, np.ndarray]:
        """The arrays of a checkpoint (copies): see the module docstring."""
        return {
            "weights": self._theta.copy(),
            "secondary_weights": self._h.copy(),
            "traces": self._z.copy(),
            "trace_gammas": self._trace_gammas.copy(),
            **self.coder.to_state_dict(),
        }

    def save(self, path: str | os.PathLike) -> pathlib.Path:
        """Atomically write the full state (format: the module docstring)."""
        meta = {"update_count": int(self.update_count), "n_features": self.n_features}
        return save_npz(path, kind=self.kind, version=VERSION, config=config_lib.to_mapping(self.config),
                        arrays=self.to_state_dict(), meta=meta)  # fmt: skip

    @classmethod
    def load(cls, path: str | os.PathLike, *, config: OffPolicyConfig | None = None) -> OffPolicyGammaNet:
        """A learner restored from :meth:`save`; with ``config``, the file must have been made with it.

        Raises:
          CheckpointError: another kind, version, configuration, or arrays of the wrong shape or values.
        """
        saved, arrays, meta = load_npz(path, kind=cls.kind, version=VERSION)
        saved = {"secondary_regularization": 0.0, **saved}  # a file from before the ridge learned without one
        try:
            cfg = config_lib.from_mapping(OffPolicyConfig, saved, where=str(path))
        except ValueError as exc:
            raise CheckpointError(f"{path}: unusable configuration: {exc}") from None
        if config is not None:
            check_same_config(path, config_lib.to_mapping(cfg), config_lib.to_mapping(config))
        return cls.from_arrays(cfg, arrays, update_count=meta.get("update_count"), source=str(path))

    @classmethod
    def from_arrays(cls, config: OffPolicyConfig, arrays, *, update_count, source: str = "state") -> OffPolicyGammaNet:
        """A learner from :meth:`to_state_dict` arrays, validated.

        Raises:
          CheckpointError: arrays that do not fit ``config``, non-finite values, a bad count.
        """
        try:
            learner = cls(config, _state={k: arrays[k] for k in ("offsets", "mult", "base")})
        except (KeyError, ValueError) as exc:
            raise CheckpointError(f"{source}: tile coder state does not fit its configuration: {exc}") from None
        n = learner.n_features
        for name in ("weights", "secondary_weights"):
            a = arrays.get(name)
            if a is None or a.dtype != np.float64 or a.shape != (n,):
                got = None if a is None else f"{a.dtype}{list(a.shape)}"
                raise CheckpointError(f"{source}: {name} are {got}; expected float64[{n}]")
            if not np.all(np.isfinite(a)):
                raise CheckpointError(f"{source}: {name} hold non-finite values")
        z, g = arrays.get("traces"), arrays.get("trace_gammas")
        if g is None or g.dtype != np.float64 or g.ndim != 1:
            raise CheckpointError(f"{source}: trace_gammas are {None if g is None else g.dtype}; expected float64[K]")
        K = g.shape[0]
        if z is None or z.dtype != np.float64 or z.shape != (K, n):
            got = None if z is None else f"{z.dtype}{list(z.shape)}"
            raise CheckpointError(f"{source}: traces are {got}; expected float64[{K}, {n}]")
        if not (np.all(np.isfinite(z)) and np.all((g >= 0.0) & (g < 1.0))):
            raise CheckpointError(f"{source}: traces or trace_gammas hold non-finite or out-of-range values")
        if K and config.lam == 0.0:
            raise CheckpointError(f"{source}: traces saved but lam is 0")
        if not isinstance(update_count, int) or update_count < 0:
            raise CheckpointError(f"{source}: bad update_count {update_count!r}")
        learner._theta = np.array(arrays["weights"])
        learner._h = np.array(arrays["secondary_weights"])
        learner._z, learner._trace_gammas = np.array(z), np.array(g)
        learner.update_count = update_count
        return learner


def _read_only(a: np.ndarray) -> np.ndarray:
    view = a.view()
    view.flags.writeable = False
    return view


def _finite(x, name: str) -> float:
    try:
        value = float(x)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number; got {x!r}") from None
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite; got {value!r}")
    return value
