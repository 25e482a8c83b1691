"""The linear Γ-net and its fixed-timescale baseline: validation, the two doors to the kernels, checkpoints.

See :mod:`gamma_net_core.linear` for the update (Algorithm 1 with loss scaling) and the checkpoint format,
and for TD(lambda) (``lam`` > 0) :mod:`gamma_net_core.linear.lambda_return` (the forward view, a Γ-net's default)
and :mod:`gamma_net_core.linear.traces` (the backward view, and the fixed-timescale baseline's).
"""

from __future__ import annotations

import os
import pathlib

import numpy as np

from gamma_net_core.linear import checkpoints, coding, knots
from gamma_net_core.linear.kernels import (
    Probes,
    Recording,
    Schedule,
    TraceWork,
    learn_many,
    learn_one,
    learn_one_lambda,
    predict_many,
    traced_work,
)
from gamma_net_core.linear.laddered import learn_many_laddered
from gamma_net_core.linear.lambda_return import Window, learn_many_lambda_return
from gamma_net_core.linear.settings import FixedTimescaleConfig, GammaNetConfig, LinearTDConfig, lambda_horizon
from gamma_net_core.linear.traces import Traces, traced_decay_steps
from gamma_net_core.timescales import TimescaleSampler, validate_gammas, validate_taus

#: Steps of Gamma_t drawn at a time by ``learn_recording`` (bounds memory on long recordings).
_CHUNK = 1 << 16


class _LinearTD:
    """The machinery shared by the Γ-net and the baseline: coder, weights, checks, checkpoints."""

    kind = ""
    _mode = "none"
    _draws = True  # in the backward view Gamma_t is the ladder then a draw (linear/traces.py)

    def __init__(self, config: LinearTDConfig, *, rng: np.random.Generator | None = None, _state=None) -> None:
        self.config = config
        if _state is None:
            if rng is None:
                raise ValueError("a new learner needs rng, a numpy Generator for its tile offsets")
            self.coder = coding.make_coder(config, self._mode, rng=rng)
            self._weights = np.zeros(self.coder.n_features)
            self.update_count = 0
        else:
            self.coder = coding.make_coder(config, self._mode, state=_state["tiles"])
            self._weights = _state["weights"]
            self.update_count = _state["update_count"]
        self._coding = coding.make_coding(config, self._mode, self.coder)
        self._plain_coding = self._coding.plain()
        # TD(lambda): the traces of the fixed Gamma, made on the first update (see linear/traces.py).
        self._traces: Traces | None = None
        self._work: TraceWork | None = None
        # TD(lambda) in the forward view: the transitions whose lambda-returns are not yet complete.
        horizon = lambda_horizon(config)
        self._window = Window(horizon, config.n_state, sum(config.tilings)) if horizon else None

    # -- TD(lambda) traces

    @property
    def lam(self) -> float:
        return self.config.lam

    @property
    def trace_gammas(self) -> np.ndarray | None:
        """The fixed Gamma the traces belong to (lam > 0, after the first update), else None."""
        return None if self._traces is None else self._traces.gammas.copy()

    @property
    def traces(self) -> np.ndarray | None:
        """Read-only [K, n_features]: the trace of each gamma in :attr:`trace_gammas`, or None."""
        if self._traces is None:
            return None
        view = self._traces.z[0].view()
        view.flags.writeable = False
        return view

    def reset_traces(self) -> None:
        """Cut the traces: the next transition does not continue from the last (an episode boundary).

        In the forward view the held transitions' lambda-returns stop at the last one (bootstrapping there), so they
        are learned with the next transition.
        """
        if self._traces is not None:
            self._traces.reset()
        if self._window is not None:
            self._window.cut()

    @property
    def window_size(self) -> int:
        """Transitions held until their lambda-returns are complete (the forward view; under its horizon), else 0."""
        return 0 if self._window is None else len(self._window)

    def _traces_for(self, gammas: np.ndarray) -> Traces:
        knotted = getattr(self, "_knots", None)
        if knotted is not None and not np.array_equal(gammas, knotted):
            # Half of the knots as the ladder would give the other half no traces, and no word of it.
            raise ValueError(
                f"a knotted Γ-net's TD(lambda) traces follow its {knotted.shape[0]} knots: Gamma_t is the knots, then "
                f"the knots again ({2 * knotted.shape[0]} gammas: TimescaleSampler(TimescaleSampling(), fixed=True)); "
                f"got a ladder of {gammas.shape[0]}"
            )
        if self._traces is None:
            self._traces = Traces(1, gammas, self.n_features)
            self._work = traced_work(self.n_features, gammas.shape[0])
        elif not np.array_equal(gammas, self._traces.gammas):
            raise ValueError(
                f"TD(lambda) keeps one trace per timescale, so the ladder in Gamma_t must be the same every step: "
                f"got {gammas.tolist()} after {self._traces.gammas.tolist()} (TimescaleSampler(..., fixed=True) gives "
                "the sampling's fixed ladder, then a draw)"
            )
        return self._traces

    # -- shape, step size

    @property
    def weights(self) -> np.ndarray:
        """The weight vector, read-only: tiles, then the bias unit."""
        view = self._weights.view()
        view.flags.writeable = False
        return view

    @property
    def n_features(self) -> int:
        return self.coder.n_features

    @property
    def n_active(self) -> int:
        """Active features per (state, gamma): one per tiling, plus the bias."""
        return self.coder.n_active

    def step_size(self) -> float:
        """alpha per active feature for the next update (after decay)."""
        return coding.step_size(self.config, self.update_count, self.n_active)

    # -- validation

    def _state(self, x, name: str) -> np.ndarray:
        return coding.check_state(x, self.config.n_state, name)

    def _states(self, x, name: str, rows: int | None = None) -> np.ndarray:
        return coding.check_states(x, self.config.n_state, name, rows)

    @staticmethod
    def _cumulant(c) -> float:
        try:
            value = float(c)
        except (TypeError, ValueError):
            raise ValueError(f"cumulant must be a number; got {c!r}") from None
        if not np.isfinite(value):
            raise ValueError(f"cumulant must be finite; got {value!r}")
        return value

    # -- the two doors

    def _learn(self, state_t, cumulant, state_tp1, terminal, gammas: np.ndarray) -> np.ndarray:
        terminal = bool(terminal)
        s_t = self._state(state_t, "state_t")
        s_tp1 = s_t if (terminal and state_tp1 is None) else self._state(state_tp1, "state_tp1")
        c = self._cumulant(cumulant)
        deltas = np.empty(gammas.shape[0])
        args = (self._weights, s_t, s_tp1, gammas, c, terminal, self.step_size(), self._plain_coding, deltas)
        if self._window is not None:
            ok, deltas = self._learn_window(s_t, c, s_tp1, terminal, gammas)
        elif self.config.lam > 0.0:
            ladder, drawn = _split(gammas, self._draws)
            traces = self._traces_for(ladder)
            deltas = np.empty(ladder.shape[0])
            # TD(0) on the draw, then TD(lambda) on the ladder (linear/traces.py); a refusal undoes both.
            before = self._weights.copy()
            ok = learn_one(
                self._weights, s_t, s_tp1, drawn, c, terminal, self.step_size(), self._plain_coding,
                np.empty(drawn.size),
            )  # fmt: skip
            if ok:
                cfg = self.config
                alpha = coding.traced_step_size(cfg, self.update_count, self.n_active, draws=self._draws)
                ok = learn_one_lambda(
                    self._weights, s_t, s_tp1, ladder, c, terminal, alpha, self._plain_coding, deltas, cfg.lam,
                    traces.kernel_args, self._work,
                )  # fmt: skip
                if not ok:
                    self._weights[:] = before
            if ok and terminal:
                traces.reset()
        else:
            ok = learn_one(*args)
        if not ok:
            raise FloatingPointError(
                f"update {self.update_count} would make weights non-finite or predictions overflow (TD errors "
                f"{deltas.tolist()}, cumulant {c!r}); learner unchanged: lower step_size or check the cumulant's scale"
            )
        self.update_count += 1
        return deltas

    def _learn_window(self, s_t, c, s_tp1, terminal, gammas) -> tuple[bool, np.ndarray]:
        """One transition into the lambda-return window (linear/lambda_return.py); a refusal changes nothing."""
        cfg = self.config
        recording = Recording(s_t[None, :], s_tp1[None, :], np.array([c]), np.array([terminal]), np.zeros(1, np.bool_))
        schedule = Schedule(cfg.step_size, cfg.step_size_decay_steps, self.update_count, self.n_active)
        self._window.take(gammas.shape[0])
        before, window_before = self._weights.copy(), self._window.copy()
        deltas = np.zeros(gammas.shape[0])
        bad = learn_many_lambda_return(
            self._weights, recording, gammas[None, :], schedule, cfg.lam, traced_decay_steps(cfg.step_size_decay_steps),
            cfg.lambda_step_power, self._plain_coding, _no_probes(self._window), self._window.kernel_args, deltas,
        )  # fmt: skip
        if bad >= 0:
            self._weights[:] = before
            self._window = window_before
        return bad < 0, deltas

    def _learn_recording(
        self, states_t, cumulants, states_tp1, terminals, gammas_of, probe_gammas, record_from, cuts=None
    ):
        c = np.ascontiguousarray(np.asarray(cumulants, dtype=np.float64))
        if c.ndim != 1:
            raise ValueError(f"cumulants must be 1-D [T]; got shape {c.shape}")
        T = c.shape[0]
        if not np.all(np.isfinite(c)):
            step = int(np.flatnonzero(~np.isfinite(c))[0])
            raise ValueError(f"cumulants must be finite; got {float(c[step])!r} at step {step}")
        s_t = self._states(states_t, "states_t", T)
        s_tp1 = self._states(states_tp1, "states_tp1", T)
        if terminals is None:
            ends = np.zeros(T, dtype=np.bool_)
        else:
            ends = np.ascontiguousarray(np.asarray(terminals, dtype=np.bool_))
            if ends.shape != (T,):
                raise ValueError(f"terminals must be [{T}] like cumulants; got shape {ends.shape}")
        cut = _flags(cuts, T, "cuts")
        if not 0 <= record_from <= T:
            raise ValueError(f"record_from must be in [0, {T}]; got {record_from!r}")
        probes = np.empty(0) if probe_gammas is None else validate_gammas(probe_gammas, name="probe_gammas")
        probe_keys = coding.timescale_keys(self._coding, probes)
        probe_scales = coding.output_scales(probes, self.config.loss_scaling)
        predictions = np.empty((T - record_from, probes.shape[0]))
        # A failure part way restores these, so the learner is as it was before the call.
        before, count = self._weights.copy(), self.update_count
        traces_before = None if self._traces is None else self._traces.copy()
        window_before = None if self._window is None else self._window.copy()
        cfg = self.config
        for start in range(0, T, _CHUNK):
            stop = min(T, start + _CHUNK)
            gammas = gammas_of(start, stop)
            rf = min(max(record_from - start, 0), stop - start)
            out = predictions[max(start - record_from, 0) : max(stop - record_from, 0)]
            recording = Recording(s_t[start:stop], s_tp1[start:stop], c[start:stop], ends[start:stop], cut[start:stop])
            schedule = Schedule(cfg.step_size, cfg.step_size_decay_steps, self.update_count, self.n_active)
            probes_here = Probes(probe_keys, probe_scales, rf, out)
            if self._window is not None:
                self._window.take(gammas.shape[1])  # every chunk is as wide as the first, refused before any change
                bad = learn_many_lambda_return(
                    self._weights, recording, gammas, schedule, cfg.lam, traced_decay_steps(cfg.step_size_decay_steps),
                    cfg.lambda_step_power, self._plain_coding, probes_here, self._window.kernel_args,
                    np.zeros(gammas.shape[1]),
                )  # fmt: skip
            elif cfg.lam > 0.0 and stop > start:
                try:
                    ladder, _ = _split(gammas[0], self._draws)
                    K = ladder.shape[0]
                    traces = self._traces_for(ladder)
                    if not np.all(gammas[:, :K] == ladder[None, :]):
                        row = int(np.flatnonzero(np.any(gammas[:, :K] != ladder[None, :], axis=1))[0])
                        self._traces_for(np.ascontiguousarray(gammas[row, :K]))  # raises, naming both
                except ValueError:
                    self._weights[:] = before
                    self.update_count = count
                    self._traces = traces_before
                    raise
                drawn = np.ascontiguousarray(gammas[:, K:]) if self._draws else np.empty((stop - start, 0))
                decay = cfg.step_size_decay_steps
                traced = Schedule(cfg.step_size * (1.0 - cfg.lam), traced_decay_steps(decay) if self._draws else decay,
                                  self.update_count, self.n_active)  # fmt: skip
                bad = learn_many_laddered(
                    self._weights, recording, drawn, traces.gammas, schedule, traced, self._plain_coding, probes_here,
                    cfg.lam, traces.kernel_args, self._work,
                )  # fmt: skip
            else:
                bad = learn_many(self._weights, recording, gammas, schedule, self._plain_coding, probes_here)
            if bad >= 0:
                self._weights[:] = before
                self.update_count = count
                self._traces = traces_before
                self._window = window_before
                raise FloatingPointError(
                    f"update at step {start + bad} (cumulant {float(c[start + bad])!r}) would make weights non-finite "
                    "or predictions overflow; learner unchanged: lower step_size or check the cumulant's scale"
                )
            self.update_count += stop - start
        return predictions if probe_gammas is not None else None

    def _predict(self, state, gammas: np.ndarray) -> np.ndarray:
        """[G] for one state ([n_state], or a scalar with one state input), [N, G] for [N, n_state] or [N]."""
        x = np.asarray(state, dtype=np.float64)
        n = self.config.n_state
        if x.ndim == 0 or (x.ndim == 1 and x.shape[0] == n):
            one = self._state(x, "state")[None, :]
            return predict_many(self._weights, one, gammas, self._plain_coding)[0]
        return predict_many(self._weights, self._states(x, "states"), gammas, self._plain_coding)

    # -- checkpoints (format: :mod:`gamma_net_core.linear.checkpoints`)

    def to_state_dict(self) -> dict[str, np.ndarray]:
        """Weights and tile coder state (copies), as saved in a checkpoint; with lam > 0 the traces too.

        ``traces`` [K, n_features] and ``trace_gammas`` [K] (K = 0 before the first update); in the forward
        view the window instead (:meth:`gamma_net_core.linear.lambda_return.Window.to_arrays`).
        """
        state = {"weights": self._weights.copy(), **self.coder.to_state_dict()}
        if self._window is not None:
            state.update(self._window.to_arrays())
        elif self.config.lam > 0.0:
            t = self._traces
            state["traces"] = np.zeros((0, self.n_features)) if t is None else t.z[0].copy()
            state["trace_gammas"] = np.zeros(0) if t is None else t.gammas.copy()
        return state

    def save(self, path: str | os.PathLike) -> pathlib.Path:
        """Atomically write the full state (see :mod:`gamma_net_core.linear` for the format)."""
        return checkpoints.save_learner(self, path)

    @classmethod
    def load(cls, path: str | os.PathLike, *, config: LinearTDConfig | None = None):
        """A learner restored from :meth:`save`; with ``config``, the file must have been made with it.

        Raises:
          CheckpointError: another kind, version, configuration, or arrays of the wrong shape.
        """
        return checkpoints.load_learner(cls, path, config=config)

    @classmethod
    def from_arrays(cls, config: LinearTDConfig, arrays, *, update_count, source: str = "state"):
        """A learner from :meth:`to_state_dict` arrays (e.g. a checkpoint holding more than the learner).

        Raises:
          CheckpointError: arrays that do not fit ``config``, non-finite weights, a bad count.
        """
        return checkpoints.learner_from_arrays(cls, config, arrays, update_count=update_count, source=source)


class LinearGammaNet(_LinearTD):
    """A linear Γ-net: one tile-coded weight vector predicting the return at any gamma in [0, 1).

    Args:
      config: its settings (:class:`GammaNetConfig`).
      rng: draws the tile offsets and hashing constants (seed it per run).

    A node's loop (one message at a time)::

        net = LinearGammaNet(GammaNetConfig(...), rng=np.random.default_rng(seed))
        sampler = TimescaleSampler(TimescaleSampling(), rng)   # the 16 knots the default Γ-net learns
        net.learn(previous_state, cumulant, state, False, sampler.sample())
        values = net.predict(state, published_gammas)
    """

    kind = "linear_gamma_net"
    _config_class = GammaNetConfig

    def __init__(self, config: GammaNetConfig, *, rng: np.random.Generator | None = None, _state=None) -> None:
        if not isinstance(config, GammaNetConfig):
            raise TypeError(f"LinearGammaNet needs a GammaNetConfig; got {type(config).__name__}")
        self._mode = config.timescale_input
        super().__init__(config, rng=rng, _state=_state)
        # the knots' gammas with timescale_input knots (linear/knots.py), else None
        self._knots = knots.config_knots(config) if config.timescale_input == "knots" else None

    def learn(self, state_t, cumulant, state_tp1, terminal, gammas) -> np.ndarray:
        """One TD(0) update on a transition, summed over every gamma in Gamma_t (Algorithm 1).

        Args:
          state_t: the state inputs of S_t [n_state], in the units of ``state_low``/``state_high``.
          cumulant: C_{t+1}, in the signal's units.
          state_tp1: S_{t+1} [n_state]; may be None when ``terminal``.
          terminal: S_{t+1} ends the episode: delta = C - v(S_t, gamma).
          gammas: Gamma_t, the discounts trained on at this step [K], each in [0, 1); in the backward view
            (lam > 0, ``lambda_view`` "backward") the ladder, then a draw ([2K]: ``TimescaleSampler(...,
            fixed=True)``).

        Returns:
          The TD errors delta_V [K] of each gamma before the update (backward view: of the ladder's,
          after the draw's TD(0) update; forward view: the lambda-return errors of the last transition
          learned at this step, on its own Gamma_t, or 0 if none was), in the cumulant's units (with loss
          scaling the update used (1 - gamma) times these).
        """
        gammas = validate_gammas(gammas, name="Gamma_t")
        if self._knots is not None:
            knots.check_on_knots(gammas, self._knots)
        return self._learn(state_t, cumulant, state_tp1, terminal, gammas)

    def learn_recording(
        self,
        *,
        states_t,
        cumulants,
        states_tp1,
        timescales: TimescaleSampler | np.ndarray,
        terminals=None,
        cuts=None,
        probe_gammas=None,
        record_from: int = 0,
    ) -> np.ndarray | None:
        """Learn from a whole recording at numba speed; the same updates as calling :meth:`learn` per step
        (and :meth:`reset_traces` after each cut).

        Args:
          states_t, states_tp1: [T, n_state] (or [T] for one state input).
          cumulants: [T]; ``cumulants[t]`` is C_{t+1}.
          timescales: a sampler drawing each step's Gamma_t (the same sequence as calling its
            ``sample()`` once per step), or the gammas themselves [T, K].
          terminals: optional bool [T]; ``terminals[t]`` means S_{t+1} is terminal.
          cuts: optional bool [T]; ``cuts[t]`` means the stream does not continue after transition t (a pause,
            a truncation, a gap in a recording: transition t + 1 does not start at S_{t+1}). Transition t is
            learned as any other, bootstrapping on S_{t+1}; no lambda-return or trace reaches past it. (A
            transition across the gap, from before it to after it, should not be in the recording.)
          probe_gammas: optional [P]: record online predictions V(S_t, gamma) made before each update.
          record_from: the first step whose predictions are recorded.

        Returns:
          Predictions [T - record_from, P] in cumulant units when ``probe_gammas`` is given, else None.
        """
        T = np.shape(cumulants)[0] if np.ndim(cumulants) else 0
        gammas_of = _gamma_source(timescales, T)
        if self._knots is None:
            return self._learn_recording(
                states_t, cumulants, states_tp1, terminals, gammas_of, probe_gammas, record_from, cuts
            )

        def on_knots(start, stop):
            gammas = gammas_of(start, stop)
            knots.check_on_knots(gammas, self._knots)
            return gammas

        # the probes are recorded at the knots and blended between them, as predict does
        probes = None if probe_gammas is None else validate_gammas(probe_gammas, name="probe_gammas")
        at_knots = self._learn_recording(
            states_t, cumulants, states_tp1, terminals, on_knots, None if probes is None else self._knots,
            record_from, cuts,
        )  # fmt: skip
        return None if probes is None else at_knots @ knots.blend(probes, self._knots).T

    def predict(self, state, gammas=None, *, taus=None) -> np.ndarray:
        """Predicted returns in the cumulant's units at each timescale.

        Args:
          state: one state [n_state], or many [N, n_state]; with one state input, also a
            scalar (one state) or [N] with N > 1 (N states).
          gammas: discounts [G] in [0, 1); or ``taus`` [G] >= 1 instead (tau = 1 / (1 - gamma)).

        Returns:
          [G] for one state, [N, G] for many.
        """
        if (gammas is None) == (taus is None):
            raise ValueError("give exactly one of gammas or taus")
        if gammas is not None:
            g = validate_gammas(gammas, name="gammas")
        else:
            g = 1.0 - 1.0 / validate_taus(taus, name="taus")
        if self._knots is not None:
            return self._predict(state, self._knots) @ knots.blend(g, self._knots).T
        return self._predict(state, np.ascontiguousarray(g))


class FixedTimescaleTD(_LinearTD):
    """The fixed-timescale baseline: the same tile-coded TD(0) learner, no timescale input, one gamma."""

    kind = "linear_fixed_timescale"
    _config_class = FixedTimescaleConfig
    _draws = False  # one gamma: TD(lambda) on it alone

    def __init__(self, config: FixedTimescaleConfig, *, rng: np.random.Generator | None = None, _state=None) -> None:
        if not isinstance(config, FixedTimescaleConfig):
            raise TypeError(f"FixedTimescaleTD needs a FixedTimescaleConfig; got {type(config).__name__}")
        super().__init__(config, rng=rng, _state=_state)
        self._gammas = np.array([config.gamma])

    @property
    def gamma(self) -> float:
        return self.config.gamma

    def learn(self, state_t, cumulant, state_tp1, terminal=False) -> float:
        """One TD(0) update at the baseline's gamma; returns its TD error before the update."""
        return float(self._learn(state_t, cumulant, state_tp1, terminal, self._gammas)[0])

    def learn_recording(
        self, *, states_t, cumulants, states_tp1, terminals=None, cuts=None, record_predictions: bool = False,
        record_from: int = 0,
    ) -> np.ndarray | None:  # fmt: skip
        """Learn from a whole recording at numba speed (see :meth:`LinearGammaNet.learn_recording`, and its
        ``cuts``).

        Returns:
          With ``record_predictions``, the online predictions [T - record_from] before each update.
        """
        T = np.shape(cumulants)[0] if np.ndim(cumulants) else 0
        gammas_of = _gamma_source(np.broadcast_to(self._gammas, (T, 1)), T)
        probes = self._gammas if record_predictions else None
        out = self._learn_recording(states_t, cumulants, states_tp1, terminals, gammas_of, probes, record_from, cuts)
        return None if out is None else out[:, 0]

    def predict(self, state) -> np.ndarray | float:
        """Predicted return at the baseline's gamma: a float for one state [n_state], [N] for many."""
        out = self._predict(state, self._gammas)
        return float(out[0]) if out.ndim == 1 else out[:, 0]


def _no_probes(window: Window) -> Probes:
    return Probes(np.empty((0, window.keys_t.shape[1]), dtype=np.uint64), np.empty(0), 1, np.empty((0, 0)))


def _split(gammas: np.ndarray, draws: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """TD(lambda)'s Gamma_t [2K]: the ladder its traces follow [K], then the draw it trains by TD(0) [K].

    Without ``draws`` (the fixed-timescale baseline: one gamma, nothing between) all of it is the ladder.
    """
    if not draws:
        return np.ascontiguousarray(gammas), np.empty(0)
    if gammas.shape[0] % 2:
        raise ValueError(
            f"in the backward view (lam > 0, lambda_view 'backward') Gamma_t is the ladder then a draw (an even count; "
            f"TimescaleSampler(..., fixed=True) gives it); got {gammas.shape[0]} gammas"
        )
    K = gammas.shape[0] // 2
    return np.ascontiguousarray(gammas[:K]), np.ascontiguousarray(gammas[K:])


def _flags(flags, T: int, name: str) -> np.ndarray:
    """Optional bool [T] (None: all False), contiguous, or a ValueError naming ``name`` and the shape."""
    if flags is None:
        return np.zeros(T, dtype=np.bool_)
    out = np.ascontiguousarray(np.asarray(flags, dtype=np.bool_))
    if out.shape != (T,):
        raise ValueError(f"{name} must be [{T}] like cumulants; got shape {out.shape}")
    return out


def _gamma_source(timescales, T: int):
    """A function (start, stop) -> Gamma_t of those steps [stop - start, K], validated."""
    if isinstance(timescales, TimescaleSampler):
        return lambda start, stop: np.ascontiguousarray(timescales.sample_many(stop - start))
    g = np.asarray(timescales, dtype=np.float64)
    if g.ndim != 2 or g.shape[0] != T or g.shape[1] == 0:
        raise ValueError(f"timescales must be a TimescaleSampler or gammas [T={T}, K >= 1]; got shape {g.shape}")
    validate_gammas(g.reshape(-1), name="Gamma_t")
    return lambda start, stop: np.ascontiguousarray(g[start:stop])
