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
and a readout d(a) = sum_j c_j gamma_j^a. Pending predictions sit in a ring of H per timescale,
updated in place each step (O(sum H x Q) per step)::

    errors = OnlineError(gammas=[0.0, 0.9], readouts={"hyperbolic": (gammas_j, coefficients_j)}, n_questions=Q)
    each step n (after the learner's update):
        errors.observe(cumulants, continuations, predictions)   # C_n, c_n into S_n; predictions [Q, P] at S_n
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


class OnlineError:
    """Running errors of predictions against realized returns, per question and timescale.

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
    def for_learner(cls, learner, *, taus, tail: float = TAIL) -> OnlineError:
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
