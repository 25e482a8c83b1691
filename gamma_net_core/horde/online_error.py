"""Prediction error measured online: each prediction against the return that then happens.

For each question and timescale (a gamma, or a readout's weighting over gammas) every
prediction V(S_n) waits while its return arrives; the return is complete once the weight of
the rest of the future is below :data:`~gamma_net_core.horde.readouts.TAIL` (1e-3): after H
cumulants with gamma^H < 1e-3 (a readout: its longest gamma's H), or as soon as the question's
termination stops it. The error of the prediction is then known, and so is the error of a
yardstick: the running mean of the returns completed before the prediction was made (a
prediction that learned nothing about the state).

Each timescale is a discount function d(a) over the age a of a cumulant, so a return is
``sum_a d(a) (product of continuations before it) C``; a geometric timescale has d(a) = gamma^a
and a readout d(a) = sum_j c_j gamma_j^a.

:class:`OnlineError` scores a geometric timescale in O(Q) per step: per question it keeps a
running discounted sum from an anchor step a, ``F(t) = sum_{k=a+1..t} D(k-1) C_k`` with the
factor ``D(t) = gamma^(t-a) x (continuations since a)``, and each prediction keeps F and D of its
own step n, so its return when it closes at t is ``(F(t) - F(n)) / D(n)``. A new anchor starts
every H steps and where the question terminates (its pending returns all close there, and D
would be 0), so D(n) >= gamma^H ~ 1e-3 and the division loses at most three digits; the two
latest anchors cover every pending prediction. Termination steps close the pending returns of
that question at once (those made since its previous termination: each return is closed once,
so O(Q) per step amortized). Readouts are scored by the plain
:class:`PlainOnlineError`, which updates every pending return of every timescale in a ring of H
per timescale (O(sum H x Q) per step) and is the reference the fast one is tested against::

    errors = OnlineError(gammas=[0.0, 0.9], readouts={"hyperbolic": (gammas_j, coefficients_j)}, n_questions=Q)
    each step n (after the learner's update):
        errors.observe(cumulants, continuations, predictions)   # C_n, c_n into S_n; predictions [Q, P] at S_n
    errors.restart()                                            # a gap in the stream
    errors.rmse(), errors.baseline_rmse(), errors.counts        # [Q, P]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from gamma_net_core.horde.readouts import TAIL, horizon


class _Pending:
    """The predictions of one timescale waiting for their returns, in a ring of H slots."""

    def __init__(self, discount: np.ndarray, n_questions: int) -> None:
        self.d = discount
        H = discount.shape[0]
        self.start = np.full(H, -1, dtype=np.int64)
        self.prediction = np.full((H, n_questions), np.nan)
        self.baseline = np.zeros((H, n_questions))
        self.ret = np.zeros((H, n_questions))
        self.weight = np.ones((H, n_questions))


class PlainOnlineError:
    """Running errors of predictions against realized returns, per question and timescale: the plain reference.

    Every pending return of every timescale is updated each step (O(sum H x Q)); :class:`OnlineError`
    computes the same in O(Q) per geometric timescale and is checked against this one.

    Args:
      gammas: the geometric timescales whose predictions are checked [P].
      n_questions: Q.
      readouts: optional {name: (gammas, coefficients)}: weightings checked after the gammas.
      tail: a return is complete when the weight of the rest is below this.
    """

    def __init__(
        self,
        *,
        gammas: Sequence[float],
        n_questions: int,
        readouts: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
        tail: float = TAIL,
    ) -> None:
        self.labels: list[str] = []
        self._pending: list[_Pending] = []
        for g in np.asarray(gammas, dtype=np.float64):
            a = np.arange(horizon(float(g), tail))
            self._pending.append(_Pending(g**a, n_questions))
            self.labels.append(f"tau={1.0 / (1.0 - g):g}")
        for name, (rg, rc) in (readouts or {}).items():
            a = np.arange(horizon(float(np.max(rg)), tail))
            self._pending.append(_Pending(np.asarray(rc) @ (np.asarray(rg)[:, None] ** a[None, :]), n_questions))
            self.labels.append(name)
        P = len(self._pending)
        self.n_questions = n_questions
        self.counts = np.zeros((n_questions, P), dtype=np.int64)
        self._sq = np.zeros((n_questions, P))
        self._sq_baseline = np.zeros((n_questions, P))
        self._sum_returns = np.zeros((n_questions, P))
        self._now = 0

    @classmethod
    def for_learner(cls, learner, *, taus, tail: float = TAIL):
        """The tracker of a :class:`~gamma_net_core.horde.learner.HordeLearner`'s published taus and all its readouts.

        Its columns are ``taus`` then ``learner.readout_names``: pass
        ``np.hstack([learner.predict(s, taus=taus)] + [learner.readout(s, r)[:, None] for r in names])``.
        """
        gammas = 1.0 - 1.0 / np.asarray(taus, dtype=np.float64)
        readouts = {name: learner.readout_weights(name) for name in learner.readout_names}
        return cls(gammas=gammas, n_questions=learner.n_questions, readouts=readouts, tail=tail)

    @property
    def horizons(self) -> list[int]:
        """Steps each timescale's return takes to complete (without a termination)."""
        return [p.d.shape[0] for p in self._pending]

    def restart(self) -> None:
        """After a gap in the stream: the returns pending across it are unknowable; drop them, keep the errors."""
        for pending in self._pending:
            pending.start[:] = -1
            pending.prediction[:] = np.nan

    def observe(self, cumulants, continuations, predictions) -> None:
        """Add this step's cumulants to every pending return, close the complete ones, then record new predictions.

        Args:
          cumulants: C_n [Q], received on the transition into the current state S_n.
          continuations: c_n [Q] of S_n (0 where a question's termination holds); None: all 1.
          predictions: [Q, P] made at S_n, one column per timescale (gammas, then readouts).
        """
        c = np.asarray(cumulants, dtype=np.float64)
        cont = np.ones(self.n_questions) if continuations is None else np.asarray(continuations, dtype=np.float64)
        pred = np.asarray(predictions, dtype=np.float64)
        if pred.shape != (self.n_questions, len(self._pending)):
            raise ValueError(f"predictions must be [{self.n_questions}, {len(self._pending)}]; got shape {pred.shape}")
        for p, pending in enumerate(self._pending):
            H = pending.d.shape[0]
            live = pending.start >= 0
            if np.any(live):
                age = np.where(live, self._now - pending.start - 1, 0)
                pending.ret += (pending.d[age] * live)[:, None] * pending.weight * c[None, :]
                pending.weight *= cont[None, :]
                done = (
                    live[:, None] & ((age == H - 1)[:, None] | (pending.weight == 0.0)) & ~np.isnan(pending.prediction)
                )
                if np.any(done):
                    self._close(p, pending, done)
            slot = self._now % H
            pending.start[slot] = self._now
            pending.prediction[slot] = pred[:, p]
            counts = self.counts[:, p]
            pending.baseline[slot] = np.where(counts > 0, self._sum_returns[:, p] / np.maximum(counts, 1), 0.0)
            pending.ret[slot] = 0.0
            pending.weight[slot] = 1.0
        self._now += 1

    def _close(self, p: int, pending: _Pending, done: np.ndarray) -> None:
        rows, qs = np.nonzero(done)
        ret = pending.ret[rows, qs]
        np.add.at(self._sq[:, p], qs, (pending.prediction[rows, qs] - ret) ** 2)
        np.add.at(self._sq_baseline[:, p], qs, (pending.baseline[rows, qs] - ret) ** 2)
        np.add.at(self._sum_returns[:, p], qs, ret)
        np.add.at(self.counts[:, p], qs, 1)
        pending.prediction[rows, qs] = np.nan  # closed: a slot waits for its next prediction

    def rmse(self) -> np.ndarray:
        """[Q, P]: root mean squared error of the completed predictions (nan before the first)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.sqrt(self._sq / self.counts)

    def baseline_rmse(self) -> np.ndarray:
        """[Q, P]: the same for the running mean of earlier returns."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.sqrt(self._sq_baseline / self.counts)


class _Geometric:
    """One geometric timescale scored from running discounted sums (see the module docstring)."""

    def __init__(self, gamma: float, H: int, n_questions: int) -> None:
        self.gamma = gamma
        self.H = H
        Q = n_questions
        # two anchors per question: the latest (index `latest`) and the one before it
        self.F = np.zeros((2, Q))
        self.D = np.ones((2, Q))
        # an anchor at step a has summed nothing after a's own update; the first step is 0
        self.anchor = np.full((2, Q), -1, dtype=np.int64)
        self.latest = np.zeros(Q, dtype=np.int64)
        # the pending predictions, in a ring of H slots by step
        self.start = np.full(H, -1, dtype=np.int64)
        self.prediction = np.full((H, Q), np.nan)
        self.baseline = np.zeros((H, Q))
        self.F0 = np.zeros((H, Q))
        self.D0 = np.ones((H, Q))
        self.which = np.zeros((H, Q), dtype=np.int64)

    def reanchor(self, now: int, qs) -> None:
        """Start both anchors of questions ``qs`` at step ``now``: no pending return reaches before it."""
        self.F[:, qs] = 0.0
        self.D[:, qs] = 1.0
        self.anchor[:, qs] = now
        self.latest[qs] = 0

    def returns(self, rows, qs) -> np.ndarray:
        """The returns of the pending predictions at (slot, question) pairs, as of now."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return (self.F[self.which[rows, qs], qs] - self.F0[rows, qs]) / self.D0[rows, qs]


class OnlineError:
    """Running errors of predictions against realized returns, per question and timescale.

    Equal, to float rounding, to :class:`PlainOnlineError` (continuations 0 or 1, as terminations
    give), in O(Q) per geometric timescale per step.

    Args:
      gammas: the geometric timescales whose predictions are checked [P].
      n_questions: Q.
      readouts: optional {name: (gammas, coefficients)}: weightings checked after the gammas.
      tail: a return is complete when the weight of the rest is below this.
    """

    def __init__(
        self,
        *,
        gammas: Sequence[float],
        n_questions: int,
        readouts: Mapping[str, tuple[np.ndarray, np.ndarray]] | None = None,
        tail: float = TAIL,
    ) -> None:
        self.n_questions = n_questions
        gammas = np.asarray(gammas, dtype=np.float64).reshape(-1)
        self._geometric = [_Geometric(float(g), horizon(float(g), tail), n_questions) for g in gammas]
        self._readouts = (
            PlainOnlineError(gammas=[], n_questions=n_questions, readouts=readouts, tail=tail) if readouts else None
        )
        self.labels: list[str] = [f"tau={1.0 / (1.0 - g):g}" for g in gammas]
        if self._readouts is not None:
            self.labels += self._readouts.labels
        G = len(self._geometric)
        self._counts = np.zeros((n_questions, G), dtype=np.int64)
        self._sq = np.zeros((n_questions, G))
        self._sq_baseline = np.zeros((n_questions, G))
        self._sum_returns = np.zeros((n_questions, G))
        self._last_termination = np.full(n_questions, -1, dtype=np.int64)
        self._now = 0

    for_learner = classmethod(PlainOnlineError.for_learner.__func__)

    @property
    def horizons(self) -> list[int]:
        """Steps each timescale's return takes to complete (without a termination)."""
        return [g.H for g in self._geometric] + (self._readouts.horizons if self._readouts is not None else [])

    @property
    def counts(self) -> np.ndarray:
        """[Q, P]: the predictions scored so far."""
        if self._readouts is None:
            return self._counts
        return np.hstack([self._counts, self._readouts.counts])

    def restart(self) -> None:
        """After a gap in the stream: the returns pending across it are unknowable; drop them, keep the errors."""
        everyone = np.arange(self.n_questions)
        for g in self._geometric:
            g.start[:] = -1
            g.prediction[:] = np.nan
            g.reanchor(self._now - 1, everyone)  # the next step's cumulant is the first summed
        if self._readouts is not None:
            self._readouts.restart()

    def observe(self, cumulants, continuations, predictions) -> None:
        """Add this step's cumulants to the pending returns, close the complete ones, then record new predictions.

        Args:
          cumulants: C_n [Q], received on the transition into the current state S_n.
          continuations: c_n [Q] of S_n (0 where a question's termination holds); None: all 1.
          predictions: [Q, P] made at S_n, one column per timescale (gammas, then readouts).
        """
        c = np.asarray(cumulants, dtype=np.float64)
        cont = np.ones(self.n_questions) if continuations is None else np.asarray(continuations, dtype=np.float64)
        pred = np.asarray(predictions, dtype=np.float64)
        G = len(self._geometric)
        width = G + (len(self._readouts.labels) if self._readouts is not None else 0)
        if pred.shape != (self.n_questions, width):
            raise ValueError(f"predictions must be [{self.n_questions}, {width}]; got shape {pred.shape}")
        now = self._now
        terminated = np.flatnonzero(cont == 0.0)
        everyone = np.arange(self.n_questions)
        for p, g in enumerate(self._geometric):
            g.F += g.D * c
            g.D *= g.gamma * cont
            # the prediction made H steps ago is complete now
            slot = now % g.H
            if g.start[slot] == now - g.H:
                qs = np.flatnonzero(~np.isnan(g.prediction[slot]))
                if qs.size:
                    self._close(p, g, np.full(qs.size, slot), qs)
            # a termination completes every pending return of its question: those made since its last one
            if terminated.size:
                rows, qs = self._since_last_termination(g, now, terminated)
                if rows.size:
                    self._close(p, g, rows, qs)
                g.reanchor(now, terminated)
            # an anchor older than H steps: start a new one, keeping the latest for the predictions made since it
            latest = g.anchor[g.latest, everyone]
            old = np.flatnonzero(now - latest >= g.H)
            if old.size:
                fresh = 1 - g.latest[old]
                g.F[fresh, old] = 0.0
                g.D[fresh, old] = 1.0
                g.anchor[fresh, old] = now
                g.latest[old] = fresh
            g.start[slot] = now
            g.prediction[slot] = pred[:, p]
            counts = self._counts[:, p]
            g.baseline[slot] = np.where(counts > 0, self._sum_returns[:, p] / np.maximum(counts, 1), 0.0)
            g.which[slot] = g.latest
            g.F0[slot] = g.F[g.latest, everyone]
            g.D0[slot] = g.D[g.latest, everyone]
        if self._readouts is not None:
            self._readouts.observe(c, cont, pred[:, G:])
        self._last_termination[terminated] = now
        self._now += 1

    def _since_last_termination(self, g: _Geometric, now: int, qs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(slots, questions) of the predictions of ``qs`` still pending: made after each one's last termination.

        Each prediction is visited once here, so a question terminating step after step costs O(1) a step.
        """
        # the prediction made at the termination step itself is the first pending one
        waiting = np.minimum(now - np.maximum(self._last_termination[qs], 0), g.H - 1)
        total = int(waiting.sum())
        if total == 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        questions = np.repeat(qs, waiting)
        # ages 0, 1, ... waiting-1 of each question, back from the step before now
        age = np.arange(total) - np.repeat(np.cumsum(waiting) - waiting, waiting)
        starts = now - 1 - age
        slots = starts % g.H
        pending = (g.start[slots] == starts) & ~np.isnan(g.prediction[slots, questions])
        return slots[pending], questions[pending]

    def _close(self, p: int, g: _Geometric, rows: np.ndarray, qs: np.ndarray) -> None:
        ret = g.returns(rows, qs)
        np.add.at(self._sq[:, p], qs, (g.prediction[rows, qs] - ret) ** 2)
        np.add.at(self._sq_baseline[:, p], qs, (g.baseline[rows, qs] - ret) ** 2)
        np.add.at(self._sum_returns[:, p], qs, ret)
        np.add.at(self._counts[:, p], qs, 1)
        g.prediction[rows, qs] = np.nan  # closed: a slot waits for its next prediction

    def rmse(self) -> np.ndarray:
        """[Q, P]: root mean squared error of the completed predictions (nan before the first)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.sqrt(self._sq / self._counts)
        return out if self._readouts is None else np.hstack([out, self._readouts.rmse()])

    def baseline_rmse(self) -> np.ndarray:
        """[Q, P]: the same for the running mean of earlier returns."""
        with np.errstate(invalid="ignore", divide="ignore"):
            out = np.sqrt(self._sq_baseline / self._counts)
        return out if self._readouts is None else np.hstack([out, self._readouts.baseline_rmse()])
