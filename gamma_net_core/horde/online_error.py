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
latest anchors cover every pending prediction. A readout is the same sum over its components
gamma_j (weights a_j): component j's part of a prediction's return is complete after W_j steps
(its readout's horizon, or sooner where gamma_j^W_j < 1e-17, below float rounding) and is added
to the prediction's return then; its anchors start every P_j steps (gamma_j^P_j >= 1e-4), in
turn among ceil(W_j / P_j) + 1 of them, so no division loses more than four digits. A
termination closes the pending returns of its question (those made since its previous
termination: each return is closed once, so O(1) a step amortized). One numba kernel call a
step does it all; :class:`PlainOnlineError` updates every pending return of every timescale in
a ring of H per timescale (O(sum H x Q) a step) and is the reference the fast one is tested
against::

    errors = OnlineError(gammas=[0.0, 0.9], readouts={"hyperbolic": (gammas_j, coefficients_j)}, n_questions=Q)
    each step n (after the learner's update):
        errors.observe(cumulants, continuations, predictions)   # C_n, c_n into S_n; predictions [Q, P] at S_n
    errors.restart()                                            # a gap in the stream
    errors.rmse(), errors.baseline_rmse(), errors.counts        # [Q, P]
    errors.realized()                                           # the returns complete at this step

Each closed return is also kept, with the prediction it scored, until the next step:
:meth:`OnlineError.realized` gives, per question and column, the return that completed at the
latest step beside the prediction made where it starts and how many steps before (its horizon
H, or fewer where a termination ended it), so a viewer plots prediction-then against
return-realized. Where several complete at once (a termination closes every pending return of
its question) it is the earliest made: without terminations, consecutive steps give consecutive
predictions. It costs O(1) per closed return and O(Q x P) of memory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numba
import numpy as np

from gamma_net_core.horde.readouts import TAIL, horizon


class RealizedReturns(NamedTuple):
    """The returns that completed at the latest step, per question and column [Q, P] (gammas, then readouts).

    Attributes:
      returns: the realized return G_n, in the cumulant's units (NaN where none completed at the latest step).
      predictions: the prediction V(S_n) it scores (NaN where none completed).
      steps_ago: the latest step minus n: the return's length, H or fewer after a termination (0 where none).
    """

    returns: np.ndarray
    predictions: np.ndarray
    steps_ago: np.ndarray


def _realized(now: int, latest) -> RealizedReturns:
    """The returns closed at step ``now`` from the latest-closed record ``(return, prediction, made, closed)``."""
    ret, prediction, made, closed = latest
    fresh = closed == now
    return RealizedReturns(
        returns=np.where(fresh, ret, np.nan),
        predictions=np.where(fresh, prediction, np.nan),
        steps_ago=np.where(fresh, now - made, 0),
    )


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
    computes the same in O(Q) per timescale (O(Q x components) per readout) and is checked against
    this one.

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
        # the latest closed return of each question and column: (G, its prediction, made at, closed at)
        shape = (n_questions, P)
        self._latest = (np.zeros(shape), np.zeros(shape), np.zeros(shape, np.int64), np.full(shape, -1, np.int64))
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

    def restart(self, questions=None) -> None:
        """After a gap in the stream: the returns pending across it are unknowable; drop them, keep the errors.

        ``questions`` ([Q] bool): only theirs (a gap in their cumulants alone); None: every question's.
        """
        for pending in self._pending:
            if questions is None:
                pending.start[:] = -1
            pending.prediction[:, _columns_of(questions)] = np.nan

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
        ret_, prediction, made, closed = self._latest
        for row, q, g in zip(rows, qs, ret):  # of the returns closing together, the earliest made is kept
            if closed[q, p] != self._now or pending.start[row] < made[q, p]:
                ret_[q, p], prediction[q, p] = g, pending.prediction[row, q]
                made[q, p], closed[q, p] = pending.start[row], self._now
        pending.prediction[rows, qs] = np.nan  # closed: a slot waits for its next prediction

    def rmse(self) -> np.ndarray:
        """[Q, P]: root mean squared error of the completed predictions (nan before the first)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.sqrt(self._sq / self.counts)

    def baseline_rmse(self) -> np.ndarray:
        """[Q, P]: the same for the running mean of earlier returns."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.sqrt(self._sq_baseline / self.counts)

    def realized(self) -> RealizedReturns:
        """The returns that completed at the latest observed step, each with the prediction it scores."""
        return _realized(self._now - 1, self._latest)


#: A readout's component gamma_j is summed until gamma_j^W < this: the rest is below float rounding.
COMPONENT_TAIL = 1e-17
#: Anchors of a component start every P steps, gamma_j^P >= this: the division by D loses <= 4 digits.
ANCHOR_TAIL = 1e-4


def _columns_of(questions):
    """The question columns a restart touches: all (None), or those where ``questions`` is True."""
    return slice(None) if questions is None else np.asarray(questions, dtype=bool)


def _starts(sizes: np.ndarray) -> np.ndarray:
    """Where each of consecutive blocks of these sizes starts."""
    return np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)


class _Columns(NamedTuple):
    """The fixed layout: per column p (a gamma or a readout) its ``horizon`` H and its ring's first slot
    ``ring_offset``, its components ``first[p]`` to ``last[p]``; per component m its ``gamma`` and
    ``coefficient``, its window W (``window``: steps until its part is complete), its anchors' period,
    their count ``n_anchors`` and first row ``anchor_offset``, and its entries' first row ``entry_offset``."""

    horizon: np.ndarray
    ring_offset: np.ndarray
    first: np.ndarray
    last: np.ndarray
    gamma: np.ndarray
    coefficient: np.ndarray
    window: np.ndarray
    period: np.ndarray
    n_anchors: np.ndarray
    anchor_offset: np.ndarray
    entry_offset: np.ndarray


class _Anchors(NamedTuple):
    """Per anchor row and question: the running sum F, the factor D, the step it started; per component
    and question the ``latest`` anchor (0 .. n_anchors - 1)."""

    F: np.ndarray
    D: np.ndarray
    start: np.ndarray
    latest: np.ndarray


class _Waiting(NamedTuple):
    """The predictions waiting for their returns: per ring slot the step it was made (``start``, -1: none)
    and per slot and question the ``prediction`` (nan once closed), the yardstick's ``baseline`` and the
    ``completed`` components' parts of its return; per component entry the anchor it was made under
    (``which``) and that anchor's F0 and D0 then."""

    start: np.ndarray
    prediction: np.ndarray
    baseline: np.ndarray
    completed: np.ndarray
    F0: np.ndarray
    D0: np.ndarray
    which: np.ndarray


class _Scores(NamedTuple):
    """Per question and column: squared errors of the predictions and of the yardstick, the sum of the
    completed returns and their count, and the latest closed return (``latest_return``) with its
    prediction, the step it was made and the step it closed; per question the step of its last termination."""

    sq: np.ndarray
    sq_baseline: np.ndarray
    sum_returns: np.ndarray
    counts: np.ndarray
    last_termination: np.ndarray
    latest_return: np.ndarray
    latest_prediction: np.ndarray
    latest_made: np.ndarray
    latest_closed: np.ndarray


@numba.njit(cache=True, error_model="numpy")
def _part(m, cs, q, anchor_offset, coefficient, F, waiting):  # pragma: no cover - compiled
    """Component m's share of a pending prediction's return (its entry cs), as of now."""
    F_now = F[anchor_offset[m] + waiting.which[cs, q], q]
    return coefficient[m] * (F_now - waiting.F0[cs, q]) / waiting.D0[cs, q]


@numba.njit(cache=True, error_model="numpy")
def _close(p, s, q, ret, waiting, scores):  # pragma: no cover - compiled
    """Score the prediction in slot s of question q against its return ``ret``."""
    prediction = waiting.prediction
    scores.sq[q, p] += (prediction[s, q] - ret) ** 2
    scores.sq_baseline[q, p] += (waiting.baseline[s, q] - ret) ** 2
    scores.sum_returns[q, p] += ret
    scores.counts[q, p] += 1
    prediction[s, q] = np.nan  # closed: a slot waits for its next prediction


# Each kernel reads the bundles' fields it uses into locals, one a line, before its loops: the compiler
# does not hoist a field read out of a loop (see gamma_net_core.linear.kernels). Each local array costs a
# reference count where it is read, so the inlined helpers loop over the questions themselves: read per
# question, they made a step 4.7x slower. _part and _close are small calls, as they always were.


@numba.njit(cache=True, error_model="numpy", inline="always")
def _add_cumulants(now, cumulants, continuations, p, columns, anchors, waiting):  # pragma: no cover - compiled
    """Column p's anchors sum this step's cumulants; the components complete now add their parts."""
    Q = cumulants.shape[0]
    h = columns.horizon[p]
    ring_offset = columns.ring_offset[p]
    gammas = columns.gamma
    coefficient = columns.coefficient
    window = columns.window
    n_anchors = columns.n_anchors
    anchor_offset = columns.anchor_offset
    entry_offset = columns.entry_offset
    F = anchors.F
    D = anchors.D
    start = waiting.start
    prediction = waiting.prediction
    completed = waiting.completed
    for m in range(columns.first[p], columns.last[p]):
        gamma = gammas[m]
        for k in range(anchor_offset[m], anchor_offset[m] + n_anchors[m]):
            for q in range(Q):
                F[k, q] += D[k, q] * cumulants[q]
                D[k, q] *= gamma * continuations[q]
        # the prediction made W steps ago has all of this component's part now
        made = now - window[m]
        s = ring_offset + made % h
        if made >= 0 and start[s] == made:
            cs = entry_offset[m] + made % window[m]
            for q in range(Q):
                if not np.isnan(prediction[s, q]):
                    completed[s, q] += _part(m, cs, q, anchor_offset, coefficient, F, waiting)


@numba.njit(cache=True, error_model="numpy", inline="always")
def _terminate(now, continuations, p, columns, anchors, waiting, scores):  # pragma: no cover - compiled
    """Each question that terminates now: close column p's pending returns of it, restart its anchors."""
    h = columns.horizon[p]
    ring_offset = columns.ring_offset[p]
    first = columns.first[p]
    last = columns.last[p]
    coefficient = columns.coefficient
    window = columns.window
    n_anchors = columns.n_anchors
    anchor_offset = columns.anchor_offset
    entry_offset = columns.entry_offset
    F = anchors.F
    D = anchors.D
    anchor_start = anchors.start
    start = waiting.start
    prediction = waiting.prediction
    completed = waiting.completed
    latest = anchors.latest
    last_termination = scores.last_termination
    latest_return = scores.latest_return
    latest_prediction = scores.latest_prediction
    latest_made = scores.latest_made
    latest_closed = scores.latest_closed
    for q in range(continuations.shape[0]):
        if continuations[q] != 0.0:
            continue
        # a termination completes the pending returns of its question: those made since its previous
        # one (the prediction at that step included), so each is visited once
        n_waiting = min(now - max(last_termination[q], 0), h - 1)
        for age in range(n_waiting):
            made = now - 1 - age
            s = ring_offset + made % h
            if start[s] == made and not np.isnan(prediction[s, q]):
                ret = completed[s, q]
                for m in range(first, last):
                    if now - made < window[m]:
                        cs = entry_offset[m] + made % window[m]
                        ret += _part(m, cs, q, anchor_offset, coefficient, F, waiting)
                # newest first: each is kept over the last, unless the one closed at its horizon now is older
                if latest_closed[q, p] != now or made < latest_made[q, p]:
                    latest_return[q, p], latest_prediction[q, p] = ret, prediction[s, q]
                    latest_made[q, p], latest_closed[q, p] = made, now
                _close(p, s, q, ret, waiting, scores)
        for m in range(first, last):
            for k in range(anchor_offset[m], anchor_offset[m] + n_anchors[m]):
                F[k, q] = 0.0
                D[k, q] = 1.0
                anchor_start[k, q] = now
            latest[m, q] = 0


@numba.njit(cache=True, error_model="numpy", inline="always")
def _renew_anchors(now, continuations, p, columns, anchors):  # pragma: no cover - compiled
    """For each question that continues, start a new anchor where column p's latest is a period old."""
    period = columns.period
    n_anchors = columns.n_anchors
    anchor_offset = columns.anchor_offset
    F = anchors.F
    D = anchors.D
    anchor_start = anchors.start
    latest = anchors.latest
    first = columns.first[p]
    last = columns.last[p]
    for q in range(continuations.shape[0]):
        if continuations[q] == 0.0:
            continue
        for m in range(first, last):
            offset = anchor_offset[m]
            if now - anchor_start[offset + latest[m, q], q] >= period[m]:
                # a new anchor in turn: the one it replaces serves no pending prediction any more
                fresh = (latest[m, q] + 1) % n_anchors[m]
                k = offset + fresh
                F[k, q] = 0.0
                D[k, q] = 1.0
                anchor_start[k, q] = now
                latest[m, q] = fresh


@numba.njit(cache=True, error_model="numpy", inline="always")
def _record(now, p, slot, predictions, columns, anchors, waiting, scores):  # pragma: no cover - compiled
    """Column p's predictions made now wait in ``slot``, with the yardstick and each component's anchor."""
    first = columns.first[p]
    last = columns.last[p]
    window = columns.window
    anchor_offset = columns.anchor_offset
    entry_offset = columns.entry_offset
    F = anchors.F
    D = anchors.D
    latest = anchors.latest
    prediction = waiting.prediction
    baseline = waiting.baseline
    completed = waiting.completed
    which = waiting.which
    F0 = waiting.F0
    D0 = waiting.D0
    counts = scores.counts
    sum_returns = scores.sum_returns
    waiting.start[slot] = now
    for q in range(predictions.shape[0]):
        prediction[slot, q] = predictions[q, p]
        baseline[slot, q] = sum_returns[q, p] / counts[q, p] if counts[q, p] > 0 else 0.0
        completed[slot, q] = 0.0
        for m in range(first, last):
            cs = entry_offset[m] + now % window[m]
            k = latest[m, q]
            which[cs, q] = k
            F0[cs, q] = F[anchor_offset[m] + k, q]
            D0[cs, q] = D[anchor_offset[m] + k, q]


@numba.njit(cache=True, error_model="numpy")
def _observe(now, cumulants, continuations, predictions, plain):  # pragma: no cover
    """One step of every timescale and readout: sums, completed parts and returns, anchors, new predictions.

    ``plain``: the four bundles as plain tuples, named here (a named tuple's dispatch costs microseconds
    a call: see :meth:`gamma_net_core.linear.kernels.Coding.plain`).
    """
    columns, anchors = _Columns(*plain[0]), _Anchors(*plain[1])
    waiting, scores = _Waiting(*plain[2]), _Scores(*plain[3])
    Q = cumulants.shape[0]
    horizon = columns.horizon
    ring_offset = columns.ring_offset
    start = waiting.start
    prediction = waiting.prediction
    completed = waiting.completed
    last_termination = scores.last_termination
    latest_return = scores.latest_return
    latest_prediction = scores.latest_prediction
    latest_made = scores.latest_made
    latest_closed = scores.latest_closed
    for p in range(horizon.shape[0]):
        h = horizon[p]
        slot = ring_offset[p] + now % h
        _add_cumulants(now, cumulants, continuations, p, columns, anchors, waiting)
        # the prediction made H steps ago is complete now
        if start[slot] == now - h:
            for q in range(Q):
                if not np.isnan(prediction[slot, q]):
                    # the earliest made of any return complete now: the one realized() gives
                    latest_return[q, p], latest_prediction[q, p] = completed[slot, q], prediction[slot, q]
                    latest_made[q, p], latest_closed[q, p] = now - h, now
                    _close(p, slot, q, completed[slot, q], waiting, scores)
        # per question, a termination or the anchors' renewal (each touches its own question only)
        _terminate(now, continuations, p, columns, anchors, waiting, scores)
        _renew_anchors(now, continuations, p, columns, anchors)
        _record(now, p, slot, predictions, columns, anchors, waiting, scores)
    for q in range(Q):
        if continuations[q] == 0.0:
            last_termination[q] = now


class OnlineError:
    """Running errors of predictions against realized returns, per question and timescale.

    Equal, to float rounding, to :class:`PlainOnlineError` (continuations 0 or 1, as terminations
    give), in O(Q) per geometric timescale and O(Q x components) per readout a step.

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
        self.labels: list[str] = [f"tau={1.0 / (1.0 - g):g}" for g in gammas]
        # columns: each gamma (one component, summed over its whole horizon), then each readout
        columns = []
        for g in gammas:
            H = horizon(float(g), tail)
            columns.append((H, [(float(g), 1.0, H, H)]))
        for name, (rg, rc) in (readouts or {}).items():
            rg, rc = np.asarray(rg, dtype=np.float64), np.asarray(rc, dtype=np.float64)
            H = horizon(float(np.max(rg)), tail)
            parts = []
            for g, a in zip(rg, rc):
                w = min(H, horizon(float(g), COMPONENT_TAIL))
                parts.append((float(g), float(a), w, min(w, horizon(float(g), ANCHOR_TAIL))))
            columns.append((H, parts))
            self.labels.append(name)
        H = np.array([h for h, _ in columns], dtype=np.int64)
        n_parts = np.array([len(parts) for _, parts in columns], dtype=np.int64)
        parts = [part for _, ps in columns for part in ps]
        window = np.array([w for _, _, w, _ in parts], dtype=np.int64)
        period = np.array([period for _, _, _, period in parts], dtype=np.int64)
        # enough anchors that the one replaced in turn has served its last prediction's W steps
        n_anchors = (-(-window // period) + 1).astype(np.int64)
        self._columns = _Columns(
            horizon=H,
            ring_offset=_starts(H),
            first=_starts(n_parts),
            last=np.cumsum(n_parts).astype(np.int64),
            gamma=np.array([g for g, _, _, _ in parts]),
            coefficient=np.array([a for _, a, _, _ in parts]),
            window=window,
            period=period,
            n_anchors=n_anchors,
            anchor_offset=_starts(n_anchors),
            entry_offset=_starts(window),
        )
        P, Q, A, E, S = len(columns), n_questions, int(n_anchors.sum()), int(window.sum()), int(H.sum())
        self._anchors = _Anchors(
            F=np.zeros((A, Q)),
            D=np.ones((A, Q)),
            start=np.full((A, Q), -1, dtype=np.int64),  # an anchor at a has summed nothing after a
            latest=np.zeros((len(parts), Q), dtype=np.int64),
        )
        # the pending predictions: a ring of H slots per column, one after another; each component's
        # sums at its pending predictions: a ring of W entries per component
        self._waiting = _Waiting(
            start=np.full(S, -1, dtype=np.int64),
            prediction=np.full((S, Q), np.nan),
            baseline=np.zeros((S, Q)),
            completed=np.zeros((S, Q)),
            F0=np.zeros((E, Q)),
            D0=np.ones((E, Q)),
            which=np.zeros((E, Q), dtype=np.int64),
        )
        self._scores = _Scores(
            sq=np.zeros((Q, P)),
            sq_baseline=np.zeros((Q, P)),
            sum_returns=np.zeros((Q, P)),
            counts=np.zeros((Q, P), dtype=np.int64),
            last_termination=np.full(Q, -1, dtype=np.int64),
            latest_return=np.zeros((Q, P)),
            latest_prediction=np.zeros((Q, P)),
            latest_made=np.zeros((Q, P), dtype=np.int64),
            latest_closed=np.full((Q, P), -1, dtype=np.int64),
        )
        self.counts = self._scores.counts
        # The kernel's arguments, built once: restart() and observe() change the arrays in place.
        self._plain = (tuple(self._columns), tuple(self._anchors), tuple(self._waiting), tuple(self._scores))
        self._now = 0

    for_learner = classmethod(PlainOnlineError.for_learner.__func__)

    @property
    def horizons(self) -> list[int]:
        """Steps each timescale's return takes to complete (without a termination)."""
        return [int(h) for h in self._columns.horizon]

    def restart(self, questions=None) -> None:
        """After a gap in the stream: the returns pending across it are unknowable; drop them, keep the errors.

        ``questions`` ([Q] bool): only theirs (a gap in their cumulants alone: a stale topic of
        theirs; observe them meanwhile with NaN predictions, which are never scored); None: every
        question's.
        """
        q = _columns_of(questions)
        if questions is None:
            self._waiting.start[:] = -1
        self._waiting.prediction[:, q] = np.nan  # a NaN prediction is never closed nor scored
        self._anchors.F[:, q] = 0.0
        self._anchors.D[:, q] = 1.0
        self._anchors.start[:, q] = self._now - 1  # the next step's cumulant is the first summed
        self._anchors.latest[:, q] = 0

    def observe(self, cumulants, continuations, predictions) -> None:
        """Add this step's cumulants to the pending returns, close the complete ones, then record new predictions.

        Args:
          cumulants: C_n [Q], received on the transition into the current state S_n.
          continuations: c_n [Q] of S_n (0 where a question's termination holds); None: all 1.
          predictions: [Q, P] made at S_n, one column per timescale (gammas, then readouts).
        """
        Q, P = self.n_questions, self._columns.horizon.shape[0]
        c = np.asarray(cumulants, dtype=np.float64)
        cont = np.ones(Q) if continuations is None else np.asarray(continuations, dtype=np.float64)
        pred = np.ascontiguousarray(predictions, dtype=np.float64)
        if pred.shape != (Q, P):
            raise ValueError(f"predictions must be [{Q}, {P}]; got shape {pred.shape}")
        if c.shape != (Q,) or cont.shape != (Q,):
            raise ValueError(f"cumulants and continuations must be [{Q}]; got {c.shape}, {cont.shape}")
        _observe(self._now, c, cont, pred, self._plain)
        self._now += 1

    def rmse(self) -> np.ndarray:
        """[Q, P]: root mean squared error of the completed predictions (nan before the first)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.sqrt(self._scores.sq / self.counts)

    def baseline_rmse(self) -> np.ndarray:
        """[Q, P]: the same for the running mean of earlier returns."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.sqrt(self._scores.sq_baseline / self.counts)

    def realized(self) -> RealizedReturns:
        """The returns that completed at the latest observed step, each with the prediction it scores."""
        scores = self._scores
        latest = (scores.latest_return, scores.latest_prediction, scores.latest_made, scores.latest_closed)
        return _realized(self._now - 1, latest)
