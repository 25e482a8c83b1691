"""Plain NumPy learners written for clarity: the oracles and yardsticks of the fast ones.

Nothing here is compiled or tuned. :class:`ReferenceTileCoder` computes the indices of
:class:`~gamma_net_core.tilecoding.TileCoder` from the same state (offsets, hashing
constants); :class:`ReferenceLinearTD` is Algorithm 1 of the paper line by line, a
Python loop over the gammas in Gamma_t, with loss scaling as the paper derives it (the
weights learn f = (1 - gamma) V and predict V = f / (1 - gamma)), and with ``lam`` > 0 in the
forward view each transition towards the truncated lambda-returns of its own Gamma_t once they are
complete (:mod:`gamma_net_core.linear.lambda_return`), or in the backward view TD(0) on a draw then
TD(lambda) with one dense trace per rung of a fixed ladder (why: :mod:`gamma_net_core.linear.traces`).
Off-policy: :func:`off_policy_step` is GTD(lambda) / TDC and off-policy TD(lambda) over Gamma_t on dense
features, and :class:`ReferenceOffPolicyTD` applies it to the tile coding of
:class:`~gamma_net_core.linear.OffPolicyGammaNet`. Tests check that the fast learners in
:mod:`gamma_net_core.linear` reach the same weights; benchmarks time both.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence

import numpy as np

from gamma_net_core.linear import FixedTimescaleConfig, GammaNetConfig, LinearTDConfig, lambda_horizon
from gamma_net_core.linear.settings import coder_memory_size
from gamma_net_core.linear.traces import DROP, traced_decay_steps
from gamma_net_core.tilecoding import HASHED_COPY_STRIDE, draw_tilings
from gamma_net_core.timescales import TimescaleSampler


class ReferenceTileCoder:
    """The tile coder of :mod:`gamma_net_core.tilecoding`, one tiling at a time in NumPy.

    Args:
      low, high, tilings, widths, memory_size, bias, copies: as for ``TileCoder``.
      state: ``offsets``, ``mult``, ``base`` as ``TileCoder.to_state_dict()`` gives them.
    """

    def __init__(
        self,
        *,
        low: Sequence[float],
        high: Sequence[float],
        tilings: Sequence[int],
        widths: Sequence[float],
        memory_size: int,
        bias: bool,
        state: dict[str, np.ndarray],
        copies: int = 1,
    ) -> None:
        self.low = np.asarray(low, dtype=np.float64)
        self.span = np.asarray(high, dtype=np.float64) - self.low
        self.widths = np.repeat(np.asarray(widths, dtype=np.float64), tilings)
        self.tiles_per_dim = np.array([math.ceil(1.0 / w) + 1 for w in self.widths])
        self.offsets = state["offsets"]
        self.mult = state["mult"]
        self.base = state["base"]
        self.memory_size = memory_size
        one_copy = int(np.sum(self.tiles_per_dim ** len(self.low)))
        n_tiles = memory_size if memory_size else one_copy * copies
        # copy k's keys are a tile's plus k strides: the next copy's first index, or an odd constant when hashed
        self.copy_stride = np.uint64(0 if copies == 1 else (HASHED_COPY_STRIDE if memory_size else one_copy))
        self.bias_index = n_tiles if bias else None
        self.n_features = n_tiles + (1 if bias else 0)

    def active(self, x, copy: int = 0) -> np.ndarray:
        """Active feature indices of one input vector in copy ``copy``: int64 [n_tilings (+1 with the bias)]."""
        u = np.clip((np.asarray(x, dtype=np.float64) - self.low) / self.span, 0.0, 1.0)
        # One row per tiling: the tile coordinates in each input dimension.
        coords = np.floor(u[None, :] * (1.0 / self.widths)[:, None] + self.offsets).astype(np.int64)
        coords = np.clip(coords, 0, self.tiles_per_dim[:, None] - 1)
        # uint64 array arithmetic wraps modulo 2**64, as the hash needs.
        keys = self.base + np.sum(self.mult * coords.astype(np.uint64), axis=1, dtype=np.uint64)
        keys = keys + np.uint64(copy) * self.copy_stride
        if self.memory_size:
            keys = ((keys >> np.uint64(32)) * np.uint64(self.memory_size)) >> np.uint64(32)
        indices = keys.astype(np.int64)
        if self.bias_index is not None:
            indices = np.append(indices, self.bias_index)
        return indices


class ReferenceLinearTD:
    """Algorithm 1 ("Generalization over gamma with TD(0)") over tile-coded state and timescale.

    Built from the same configuration and generator as ``LinearGammaNet`` (a
    ``GammaNetConfig``) or ``FixedTimescaleTD`` (a ``FixedTimescaleConfig``), it draws the
    same tilings and, fed the same transitions and Gamma_t, learns the same weights.
    """

    def __init__(self, config: LinearTDConfig, *, rng: np.random.Generator) -> None:
        self.config = config
        if isinstance(config, GammaNetConfig):
            self.timescale_input = config.timescale_input
        elif isinstance(config, FixedTimescaleConfig):
            self.timescale_input = "none"
        else:
            raise TypeError(f"expected a GammaNetConfig or FixedTimescaleConfig; got {type(config).__name__}")
        n_timescale_dims = {"none": 0, "gamma": 1, "tau": 1, "both": 2, "knots": 0}[self.timescale_input]
        self.knots = config.knots if self.timescale_input == "knots" else 0
        low = tuple(config.state_low) + (0.0,) * n_timescale_dims
        high = tuple(config.state_high) + (1.0,) * n_timescale_dims
        widths = tuple(config.tile_widths)
        ratio = getattr(config, "timescale_tile_width", 0.0) / widths[0]
        if n_timescale_dims and ratio > 1.0:  # wider timescale tiles: the timescale inputs' range stretched
            high = tuple(config.state_high) + (ratio,) * n_timescale_dims
        elif n_timescale_dims and 0.0 < ratio < 1.0:  # narrower: every tile narrower, the state's range stretched
            high = (
                tuple(lo + (hi - lo) / ratio for lo, hi in zip(config.state_low, config.state_high))
                + (1.0,) * n_timescale_dims
            )
            widths = tuple(w * ratio for w in widths)
        memory_size = coder_memory_size(config, len(low), widths)
        state = draw_tilings(n_dims=len(low), tilings=config.tilings, widths=widths, memory_size=memory_size, rng=rng)
        self.coder = ReferenceTileCoder(
            low=low,
            high=high,
            tilings=config.tilings,
            widths=widths,
            memory_size=memory_size,
            bias=config.bias,
            state=state,
            copies=max(self.knots, 1),
        )
        self.n_active = sum(config.tilings) + (1 if config.bias else 0)
        self.w = np.zeros(self.coder.n_features)
        self.update_count = 0
        self.lam = config.lam
        self.trace_gammas: np.ndarray | None = None  # TD(lambda): the fixed Gamma, set by the first update
        self.z: np.ndarray | None = None  # [K, n_features]: one accumulating trace per gamma in trace_gammas
        self.lambda_horizon = lambda_horizon(config)
        # The forward view: the transitions (S_t, C, S_{t+1}, end, Gamma_t) waiting, end "terminal", "gap" or None.
        self.window: deque = deque()

    def features(self, state, gamma: float) -> np.ndarray:
        """x(S, gamma) as its active indices: the state's inputs, then the timescale's."""
        state = np.atleast_1d(np.asarray(state, dtype=np.float64))
        if self.knots:  # the copy of the state's tiles of the knot nearest gamma on the log-tau scale
            position = math.log(1.0 / (1.0 - gamma)) / math.log(self.config.tau_scale) * (self.knots - 1)
            return self.coder.active(state, copy=min(max(math.floor(position + 0.5), 0), self.knots - 1))
        tau_input = 1.0 / (1.0 - gamma) / getattr(self.config, "tau_scale", 1.0)
        timescale = {"none": [], "gamma": [gamma], "tau": [tau_input], "both": [gamma, tau_input]}
        return self.coder.active(np.concatenate([state, timescale[self.timescale_input]]))

    def feature_values(self, gamma: float) -> np.ndarray:
        """The values of :meth:`features`' entries at ``gamma``: 1 for each tile; the bias unit's is s(gamma) when
        it is a constant of V (``bias_unit`` "value"), else 1."""
        n = len(self.coder.widths)  # one per tiling
        values = np.ones(n + (1 if self.config.bias else 0))
        if self.config.bias and self.config.bias_unit == "value":
            values[-1] = self.scale(gamma)
        return values

    def scale(self, gamma: float) -> float:
        """s(gamma) = 1 - gamma with loss scaling, else 1: the weights learn f = s V (Eq. scaled_v)."""
        return 1.0 - gamma if self.config.loss_scaling else 1.0

    def output(self, state, gamma: float) -> float:
        """f(S, gamma) = x(S, gamma)^T w: the value of the cumulant scaled by s(gamma)."""
        return float(np.sum(self.w[self.features(state, gamma)] * self.feature_values(gamma)))

    def value(self, state, gamma: float) -> float:
        """V(S, gamma) = f(S, gamma) / s(gamma), in the cumulant's units; with knots, linear in tau between the
        values at the two knots around gamma (the last knot's beyond it)."""
        if self.knots:
            knot_taus = np.geomspace(1.0, self.config.tau_scale, self.knots)
            tau = min(max(1.0 / (1.0 - gamma), 1.0), knot_taus[-1])
            upper = min(max(int(np.searchsorted(knot_taus, tau)), 1), self.knots - 1)
            frac = (tau - knot_taus[upper - 1]) / (knot_taus[upper] - knot_taus[upper - 1])
            ends = [1.0 - 1.0 / knot_taus[upper - 1], 1.0 - 1.0 / knot_taus[upper]]
            return (1.0 - frac) * self._knot_value(state, ends[0]) + frac * self._knot_value(state, ends[1])
        return self.output(state, gamma) / self.scale(gamma)

    def _knot_value(self, state, gamma: float) -> float:
        return self.output(state, gamma) / self.scale(gamma)

    def step_size(self) -> float:
        """alpha / n_active, decayed linearly to zero over ``step_size_decay_steps`` updates if set."""
        alpha, decay = self.config.step_size, self.config.step_size_decay_steps
        if decay > 0:
            return alpha * max(0.0, 1.0 - self.update_count / decay) / self.n_active
        return alpha / self.n_active

    def learn(self, state_t, cumulant: float, state_tp1, terminal: bool, gammas) -> np.ndarray:
        """One step of Algorithm 1 on f: every TD error with the weights before the step, then one update.

        Returns:
          The TD errors of V, delta_f / s(gamma) [K], in the cumulant's units.
        """
        if self.lambda_horizon:
            return self._learn_lambda_return(state_t, cumulant, state_tp1, terminal, gammas)
        if self.lam > 0.0:
            return self._learn_lambda(state_t, cumulant, state_tp1, terminal, np.asarray(gammas, dtype=np.float64))
        Delta = np.zeros_like(self.w)
        deltas_v = []
        for gamma in gammas:
            x_t = self.features(state_t, gamma)
            f_t = self.output(state_t, gamma)
            scaled_cumulant = self.scale(gamma) * cumulant  # (1 - gamma) C: the scaled cumulant's value is f
            if terminal:
                delta_f = scaled_cumulant - f_t
            else:
                delta_f = scaled_cumulant + gamma * self.output(state_tp1, gamma) - f_t
            np.add.at(Delta, x_t, delta_f * self.feature_values(gamma))  # a repeated index: feature value 2
            deltas_v.append(delta_f / self.scale(gamma))
        self.w += self.step_size() * Delta
        self.update_count += 1
        return np.array(deltas_v)

    def _learn_lambda(self, state_t, cumulant: float, state_tp1, terminal: bool, gammas: np.ndarray) -> np.ndarray:
        """TD(0) on the draw (Gamma_t's second half), then TD(lambda) on the ladder (its first half).

        z_k = gamma_k lambda z_k + x(S_t, gamma_k); w += alpha (1 - lambda) sum_k delta_k z_k; a terminal cuts z.
        """
        K = gammas.shape[0] // 2 if self.timescale_input != "none" else gammas.shape[0]  # the baseline draws nothing
        gammas, drawn = gammas[:K], gammas[K:]
        if self.z is None:
            self.trace_gammas = gammas.copy()
            self.z = np.zeros((gammas.shape[0], self.coder.n_features))
        elif not np.array_equal(gammas, self.trace_gammas):
            raise ValueError(f"TD(lambda) needs the same ladder every step; got {gammas} after {self.trace_gammas}")
        self.lam, lam = 0.0, self.lam
        try:
            self.learn(state_t, cumulant, state_tp1, terminal, drawn)
        finally:
            self.lam = lam
        self.update_count -= 1
        deltas_f = []
        for gamma in gammas:  # every TD error with the weights after the TD(0) part
            f_t = self.output(state_t, gamma)
            f_tp1 = 0.0 if terminal else self.output(state_tp1, gamma)
            deltas_f.append(self.scale(gamma) * cumulant + gamma * f_tp1 - f_t)
        Delta = np.zeros_like(self.w)
        for k, gamma in enumerate(gammas):
            self.z[k] = gamma * self.lam * self.z[k]
            self.z[k][np.abs(self.z[k]) < DROP] = 0.0  # entries decayed to nothing leave the trace
            np.add.at(self.z[k], self.features(state_t, gamma), self.feature_values(gamma))  # a repeat counts twice
            Delta += deltas_f[k] * self.z[k]
        alpha, decay = self.config.step_size * (1.0 - self.lam), self.config.step_size_decay_steps
        if self.timescale_input != "none":  # beside a draw the traces fade out first (linear/traces.py)
            decay = traced_decay_steps(decay)
        if decay > 0:
            self.w += alpha * max(0.0, 1.0 - self.update_count / decay) / self.n_active * Delta
        else:
            self.w += alpha / self.n_active * Delta
        if terminal:
            self.z[:] = 0.0
        self.update_count += 1
        return np.array(deltas_f) / np.array([self.scale(g) for g in gammas])

    def cut(self) -> None:
        """The stream does not continue from the last transition: the traces end, and in the forward view no
        lambda-return reaches past it."""
        if self.z is not None:
            self.z[:] = 0.0
        if self.window and self.window[-1][3] is None:
            self.window[-1] = (*self.window[-1][:3], "gap", self.window[-1][4])

    def lambda_return(self, gamma: float, lam: float, steps: int) -> float:
        """G of the window's oldest state at gamma over its first ``steps`` transitions, in f's units: the
        recursion backwards from the last of them."""
        s = self.scale(gamma)
        G = None
        for _, cumulant, state_tp1, end, _ in reversed(list(self.window)[:steps]):
            if end == "terminal":
                G = s * cumulant
            elif end == "gap" or G is None:
                G = s * cumulant + gamma * self.output(state_tp1, gamma)
            else:
                G = s * cumulant + gamma * ((1.0 - lam) * self.output(state_tp1, gamma) + lam * G)
        return G

    def _learn_lambda_return(
        self, state_t, cumulant: float, state_tp1, terminal: bool, gammas, cut=False
    ) -> np.ndarray:
        """Into the window with its Gamma_t; then each held transition whose lambda-return is complete (H held,
        an end among them, or lambda 0), oldest first, towards it on its own Gamma_t."""
        end = "terminal" if terminal else ("gap" if cut else None)
        self.window.append((state_t, cumulant, state_tp1, end, np.array(gammas)))
        fade = traced_decay_steps(self.config.step_size_decay_steps)  # lambda decays over alpha's first half
        lam = self.lam * max(0.0, 1.0 - self.update_count / fade) if fade else self.lam
        deltas_v = np.zeros(len(gammas))
        while self.window:
            ends = [j for j, step in enumerate(self.window) if step[3] is not None]
            if lam == 0.0:
                steps = 1
            elif ends:
                steps = ends[0] + 1
            elif len(self.window) == self.lambda_horizon:
                steps = self.lambda_horizon
            else:
                break
            oldest, draw = self.window[0][0], self.window[0][4]
            Delta = np.zeros_like(self.w)
            deltas_v = []
            power = getattr(self.config, "lambda_step_power", 0.0)
            for gamma in draw:
                delta_f = self.lambda_return(gamma, lam, steps) - self.output(oldest, gamma)
                step = (1.0 - gamma * lam) ** power  # a longer reach, a noisier target: a smaller step
                np.add.at(Delta, self.features(oldest, gamma), step * delta_f * self.feature_values(gamma))
                deltas_v.append(delta_f / self.scale(gamma))
            self.w += self.step_size() * Delta
            self.window.popleft()
        self.update_count += 1
        return np.array(deltas_v)

    def learn_recording(
        self, *, states_t, cumulants, states_tp1, timescales, terminals=None, cuts=None, probe_gammas=None,
        record_from=0,
    ) -> np.ndarray | None:  # fmt: skip
        """:meth:`learn` on each step in order, :meth:`cut` after each step with ``cuts``; Gamma_t from a sampler
        (one ``sample()`` per step) or [T, K].

        Returns:
          With ``probe_gammas``, the predictions V(S_t, gamma) made before each update from ``record_from`` on.
        """
        recorded = []
        for t in range(len(cumulants)):
            if probe_gammas is not None and t >= record_from:
                recorded.append([self.value(states_t[t], g) for g in probe_gammas])
            gammas = timescales.sample() if isinstance(timescales, TimescaleSampler) else timescales[t]
            terminal = bool(terminals[t]) if terminals is not None else False
            cut = cuts is not None and bool(cuts[t])
            if self.lambda_horizon:  # a cut is the transition's end, so what it completes is learned now
                self._learn_lambda_return(states_t[t], float(cumulants[t]), states_tp1[t], terminal, gammas, cut)
            else:
                self.learn(states_t[t], float(cumulants[t]), states_tp1[t], terminal, gammas)
                if cut:
                    self.cut()
        return np.array(recorded).reshape(-1, len(probe_gammas)) if probe_gammas is not None else None

    def predict(self, state, gammas) -> np.ndarray:
        """V(S, gamma) for each gamma: [G], in the cumulant's units."""
        return np.array([self.value(state, g) for g in gammas])


def off_policy_step(
    theta: np.ndarray,
    h: np.ndarray,
    z: np.ndarray | None,
    x_t: np.ndarray,
    x_tp1: np.ndarray,
    cumulants: np.ndarray,
    gammas: np.ndarray,
    rho: float,
    alpha: float,
    beta: float,
    lam: float,
    method: str,
    kappa: float = 0.0,
) -> np.ndarray:
    """One off-policy update over Gamma_t on dense features, line by line (theta, h, z change in place).

    GTD(lambda) (Maei 2011, written as in White 2015, p. 47; TDC at lambda 0, Sutton et al. 2009) or off-policy
    TD(lambda) with per-decision importance sampling, each gamma_k with its own TD error and correction, all
    computed with the weights before the step (Algorithm 1's order)::

        delta_k = C_k + gamma_k theta . x'_k - theta . x_k
        e_k     = rho (gamma_k lambda e_k + x_k)
        gtd:  theta += alpha (delta_k e_k - gamma_k (1 - lambda) (e_k . h) x'_k)
              h     += beta (delta_k e_k - (h . x_k) x_k)
              h     -= beta kappa [x_k != 0 for some k] h          (once a step)
        td:   theta += alpha delta_k e_k

    ``kappa`` is h's ridge on the features some x_k holds, each once (TDRC's regularized correction, Ghiassian et
    al. 2020, kept to the step's features so that a step stays sparse); 0 is GTD(lambda) / TDC. The ridge moves
    h's fixed point, not theta's (still TD's); a large one tends to off-policy TD (h near 0), which can diverge.

    Args:
      theta, h: primary and secondary weights [n].
      z: the traces [K, n] (lambda > 0), or None (lambda 0: e_k = rho x_k).
      x_t, x_tp1: x(S_t, gamma_k) and x(S_{t+1}, gamma_k) [K, n]; x_tp1 zero where S_{t+1} is terminal.
      cumulants: the cumulant of each gamma_k [K] (scaled by s(gamma_k) with loss scaling).
      gammas: Gamma_t [K].
      rho: pi / b of A_t (already clipped).
      alpha, beta: step sizes of theta and h.
      kappa: h's ridge on a feature of the step. The tile-coded learners pass ``secondary_regularization`` x
        n_active, so that on a tile code h . x settles at about 1 / (1 + secondary_regularization) of the expected
        TD error.

    Returns:
      The TD errors delta_k [K] before the step.
    """
    deltas = cumulants + gammas * (x_tp1 @ theta) - x_t @ theta
    hx = x_t @ h
    if z is None:
        e = rho * x_t
    else:
        z *= (gammas * lam)[:, None]
        z += x_t
        z *= rho
        e = z
    eh = e @ h
    d_theta = np.zeros_like(theta)
    d_h = np.zeros_like(h)
    for k in range(gammas.shape[0]):
        d_theta += deltas[k] * e[k]
        if method == "gtd":
            d_theta -= gammas[k] * (1.0 - lam) * eh[k] * x_tp1[k]
            d_h += deltas[k] * e[k] - hx[k] * x_t[k]
    if method == "gtd":
        d_h -= kappa * np.any(x_t != 0.0, axis=0) * h
    theta += alpha * d_theta
    h += beta * d_h
    return deltas


class ReferenceOffPolicyTD(ReferenceLinearTD):
    """:class:`~gamma_net_core.linear.gradient_td.OffPolicyGammaNet` in NumPy: :func:`off_policy_step` on the
    tile-coded x(S, gamma) as dense vectors (a repeated hashed tile counts twice).

    Built from the same configuration and generator it draws the same tilings and, fed the same transitions,
    Gamma_t and rho, learns the same theta, h and traces.
    """

    def __init__(self, config, *, rng: np.random.Generator) -> None:
        super().__init__(config, rng=rng)
        self.h = np.zeros_like(self.w)
        self.traces: np.ndarray | None = None

    def dense(self, state, gamma: float) -> np.ndarray:
        """x(S, gamma) as a dense vector [n_features]."""
        x = np.zeros(self.coder.n_features)
        np.add.at(x, self.features(state, gamma), 1.0)
        return x

    def learn(self, state_t, cumulant: float, state_tp1, terminal: bool, gammas, *, rho: float) -> np.ndarray:
        """One step; returns the TD errors of V [K] in the cumulant's units."""
        cfg = self.config
        gammas = np.asarray(gammas, dtype=np.float64)
        rho = min(float(rho), cfg.rho_max)
        x_t = np.array([self.dense(state_t, g) for g in gammas])
        x_tp1 = np.zeros_like(x_t) if terminal else np.array([self.dense(state_tp1, g) for g in gammas])
        scales = np.array([self.scale(g) for g in gammas])
        if cfg.lam > 0.0 and self.traces is None:
            self.traces = np.zeros_like(x_t)
        alpha = self.step_size()
        decay = cfg.step_size_decay_steps
        beta = cfg.secondary_step_size * (max(0.0, 1.0 - self.update_count / decay) if decay else 1.0) / self.n_active
        kappa = cfg.secondary_regularization * self.n_active
        deltas = off_policy_step(
            self.w,
            self.h,
            self.traces,
            x_t,
            x_tp1,
            scales * cumulant,
            gammas,
            rho,
            alpha,
            beta,
            cfg.lam,
            cfg.method,
            kappa,
        )
        if terminal and self.traces is not None:
            self.traces[:] = 0.0
        self.update_count += 1
        return deltas / scales
