"""TD(Delta) (Romoff, Henderson, Touati, Brunskill, Pineau and Ollivier 2019): a ladder of differences of values.

The paper's discussion names it as the other route to long timescales: rather than learning
V_gamma at a long timescale directly (a high-variance return), learn an ordered ladder
gamma_0 < gamma_1 < ... < gamma_L of components

    D_0 = V_{gamma_0},    D_l = V_{gamma_l} - V_{gamma_{l-1}},    so  V_{gamma_l} = sum_{j <= l} D_j,

each by its own linear TD(lambda_l) on the same tile-coded state (no timescale input), with the
Bellman equation of a difference (Romoff et al., Eq. 6) and its own step size alpha_l::

    delta_0 = C_{t+1} + gamma_0 D_0(S_{t+1}) - D_0(S_t)
    delta_l = (gamma_l - gamma_{l-1}) V_{gamma_{l-1}}(S_{t+1}) + gamma_l D_l(S_{t+1}) - D_l(S_t)
    z_l    = gamma_l lambda_l z_l + x(S_t)                (cut at a termination)
    w_l   += alpha_l,n / n_active * delta_l z_l

(the S_{t+1} terms dropped when S_{t+1} is terminal; every delta with the weights before the
step). Component l's "cumulant" is (gamma_l - gamma_{l-1}) V_{gamma_{l-1}}(S_{t+1}), the shorter
timescales' value, so its own lambda_l and alpha_l choose how far its return reaches and how fast
it moves, apart from the other components': Romoff et al.'s gains come from these per-component
settings (e.g. short traces and large steps for the short, low-variance components, smaller
steps for the long ones). With every lambda_l = 0 and one alpha for all, the components' TD errors
sum, rung by rung, to the TD error of V_{gamma_l} itself, and the components' weights together
move exactly as those of fixed-timescale TD(0) at each gamma_l: the predictions equal
:class:`~gamma_net_core.linear.FixedTimescaleTD`'s to float rounding (1e-14), by construction,
not because long returns' variance does not matter. ``lams`` and ``step_sizes`` are the
per-component settings; they default to ``config.lam`` and ``config.step_size`` for every
component. It shares the other settings of the fixed-timescale baseline: tile coding, the step
size's decay. ``loss_scaling`` does not apply: for a fixed gamma, TD on (1 - gamma) C then
divided by 1 - gamma is TD on C (TD is linear in the cumulant), so each component is learned
unscaled. Traces are dense ([L + 1, n_features]): meant for the small codings of the studies.
"""

from __future__ import annotations

import numba
import numpy as np

from gamma_net_core.linear.kernels import alpha_at
from gamma_net_core.linear.settings import LinearTDConfig, coder_memory_size
from gamma_net_core.tilecoding import TileCoder
from gamma_net_core.timescales import validate_gammas


class TDDelta:
    """TD(Delta) over an ordered ladder of fixed timescales, linear on the shared tile coding.

    Args:
      config: the shared linear settings (state ranges, tiling, step size and decay, lam).
      gammas: the ladder, strictly increasing, each in [0, 1).
      rng: draws the tile offsets (seed it per run).
      lams: lambda_l of each component [L + 1], each in [0, 1); default ``config.lam`` for all.
      step_sizes: alpha_l of each component [L + 1] (before division by the active features);
        default ``config.step_size`` for all.
    """

    def __init__(self, config: LinearTDConfig, gammas, *, rng: np.random.Generator, lams=None, step_sizes=None) -> None:
        g = validate_gammas(gammas, name="gammas")
        if np.any(np.diff(g) <= 0.0):
            raise ValueError(f"TD(Delta)'s gammas must be strictly increasing; got {g.tolist()}")
        L = g.shape[0]
        self.lams = _per_component(config.lam if lams is None else lams, L, "lams", high=1.0)
        self.step_sizes = _per_component(config.step_size if step_sizes is None else step_sizes, L, "step_sizes")
        self.config = config
        self.gammas = np.ascontiguousarray(g)
        self.coder = TileCoder(
            low=config.state_low,
            high=config.state_high,
            tilings=config.tilings,
            widths=config.tile_widths,
            memory_size=coder_memory_size(config, config.n_state, config.tile_widths),
            bias=config.bias,
            rng=rng,
        )
        self._W = np.zeros((L, self.coder.n_features))  # row l: the weights of D_l
        self._Z = np.zeros((L, self.coder.n_features))  # row l: the trace of D_l
        self.update_count = 0

    @property
    def weights(self) -> np.ndarray:
        """Read-only [L + 1, n_features]: the weights of each component D_l."""
        view = self._W.view()
        view.flags.writeable = False
        return view

    def learn_recording(self, *, states_t, cumulants, states_tp1, terminals=None) -> None:
        """Learn from a recording's transitions in order (``cumulants[t]`` is C_{t+1}).

        Args:
          states_t, states_tp1: [T, n_state] in the units of ``state_low``/``state_high``.
          cumulants: [T]; terminals: optional bool [T], S_{t+1} ends the episode (the traces are cut).

        Raises:
          ValueError: shapes that disagree or non-finite values (nothing learned).
          FloatingPointError: a weight would become non-finite (the learner is restored).
        """
        c = np.ascontiguousarray(np.asarray(cumulants, dtype=np.float64))
        T = c.shape[0]
        if c.ndim != 1 or not np.all(np.isfinite(c)):
            raise ValueError(f"cumulants must be finite [T]; got shape {c.shape}")
        x_t = self.coder.active(np.asarray(states_t, dtype=np.float64).reshape(T, -1))
        x_tp1 = self.coder.active(np.asarray(states_tp1, dtype=np.float64).reshape(T, -1))
        ends = np.zeros(T, dtype=np.bool_) if terminals is None else np.asarray(terminals, dtype=np.bool_)
        if ends.shape != (T,):
            raise ValueError(f"terminals must be [{T}] like cumulants; got shape {ends.shape}")
        before, traces_before = self._W.copy(), self._Z.copy()
        cfg = self.config
        n_active = self.coder.n_active
        bad = _learn_many(
            self._W, self._Z, x_t, x_tp1, c, ends, self.gammas, self.lams, self.step_sizes, cfg.step_size_decay_steps,
            self.update_count, n_active,
        )  # fmt: skip
        if bad >= 0:
            self._W[:] = before
            self._Z[:] = traces_before
            raise FloatingPointError(f"TD(Delta) update at step {bad} made a weight non-finite; learner unchanged")
        self.update_count += T

    def predict(self, states) -> np.ndarray:
        """V_{gamma_l}(S) = sum_{j <= l} D_j(S) for each state and rung: [N, L + 1], in the cumulant's units."""
        x = self.coder.active(np.atleast_2d(np.asarray(states, dtype=np.float64)))
        components = self._W[:, x].sum(axis=2).T  # [N, L + 1]
        return np.cumsum(components, axis=1)


def _per_component(value, L: int, name: str, high: float | None = None) -> np.ndarray:
    """``value`` (one number, or one per component) as float64 [L], each finite, >= 0 and below ``high``."""
    a = np.asarray(value, dtype=np.float64)
    a = np.full(L, float(a)) if a.ndim == 0 else a
    if a.shape != (L,):
        raise ValueError(f"{name} must be one number or {L}, one per component; got shape {a.shape}")
    bad = ~np.isfinite(a) | (a < 0.0) | (a >= high if high is not None else False)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        limit = f"[0, {high:g})" if high is not None else ">= 0"
        raise ValueError(f"{name} must each be {limit}; got {float(a[i])!r} for component {i}")
    return np.ascontiguousarray(a)


@numba.njit(cache=True)
def _learn_many(
    W, Z, x_t, x_tp1, cumulants, terminals, gammas, lams, step_sizes, decay_steps, count, n_active
):  # pragma: no cover
    """TD(lambda, Delta) on each transition in order; returns -1, or the first step that made a weight non-finite.

    A component whose lambda is 0 is updated on its active features only (TD(0), no trace kept).
    """
    L = gammas.shape[0]
    F = W.shape[1]
    d_t = np.empty(L)
    d_tp1 = np.empty(L)
    deltas = np.empty(L)
    for n in range(x_t.shape[0]):
        for l in range(L):  # noqa: E741 - l is the rung, as in the paper
            d_t[l] = 0.0
            d_tp1[l] = 0.0
            for j in range(x_t.shape[1]):
                d_t[l] += W[l, x_t[n, j]]
                d_tp1[l] += W[l, x_tp1[n, j]]
        v_below = 0.0  # V_{gamma_{l-1}}(S_{t+1}) = sum of the components below l
        for l in range(L):  # noqa: E741
            if terminals[n]:
                target = cumulants[n] if l == 0 else 0.0
            elif l == 0:
                target = cumulants[n] + gammas[0] * d_tp1[0]
            else:
                target = (gammas[l] - gammas[l - 1]) * v_below + gammas[l] * d_tp1[l]
            deltas[l] = target - d_t[l]
            v_below += d_tp1[l]
        for l in range(L):  # noqa: E741
            step = alpha_at(step_sizes[l], decay_steps, count + n, n_active) * deltas[l]
            if not np.isfinite(step):
                return n
            if lams[l] == 0.0:
                for j in range(x_t.shape[1]):
                    W[l, x_t[n, j]] += step
                continue
            decay = gammas[l] * lams[l]
            for i in range(F):
                Z[l, i] *= decay
            for j in range(x_t.shape[1]):
                Z[l, x_t[n, j]] += 1.0
            for i in range(F):
                W[l, i] += step * Z[l, i]
            if terminals[n]:
                Z[l, :] = 0.0
        for l in range(L):  # noqa: E741
            for j in range(x_t.shape[1]):
                if not np.isfinite(W[l, x_t[n, j]]):
                    return n
    return -1
