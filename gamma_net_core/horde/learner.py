"""HordeLearner: many questions, one tile coding, every timescale; Algorithm 1 vectorized over questions.

The tile-coded state-and-timescale features are computed once per step and shared; each
question has its own weight vector (``weights`` [Q, n_features]) and its own continuation
(0 where its termination holds: the return stops there). The update of each question is the
single-question learner's (:class:`gamma_net_core.linear.LinearGammaNet`, its oracle: N questions
here equal N single learners fed the same stream), see :mod:`gamma_net_core.horde.kernels`.
TD(0) with a constant step size and the predictions run on the run kernels, which touch each
distinct active row of the weights once or twice per step (equal to the plain kernels to float
rounding); Autostep and TD(lambda) (its draw's TD(0) too) learn on the plain ones
(``reference_kernels`` puts the predictions there too: the oracle).
With ``adaptation.method == "autostep"`` each question and feature has its own step size.
With ``config.lam`` > 0 it learns by TD(lambda) on the sampling's fixed ladder of timescales, each
step after a TD(0) update on a draw (Gamma_t is the ladder, then the draw: :mod:`gamma_net_core.linear.traces`), one
set of traces per continuation group: questions with the same termination (or none) share them,
so a Horde pays for its traces once per group.

A node's loop (a fixed clock sampling the latest message of each topic)::

    spec = load_questions("config/horde.yaml")
    horde = HordeLearner.from_spec(spec)
    every tick:
        horde.step(inputs, cumulants, continuations)    # learns from the previous tick to this one
        values = horde.predict(inputs, taus=spec.publish_taus)     # [Q, G]
        hyper = horde.readout(inputs, "hyperbolic")                 # [Q]

``step`` draws Gamma_t from its own :class:`~gamma_net_core.timescales.TimescaleSampler`;
``learn`` takes one explicit transition. Bad input raises ``ValueError`` naming the value and
changes nothing; an update that would make a weight non-finite or too large raises
``FloatingPointError`` naming the question, and changes nothing.

Checkpoint (``save``/``load`` via :func:`gamma_net_core.checkpoint.save_npz`, atomic, no pickle):
kind ``"horde_linear_gamma_net"``, version :data:`VERSION`; config ``{"learner", "timescales",
"adaptation", "names", "readouts", "rate_hz"}``; meta ``{"update_count", "has_previous",
"sampler_state"}``; arrays ``weights`` float64 [Q, n_features], the tile coder's ``offsets``,
``mult``, ``base``, ``previous`` [n_inputs] (the last inputs seen), with Autostep ``alphas``,
``h``, ``v`` [Q, n_features], and with lam > 0 ``traces`` [G, K, n_features], ``trace_gammas`` [K],
``trace_groups`` int64 [Q] and ``continuation_t`` [G] (each group's continuation of the last inputs).
A file written before lam existed reads as lam 0. With off-policy questions the config also has
``policies`` (one mapping or None per question) and the arrays ``secondary_weights`` [Q, n_features]
(TDC's h), ``behaviour_counts`` [Q, n_bins] (the counted behaviour estimates) and ``rho_t`` [Q]
(the ratio of the action taken at ``previous``).

Off-policy questions (a question with a ``policy:``, :mod:`gamma_net_core.horde.policies`): the
Horde learns every question by TDC in one kernel (:mod:`gamma_net_core.horde.gradient_td_kernels`),
secondary weights over the same state x timescale coding, each drawn gamma_k its own correction;
an on-policy question among them keeps h at 0 (beta 0) and rho 1, so its update is TD(0)'s.
``step`` takes the step's :class:`~gamma_net_core.horde.policies.PolicyReadings`, forms rho of the
action taken at S_{t+1} and applies it to the transition out of S_{t+1}. A Horde without policies
runs the kernels above, unchanged. Off-policy needs lam 0 and a constant step size.
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
from collections.abc import Sequence

import numpy as np

from gamma_net_core import config as config_lib
from gamma_net_core.checkpoint import CheckpointError, check_same_config, load_npz, save_npz
from gamma_net_core.horde import gradient_td_kernels, kernels
from gamma_net_core.horde.policies import ImportanceRatios, Policy, PolicyReadings, policy_from_mapping, policy_mapping
from gamma_net_core.horde.questions import AdaptationConfig, HordeSpec, Readout
from gamma_net_core.horde.readouts import readout_weights
from gamma_net_core.linear import GammaNetConfig, coding, knots
from gamma_net_core.linear.settings import N_TIMESCALE_DIMS, saved_learner_mapping
from gamma_net_core.linear.traces import Traces
from gamma_net_core.tilecoding import TileCoder
from gamma_net_core.timescales import TimescaleSampler, TimescaleSampling, validate_gammas, validate_taus

VERSION = 1
KIND = "horde_linear_gamma_net"


class HordeLearner:
    """A Horde of linear Γ-nets sharing one tile coder.

    Args:
      config: the learner's settings (state ranges, tiling, step size, loss scaling, timescale input).
      names: one name per question.
      timescales: how Gamma_t is drawn by :meth:`step` (default: the config's,
        :func:`~gamma_net_core.linear.knots.default_sampling`).
      adaptation: constant step size (the default) or Autostep.
      readouts: weightings over timescales answered by :meth:`readout`.
      rate_hz: steps per second (a window readout's length is in seconds).
      rng: draws the tile offsets, then Gamma_t (seed it per run).
      trace_groups: with lam > 0, each question's continuation group [Q]: questions in one group
        share traces, so their continuations must be equal at every step (checked); default: one
        group (:meth:`from_spec` groups the questions by termination).
      reference_kernels: learn and predict with the plain kernels only (the run kernels' oracle,
        :mod:`gamma_net_core.horde.kernels`): for tests and benchmarks.
      policies: each question's target policy, None for an on-policy one (:mod:`gamma_net_core.horde.policies`);
        with any, the Horde learns by TDC (:mod:`gamma_net_core.horde.gradient_td_kernels`).
    """

    kind = KIND

    def __init__(
        self,
        config: GammaNetConfig,
        *,
        names: Sequence[str],
        timescales: TimescaleSampling | None = None,
        adaptation: AdaptationConfig | None = None,
        readouts: Sequence[Readout] = (),
        rate_hz: float = 10.0,
        rng: np.random.Generator | None = None,
        trace_groups: Sequence[int] | None = None,
        reference_kernels: bool = False,
        policies: Sequence[Policy | None] | None = None,
        _state=None,
    ) -> None:
        names = tuple(names)
        adaptation = AdaptationConfig() if adaptation is None else adaptation
        if not names or len(set(names)) != len(names):
            raise ValueError(f"names must be distinct and at least one; got {list(names)}")
        if not isinstance(config, GammaNetConfig):
            raise TypeError(f"HordeLearner needs a GammaNetConfig; got {type(config).__name__}")
        timescales = knots.default_sampling(config) if timescales is None else timescales
        self._knots = knots.config_knots(config) if config.timescale_input == "knots" else None
        knots.check_sampling(config, timescales)
        # The tile coder, input checks and step size are the single-question learner's (linear/coding.py).
        if _state is None:
            if rng is None:
                raise ValueError("a new learner needs rng, a numpy Generator for its tile offsets and Gamma_t")
            self._coder = coding.make_coder(config, config.timescale_input, rng=rng)
        else:
            self._coder = coding.make_coder(config, config.timescale_input, state=_state)
            rng = np.random.default_rng()
        self._coding = coding.make_coding(config, config.timescale_input, self._coder)
        self._plain_coding = self._coding.plain()  # as the kernels take it (see Coding.plain)
        self.config = config
        self.names = names
        self.timescales = timescales
        self.adaptation = adaptation
        self.rate_hz = float(rate_hz)
        if config.lam > 0.0 and config.lambda_view != "backward":
            raise ValueError(f"lambda_view {config.lambda_view!r} with lam {config.lam!r}: a Horde learns TD(lambda) "
                             "by traces on the ladder only: set lambda_view 'backward'")  # fmt: skip
        if config.lam > 0.0 and adaptation.method != "constant":
            raise ValueError(f"lam {config.lam!r} > 0 (TD(lambda)) needs adaptation method 'constant'; got "
                             f"{adaptation.method!r}")  # fmt: skip
        if config.bias and config.loss_scaling and config.bias_unit != "scaled":
            raise ValueError(
                f"a Horde's kernels have only the bias of the scaled output: with bias and loss_scaling set "
                f"bias_unit: scaled, or bias: false; got bias_unit {config.bias_unit!r}"
            )
        self.sampler = TimescaleSampler(timescales, rng, fixed=config.lam > 0.0)
        self._rng = rng
        self._readouts = {r.name: r for r in readouts}
        self._readout_weights = {
            r.name: readout_weights(r, rate_hz=self.rate_hz, tau_max=timescales.tau_max) for r in readouts
        }
        Q, F = len(names), self._coder.n_features
        self._W = np.zeros((F, Q))
        self._w_max = np.zeros(Q)
        self.update_count = 0
        self._previous: np.ndarray | None = None
        self._usable: np.ndarray | None = None  # [Q] questions usable at the previous step; None: all
        self._autostep = adaptation.method == "autostep"
        self.reference_kernels = bool(reference_kernels)
        k_max = max(timescales.size, 1)
        self._scratch = self._make_scratch(k_max)
        self._run_work = kernels.make_run_work(self._coder.n_tilings, k_max, Q)
        if config.lam > 0.0:
            self._init_traces(np.zeros(Q, dtype=np.int64) if trace_groups is None else trace_groups)
        if self._autostep:
            self._set_autostep(
                np.full((F, Q), config.step_size / self._coder.n_active), np.zeros((F, Q)), np.zeros((F, Q))
            )
            self._autostep_work = kernels.make_autostep_work(F, Q)
        self._init_off_policy(policies)

    def _init_off_policy(self, policies) -> None:
        """Secondary weights, betas and the importance ratios where some question has a target policy."""
        policies = () if policies is None else tuple(policies)
        if policies and len(policies) != self.n_questions:
            raise ValueError(f"policies must be {self.n_questions}, one per question (None: on-policy); got "
                             f"{len(policies)}")  # fmt: skip
        self.off_policy = any(p is not None for p in policies)
        self.ratios: ImportanceRatios | None = None
        if not self.off_policy:
            return
        if self._autostep or self.config.lam > 0.0:
            raise ValueError(
                f"off-policy questions learn by TDC (lambda 0) at a constant step size; got lam {self.config.lam!r} "
                f"and adaptation {self.adaptation.method!r}: set lam 0 and adaptation constant"
            )
        F, Q = self.n_features, self.n_questions
        self.ratios = ImportanceRatios(policies)
        self._H = np.zeros((F, Q))
        self._bounds = np.zeros((2, Q))  # the kernel's bounds on max |W| and max |H| per question
        self._w_max = self._bounds[0]
        # beta 0 keeps an on-policy question's H at 0: its update is TD(0)'s (gradient_td_kernels)
        self._secondary = np.array([0.0 if p is None else p.secondary_step_size for p in policies])
        self._ridge = np.array([0.0 if p is None else p.secondary_regularization for p in policies])
        self._marked = np.zeros(F, dtype=np.uint8)  # the TDC kernel's record of a step's features, 0 between steps
        self._rho_t = np.ones(Q)  # rho of the action taken at the previous step's inputs
        self.last_rhos = np.ones(Q)  # the rhos of the latest transition learned (or skipped)

    @property
    def secondary_weights(self) -> np.ndarray | None:
        """Read-only [Q, n_features]: TDC's secondary weights h (zeros for on-policy questions), else None."""
        if not self.off_policy:
            return None
        view = self._H.T.view()
        view.flags.writeable = False
        return view

    @property
    def latest_inputs(self) -> np.ndarray | None:
        """The inputs of the latest :meth:`step` (None before one, or after :meth:`restart`)."""
        return None if self._previous is None else self._previous.copy()

    def secondary_values(self, inputs, gammas) -> np.ndarray:
        """[Q, G]: h_q . x(inputs, gamma) of TDC's secondary weights (their raw output: an estimate of the expected
        importance-weighted TD error of the scaled output there; 0 for on-policy questions)."""
        if not self.off_policy:
            raise ValueError("no secondary weights: no question has a policy")
        g = np.ascontiguousarray(validate_gammas(gammas, name="gammas"))
        s = coding.check_state(inputs, self.config.n_state, "inputs")
        at = g if self._knots is None else self._knots
        out = np.empty((self.n_questions, at.shape[0]))
        kernels.predict(self._H, s, at, self._plain_coding, out)
        out *= coding.output_scales(at, self.config.loss_scaling)
        return out if self._knots is None else out @ knots.blend(g, self._knots).T

    def _make_scratch(self, k_max: int) -> kernels.Scratch:
        n_ts = N_TIMESCALE_DIMS[self.config.timescale_input]
        return kernels.make_scratch(self.config.n_state, n_ts, self._coder.n_tilings, k_max, len(self.names))

    def _set_autostep(self, alphas: np.ndarray, h: np.ndarray, v: np.ndarray) -> None:
        a = self.adaptation
        self._autostep_state = kernels.Autostep(alphas, h, v, a.meta_step_size, 1.0 / a.trace_tau)

    def _init_traces(self, trace_groups) -> None:
        groups = np.asarray(trace_groups)
        Q = self.n_questions
        if groups.shape != (Q,) or groups.dtype.kind not in "iu" or groups.min() < 0:
            raise ValueError(f"trace_groups must be {Q} group numbers >= 0, one per question; got {trace_groups!r}")
        # Renumber in order of first appearance, so groups are 0..G-1.
        _, first, inverse = np.unique(groups, return_index=True, return_inverse=True)
        order = np.argsort(np.argsort(first))
        of_question = np.ascontiguousarray(order[inverse], dtype=np.int64)
        G = int(of_question.max()) + 1
        members = np.zeros((G, Q), dtype=np.int64)
        n_members = np.zeros(G, dtype=np.int64)
        for q, g in enumerate(of_question):
            members[g, n_members[g]] = q
            n_members[g] += 1
        ladder = self.sampler.ladder
        self._traces = Traces(G, ladder, self.n_features)
        self._groups = kernels.TraceGroups(of_question, members, n_members, np.ones(G))
        self._lambda_work = kernels.make_lambda_work(self.n_features, Q, G, ladder.shape[0])

    @property
    def trace_groups(self) -> np.ndarray | None:
        """[Q]: each question's continuation group (lam > 0), else None."""
        return None if self.config.lam == 0.0 else self._groups.of_question.copy()

    @property
    def traces(self) -> np.ndarray | None:
        """Read-only [G, K, n_features]: the traces of each group and fixed gamma (lam > 0), else None."""
        if self.config.lam == 0.0:
            return None
        view = self._traces.z.view()
        view.flags.writeable = False
        return view

    @classmethod
    def from_spec(
        cls, spec: HordeSpec, *, rng: np.random.Generator | None = None, reference_kernels: bool = False
    ) -> HordeLearner:
        """The learner a questions file describes (``rng`` defaults to one seeded with ``spec.seed``).

        Questions with equal terminations (or none) share their TD(lambda) traces; ``reference_kernels``
        as the constructor's.
        """
        terminations = [q.termination for q in spec.questions]
        policies = spec.policies if any(p is not None for p in spec.policies) else None
        return cls(
            spec.learner,
            names=spec.names,
            timescales=spec.timescales,
            adaptation=spec.adaptation,
            readouts=spec.readouts,
            rate_hz=spec.rate_hz,
            rng=np.random.default_rng(spec.seed) if rng is None else rng,
            trace_groups=[terminations.index(t) for t in terminations],
            reference_kernels=reference_kernels,
            policies=policies,
        )

    # -- shape

    @property
    def n_questions(self) -> int:
        return len(self.names)

    @property
    def n_inputs(self) -> int:
        return self.config.n_state

    @property
    def n_features(self) -> int:
        return self._coder.n_features

    @property
    def coder(self) -> TileCoder:
        return self._coder

    @property
    def weights(self) -> np.ndarray:
        """Read-only [Q, n_features]: each question's weights (tiles, then the bias)."""
        view = self._W.T.view()
        view.flags.writeable = False
        return view

    @property
    def step_sizes(self) -> np.ndarray:
        """[Q, n_features] step sizes per active feature (Autostep), or alpha / n_active broadcast."""
        if self._autostep:
            return self._autostep_state.alphas.T.copy()
        return np.full((self.n_questions, self.n_features), self.step_size())

    def step_size(self) -> float:
        """The constant method's alpha per active feature for the next update (after decay)."""
        return coding.step_size(self.config, self.update_count, self._coder.n_active)

    # -- learning

    def step(
        self, inputs, cumulants, continuations=None, *, gammas=None, usable=None, policy=None
    ) -> np.ndarray | None:
        """Learn from the previous step's inputs to these, then remember these.

        Args:
          inputs: S_{t+1} [n_inputs], in the units of the declared ranges.
          cumulants: C_{t+1} [Q], the transformed cumulant of each question.
          continuations: [Q] in [0, 1]: 0 where a question's termination holds at S_{t+1}; None: all 1.
          gammas: Gamma_t [K]; None draws it from the sampler.
          usable: [Q] bool, False where a question's cumulant or termination could not be read at
            S_{t+1} (a stale topic): that question learns neither the transition into this step nor
            the one out of it (it restarts, as :meth:`restart` does for all), and its cumulant and
            continuation are ignored. None: every question.
          policy: the off-policy questions' :class:`PolicyReadings` at S_{t+1} (the action A_{t+1} taken there):
            their rho, with the behaviour's counts, is for the transition out of this step. A question whose rho
            cannot be formed (an action not read) is not usable. Required where some question has a policy.

        Returns:
          The TD errors delta_V [Q, K] before the update (NaN rows for the questions not learned),
          or None on the first step (or after :meth:`restart`), which only records the inputs, or
          where no question learns.
        """
        s = coding.check_state(inputs, self.config.n_state, "inputs")
        rho_now = self._step_rhos(policy)
        if rho_now is not None and not np.isfinite(rho_now).all():
            usable = np.isfinite(rho_now) & (True if usable is None else np.asarray(usable, dtype=bool))
        learns = None
        if usable is not None:
            now = np.asarray(usable, dtype=bool)
            if now.shape != (self.n_questions,):
                raise ValueError(f"usable must be [{self.n_questions}], one per question; got shape {now.shape}")
            learns = now if self._usable is None else now & self._usable
        elif self._usable is not None:
            learns = self._usable
        self._usable = None if usable is None or now.all() else now.copy()
        rho_t = self._rho_t if self.off_policy else None
        if rho_t is not None:
            self.last_rhos = rho_t
        if rho_now is not None:
            self._rho_t = np.where(np.isfinite(rho_now), rho_now, 1.0)  # a NaN one's question is not usable
        if self._previous is None:
            self._previous = s
            return None
        if learns is None or learns.all():
            deltas = self.learn(self._previous, cumulants, s, continuations, gammas=gammas, rhos=rho_t)
        elif learns.any():
            deltas = self._learn_some(self._previous, cumulants, s, continuations, gammas, learns, rho_t)
        else:
            deltas = None
        self._previous = s
        return deltas

    def _step_rhos(self, policy: PolicyReadings | None) -> np.ndarray | None:
        if not self.off_policy:
            if policy is not None:
                raise ValueError("policy readings given, but no question has a policy")
            return None
        if not isinstance(policy, PolicyReadings):
            raise ValueError(f"off-policy questions need PolicyReadings each step; got {type(policy).__name__}")
        for name, a in zip(PolicyReadings._fields, policy):
            if np.shape(a) != (self.n_questions,):
                raise ValueError(f"policy {name} must be [{self.n_questions}], one per question; got {np.shape(a)}")
        return self.ratios(policy)

    def _learn_some(self, s_t, cumulants, s_tp1, continuations, gammas, learns: np.ndarray, rhos=None) -> np.ndarray:
        """:meth:`learn` for the questions where ``learns``; the others' weights and step sizes stay as they were.

        The kernels update every question at once, so the others' columns are put back after
        (a copy of those columns only, on the ticks where some question is stopped).
        """
        skipped = ~learns
        c = np.where(learns, np.nan_to_num(np.asarray(cumulants, dtype=np.float64)), 0.0)
        cont = np.ones(self.n_questions) if continuations is None else np.asarray(continuations, dtype=np.float64)
        cont = np.where(learns, cont, 1.0)
        if self.config.lam > 0.0:
            # questions sharing traces must agree on the continuation: a skipped one takes a learning
            # member's of its group (the traces are the group's, whoever learns from them)
            groups = self._groups.of_question
            for q in np.flatnonzero(skipped):
                members = np.flatnonzero((groups == groups[q]) & learns)
                if members.size:
                    cont[q] = cont[members[0]]
        kept = [(a, a[:, skipped].copy()) for a in self._per_question_state()]
        w_max = self._w_max[skipped].copy()
        try:
            deltas = self.learn(s_t, c, s_tp1, cont, gammas=gammas, rhos=rhos)
        finally:
            for a, columns in kept:
                a[:, skipped] = columns
            self._w_max[skipped] = w_max
        deltas[skipped] = np.nan
        return deltas

    def _per_question_state(self) -> list[np.ndarray]:
        """The [n_features, Q] arrays an update changes: the weights, and Autostep's step sizes and traces."""
        if self.off_policy:
            return [self._W, self._H]
        if not self._autostep:
            return [self._W]
        a = self._autostep_state
        return [self._W, a.alphas, a.h, a.v]

    def restart(self) -> None:
        """Forget the previous inputs (after a gap, e.g. stale topics): the next step only records.

        With lam > 0 the traces are cut too: nothing is learned across the gap.
        """
        self._previous = None
        self._usable = None
        self.reset_traces()

    def reset_traces(self) -> None:
        """Cut every TD(lambda) trace (the next transition does not continue from the last)."""
        if self.config.lam > 0.0:
            self._traces.reset()
            self._groups.continuation_t[:] = 1.0

    def learn(self, state_t, cumulants, state_tp1, continuations=None, *, gammas=None, rhos=None) -> np.ndarray:
        """One TD(0) update of every question on (S_t, C_{t+1}, S_{t+1}), summed over Gamma_t.

        With off-policy questions, one TDC update (TD(0)'s for the on-policy ones): ``rhos`` [Q] are
        pi(A_t | S_t) / b(A_t | S_t) >= 0, clipped at each policy's rho_max, 1 for an on-policy question
        (required: without, an off-policy question would learn the behaviour's values).

        Returns:
          The TD errors delta_V [Q, K] before the update, in each cumulant's units.
        """
        s_t = coding.check_state(state_t, self.config.n_state, "state_t")
        s_tp1 = coding.check_state(state_tp1, self.config.n_state, "state_tp1")
        c = self._per_question(cumulants, "cumulants")
        cont = (
            np.ones(self.n_questions) if continuations is None else self._per_question(continuations, "continuations")
        )
        if np.any((cont < 0.0) | (cont > 1.0)):
            q = int(np.flatnonzero((cont < 0.0) | (cont > 1.0))[0])
            raise ValueError(f"continuations must be in [0, 1]; got {float(cont[q])!r} for question {self.names[q]!r}")
        if gammas is None:
            g = self.sampler.sample()
        else:
            g = np.ascontiguousarray(validate_gammas(gammas, name="Gamma_t"))
            if self._knots is not None:
                knots.check_on_knots(g, self._knots)
        if g.shape[0] > self._scratch.idx_t.shape[0]:
            self._scratch = self._make_scratch(g.shape[0])
            self._run_work = kernels.make_run_work(self._coder.n_tilings, g.shape[0], self.n_questions)
        if self.off_policy:
            bad = self._tdc_step(s_t, s_tp1, g, c, cont, self._checked_rhos(rhos))
        elif rhos is not None:
            raise ValueError("rhos given, but no question has a policy (every question is on-policy)")
        elif self.config.lam > 0.0:
            return self._learn_lambda(s_t, c, s_tp1, cont, g)
        elif self._autostep:
            bad = kernels.autostep_step(
                self._W, s_t, s_tp1, g, c, cont, self._plain_coding, self._w_max, self._autostep_state, self._scratch,
                self._autostep_work,
            )  # fmt: skip
        else:
            bad = self._constant_step(s_t, s_tp1, g, c, cont)
        deltas = self._scratch.deltas[:, : g.shape[0]].copy()
        if bad >= 0:
            raise FloatingPointError(
                f"update {self.update_count} would make weights of question {self.names[bad]!r} non-finite or too "
                f"large (largest TD error {float(np.max(np.abs(deltas[bad]))):.3g}, cumulant {float(c[bad])!r}); "
                "learner unchanged: lower step_size, use Autostep, or check the cumulant's scale"
            )
        self.update_count += 1
        return deltas

    def _checked_rhos(self, rhos) -> np.ndarray:
        if rhos is None:  # a caller that reads no actions (a recording's) would learn the behaviour's values
            off = [n for n, p in zip(self.names, self.ratios.policies) if p is not None]
            raise ValueError(f"questions {off} have target policies: give rhos, pi / b of each step's action")
        rho = self._per_question(rhos, "rhos")
        on = ~self.ratios.off_policy
        if np.any(rho < 0.0) or np.any(rho[on] != 1.0):
            q = int(np.flatnonzero((rho < 0.0) | (on & (rho != 1.0)))[0])
            raise ValueError(f"rhos must be >= 0, and 1 for an on-policy question; got {float(rho[q])!r} for "
                             f"question {self.names[q]!r}")  # fmt: skip
        caps = np.array([np.inf if p is None else p.rho_max for p in self.ratios.policies])
        return np.ascontiguousarray(np.minimum(rho, caps))

    def _tdc_step(self, s_t, s_tp1, gammas, cumulants, continuations, rhos) -> int:
        """TDC at the constant step sizes: alpha, and each question's beta decayed like it."""
        alpha = self.step_size()
        decay = self.config.step_size_decay_steps
        factor = max(0.0, 1.0 - self.update_count / decay) if decay > 0 else 1.0
        betas = self._secondary * factor / self._coder.n_active  # alpha_at's arithmetic, per question
        weights = gradient_td_kernels.HordeWeights(self._W, self._H, self._bounds)
        questions = gradient_td_kernels.OffPolicyQuestions(cumulants, continuations, rhos)
        secondary = gradient_td_kernels.SecondarySteps(
            np.ascontiguousarray(betas), np.ascontiguousarray(betas * self._ridge * self._coder.n_active), self._marked
        )
        return gradient_td_kernels.tdc_step(
            weights, s_t, s_tp1, gammas, questions, alpha, secondary, self._plain_coding, self._scratch
        )

    def _constant_step(self, s_t, s_tp1, gammas, cumulants, continuations) -> int:
        """TD(0) at the constant step size on Gamma_t ``gammas``: the run kernel, or the plain one."""
        alpha = self.step_size()
        if self.reference_kernels:
            return kernels.constant_step(
                self._W, s_t, s_tp1, gammas, cumulants, continuations, alpha, self._plain_coding, self._w_max,
                self._scratch,
            )  # fmt: skip
        return kernels.constant_step_runs(
            self._W, s_t, s_tp1, gammas, cumulants, continuations, alpha, self._plain_coding, self._w_max,
            self._scratch, self._run_work,
        )  # fmt: skip

    def last_active_features(self, n_gammas: int) -> np.ndarray:
        """The distinct features the last :meth:`learn`, on ``n_gammas`` gammas, read: those of (S_t, gamma_k)
        and (S_{t+1}, gamma_k), and the bias.

        Each is a row of every question's weights (``W[feature, question]``): the rows a step must
        read (those of S_t also written), for a cost model of a step (``gamma-net bench horde --cost-model``).
        """
        rows = [self._scratch.idx_t[:n_gammas].ravel(), self._scratch.idx_tp1[:n_gammas].ravel()]
        bias = self._coder.kernel_args.bias_index
        return np.unique(np.concatenate(rows + ([np.array([bias])] if bias >= 0 else [])))

    def _learn_lambda(self, s_t, c, s_tp1, cont, gammas) -> np.ndarray:
        K = self._traces.gammas.shape[0]
        g, drawn = np.ascontiguousarray(gammas[:K]), np.ascontiguousarray(gammas[K:])
        if gammas.shape[0] != 2 * K or not np.array_equal(g, self._traces.gammas):
            raise ValueError(
                f"TD(lambda) keeps one trace per timescale, so Gamma_t must be the sampling's fixed ladder "
                f"{self._traces.gammas.tolist()} then a draw of {K}; got {gammas.tolist()}"
            )
        first = self._groups.members[self._groups.of_question, 0]
        if np.any(cont != cont[first]):
            q = int(np.flatnonzero(cont != cont[first])[0])
            raise ValueError(
                f"questions {self.names[first[q]]!r} and {self.names[q]!r} share TD(lambda) traces but their "
                f"continuations differ ({float(cont[first[q]])!r} and {float(cont[q])!r}): give them different "
                "trace_groups"
            )
        cfg = self.config
        # TD(0) on the draw, then TD(lambda) on the ladder (linear/traces.py); a refusal undoes both.
        before, w_max = self._W.copy(), self._w_max.copy()
        # the plain kernel here too: N questions stay N single TD(lambda) learners bit for bit
        bad = kernels.constant_step(
            self._W, s_t, s_tp1, drawn, c, cont, self.step_size(), self._plain_coding, self._w_max, self._scratch
        )
        if bad >= 0:
            deltas = self._scratch.deltas[:, : drawn.shape[0]].copy()
            raise FloatingPointError(
                f"update {self.update_count} would make weights of question {self.names[bad]!r} non-finite or too "
                f"large (largest TD error {float(np.max(np.abs(deltas[bad]))):.3g}, cumulant {float(c[bad])!r}); "
                "learner unchanged: lower step_size or lam, or check the cumulant's scale"
            )
        alpha = coding.traced_step_size(cfg, self.update_count, self._coder.n_active)
        bad = kernels.lambda_step(
            self._W, s_t, s_tp1, g, c, cont, alpha, self._plain_coding, self._w_max, self._scratch, cfg.lam,
            self._traces.kernel_args, self._groups, self._lambda_work,
        )  # fmt: skip
        deltas = self._scratch.deltas[:, : g.shape[0]].copy()
        if bad >= 0:
            self._W[:] = before
            self._w_max[:] = w_max
            raise FloatingPointError(
                f"update {self.update_count} would make weights of question {self.names[bad]!r} non-finite or too "
                f"large (largest TD error {float(np.max(np.abs(deltas[bad]))):.3g}, cumulant {float(c[bad])!r}); "
                "learner unchanged: lower step_size or lam, or check the cumulant's scale"
            )
        self.update_count += 1
        return deltas

    def _per_question(self, x, name: str) -> np.ndarray:
        try:
            a = np.asarray(x, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be numbers, one per question; got {x!r}") from None
        if a.shape != (self.n_questions,):
            raise ValueError(f"{name} must be [{self.n_questions}], one per question; got shape {a.shape}")
        if not np.all(np.isfinite(a)):
            q = int(np.flatnonzero(~np.isfinite(a))[0])
            raise ValueError(f"{name} must be finite; got {float(a[q])!r} for question {self.names[q]!r}")
        return np.ascontiguousarray(a)

    # -- answers

    def predict(self, inputs, gammas=None, *, taus=None) -> np.ndarray:
        """Predicted returns [Q, G] of every question at each timescale, in the cumulants' units.

        Args:
          inputs: one state [n_inputs].
          gammas: discounts [G] in [0, 1); or ``taus`` [G] >= 1 instead.
        """
        if (gammas is None) == (taus is None):
            raise ValueError("give exactly one of gammas or taus")
        g = validate_gammas(gammas, name="gammas") if gammas is not None else 1.0 - 1.0 / validate_taus(taus)
        s = coding.check_state(inputs, self.config.n_state, "inputs")
        at = g if self._knots is None else self._knots  # a knotted Γ-net answers between its knots (linear/knots.py)
        out = np.empty((self.n_questions, at.shape[0]))
        predict = kernels.predict if self.reference_kernels else kernels.predict_runs
        predict(self._W, s, np.ascontiguousarray(at), self._plain_coding, out)
        return out if self._knots is None else out @ knots.blend(g, self._knots).T

    @property
    def readout_names(self) -> tuple[str, ...]:
        return tuple(self._readouts)

    def readout_weights(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(gammas, coefficients) of a readout (see :mod:`gamma_net_core.horde.readouts`)."""
        if name not in self._readout_weights:
            raise ValueError(f"no readout {name!r}; readouts: {list(self._readouts)}")
        return self._readout_weights[name]

    def readout(self, inputs, name: str) -> np.ndarray:
        """[Q]: each question's prediction under the named readout's weighting over timescales."""
        gammas, coefficients = self.readout_weights(name)
        return self.predict(inputs, gammas) @ coefficients

    # -- checkpoints

    def _config_mapping(self) -> dict:
        mapping = {
            "learner": config_lib.to_mapping(self.config),
            "timescales": config_lib.to_mapping(self.timescales),
            "adaptation": config_lib.to_mapping(self.adaptation),
            "names": list(self.names),
            "readouts": [dataclasses.asdict(r) for r in self._readouts.values()],
            "rate_hz": self.rate_hz,
        }
        if self.off_policy:  # only then: an on-policy Horde's checkpoints read as before
            mapping["policies"] = [policy_mapping(p) for p in self.ratios.policies]
        return mapping

    def save(self, path: str | os.PathLike) -> pathlib.Path:
        """Atomically write the whole state (see the module docstring)."""
        arrays = {"weights": self._W.T.copy(), **self._coder.to_state_dict()}
        arrays["previous"] = np.zeros(self.n_inputs) if self._previous is None else self._previous.copy()
        if self._autostep:
            a = self._autostep_state
            arrays.update(alphas=a.alphas.T.copy(), h=a.h.T.copy(), v=a.v.T.copy())
        if self.off_policy:
            arrays.update(secondary_weights=self._H.T.copy(), behaviour_counts=self.ratios.counts.copy(),
                          rho_t=self._rho_t.copy())  # fmt: skip
        if self.config.lam > 0.0:
            arrays.update(
                traces=self._traces.z.copy(),
                trace_gammas=self._traces.gammas.copy(),
                trace_groups=self._groups.of_question.copy(),
                continuation_t=self._groups.continuation_t.copy(),
            )
        meta = {
            "update_count": int(self.update_count),
            "has_previous": self._previous is not None,
            "sampler_state": self._rng.bit_generator.state,
        }
        return save_npz(path, kind=KIND, version=VERSION, config=self._config_mapping(), arrays=arrays, meta=meta)

    @classmethod
    def load(cls, path: str | os.PathLike, *, spec: HordeSpec | None = None) -> HordeLearner:
        """A learner restored from :meth:`save`; with ``spec``, the file must have been made with it.

        Raises:
          FileNotFoundError: no such file.
          CheckpointError: not a Horde checkpoint, another version or configuration, bad arrays.
        """
        saved, arrays, meta = load_npz(path, kind=KIND, version=VERSION)
        where = str(path)
        try:
            config = config_lib.from_mapping(GammaNetConfig, saved_learner_mapping(saved["learner"]), where=where)
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"{where}: unusable configuration or tile coder state: {exc}") from None
        if spec is not None:
            # Compared with defaults filled in: a file from before a setting existed (e.g. lam) has its default.
            expected = cls.from_spec(spec, rng=np.random.default_rng(0))._config_mapping()
            check_same_config(path, {**saved, "learner": config_lib.to_mapping(config)}, expected)
        groups = arrays.get("trace_groups") if config.lam > 0.0 else None
        try:
            learner = cls(
                config,
                names=saved["names"],
                timescales=config_lib.from_mapping(TimescaleSampling, saved["timescales"], where=where),
                adaptation=config_lib.from_mapping(AdaptationConfig, saved["adaptation"], where=where),
                readouts=[Readout(**r) for r in saved["readouts"]],
                rate_hz=saved["rate_hz"],
                trace_groups=groups,
                policies=[policy_from_mapping(m) for m in saved["policies"]] if "policies" in saved else None,
                _state={k: arrays[k] for k in ("offsets", "mult", "base")},
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"{where}: unusable configuration or tile coder state: {exc}") from None
        shape = (learner.n_questions, learner.n_features)
        names = ["weights", "previous"] + (["alphas", "h", "v"] if learner._autostep else [])
        names += ["secondary_weights", "behaviour_counts", "rho_t"] if learner.off_policy else []
        wants = {"previous": (learner.n_inputs,), "rho_t": (learner.n_questions,)}
        if learner.off_policy:
            wants["behaviour_counts"] = learner.ratios.counts.shape
        for name in names:
            a = arrays.get(name)
            want = wants.get(name, shape)
            if a is None or a.dtype != np.float64 or a.shape != want:
                got = None if a is None else f"{a.dtype}{list(a.shape)}"
                raise CheckpointError(f"{where}: {name} are {got}; expected float64{list(want)}")
            if not np.all(np.isfinite(a)):
                raise CheckpointError(f"{where}: {name} hold non-finite values")
        count = meta.get("update_count")
        if not isinstance(count, int) or count < 0:
            raise CheckpointError(f"{where}: bad update_count {count!r}")
        try:
            learner._rng.bit_generator.state = meta["sampler_state"]
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"{where}: bad sampler_state: {exc}") from None
        learner._W = np.ascontiguousarray(arrays["weights"].T)
        learner._w_max = np.abs(learner._W).max(axis=0)
        if learner.off_policy:
            learner._load_off_policy(arrays)
        if learner._autostep:
            learner._set_autostep(*(np.ascontiguousarray(arrays[name].T) for name in ("alphas", "h", "v")))
        learner.update_count = count
        learner._previous = arrays["previous"].copy() if meta.get("has_previous") else None
        if config.lam > 0.0:
            learner._load_traces(arrays, where)
        return learner

    def _load_off_policy(self, arrays) -> None:
        self._H = np.ascontiguousarray(arrays["secondary_weights"].T)
        self._bounds[0], self._bounds[1] = self._w_max, np.abs(self._H).max(axis=0)
        self._w_max = self._bounds[0]
        self.ratios.counts[:] = arrays["behaviour_counts"]
        self._rho_t = arrays["rho_t"].copy()

    def _load_traces(self, arrays, where: str) -> None:
        t = self._traces
        want = {
            "traces": t.z.shape,
            "trace_gammas": t.gammas.shape,
            "continuation_t": self._groups.continuation_t.shape,
        }
        for name, shape in want.items():
            a = arrays.get(name)
            if a is None or a.dtype != np.float64 or a.shape != shape or not np.all(np.isfinite(a)):
                got = None if a is None else f"{a.dtype}{list(a.shape)}"
                raise CheckpointError(f"{where}: {name} are {got}; expected finite float64{list(shape)} (lam > 0)")
        if not np.array_equal(arrays["trace_gammas"], t.gammas):
            raise CheckpointError(f"{where}: trace_gammas differ from the sampling's ladder {t.gammas.tolist()}")
        self._traces = Traces.from_arrays(t.gammas, arrays["traces"])
        self._groups.continuation_t[:] = arrays["continuation_t"]
