"""The online error of off-policy questions: a RUPEE-like estimate (White 2012), beside the on-policy ones'.

An off-policy question's realized return is the behaviour's, not the target's, so scoring its
prediction against it (:mod:`gamma_net_core.horde.online_error`) would measure the wrong thing; an
importance-weighted return multiplies up to H ratios and its variance explodes at long timescales.
White's RUPEE instead estimates the root of the projected Bellman error the learner minimizes,

    RUPEE = sqrt(| h^T E_b[rho delta x] |),   h ~ E[x x^T]^-1 E_b[rho delta x],

for which TDC's secondary weights are the h (they learn that regression; with their ridge, the default, a
shrunk one, h . x about 1 / (1 + kappa) of it on a tile code, so RUPEE reads about 1 / sqrt(1 + kappa) of the
unshrunk estimate: a scale, which leaves its fall as the question learns as it was). Since h moves
slowly, E_b[rho delta h^T x] is tracked instead of the vector E_b[rho delta x]: one running mean
per question and published timescale, O(Q x G) a step. Per published gamma and step, with the
predictions as published (V at S_t from the previous step, at S_{t+1} after this step's update)::

    delta = s(gamma) (C_{t+1} + gamma c_{t+1} V(S_{t+1}) - V(S_t))      the TD error of the learner's output
    u    += (rho_t delta (h . x(S_t, gamma)) - u) / min(n, horizon)     a running mean over ~horizon steps
    RUPEE = sqrt(|u|) / s(gamma)                                        in the cumulant's units, like an rmse

(s = 1 - gamma under loss scaling). It falls towards 0 as the question learns, whatever rho's
spread. :class:`ErrorsWithOffPolicy` reports it in place of an off-policy question's realized
return error (``rmse``; its readouts' and the yardstick ``baseline_rmse`` are NaN: there is no
target return to score), and ``counts`` the steps it averaged. On-policy questions are scored as
before.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gamma_net_core.horde.online_error import OnlineError, RealizedReturns

#: Steps the running mean of RUPEE averages over once it has seen that many (White's beta_0 = 1 / HORIZON).
HORIZON = 1000


class Rupee:
    """RUPEE-like error [Q, G] of each question at ``gammas``.

    Args:
      gammas: the published timescales [G].
      n_questions: Q.
      loss_scaling: the learner's (its output is (1 - gamma) V).
      horizon: steps of the running mean.
    """

    def __init__(self, *, gammas: Sequence[float], n_questions: int, loss_scaling: bool, horizon: int = HORIZON):
        self.gammas = np.asarray(gammas, dtype=np.float64).reshape(-1)
        self.scales = 1.0 - self.gammas if loss_scaling else np.ones_like(self.gammas)
        self.horizon = int(horizon)
        shape = (n_questions, self.gammas.shape[0])
        self.mean = np.zeros(shape)
        self.counts = np.zeros(shape, dtype=np.int64)
        self._values = np.full(shape, np.nan)  # V(S_t) as published; NaN: no S_t to learn from
        self._secondary = np.full(shape, np.nan)  # h . x(S_t, gamma)

    def restart(self, questions=None) -> None:
        """Forget S_t (all questions', or where ``questions`` [Q] is True): no TD error spans a gap."""
        rows = slice(None) if questions is None else np.asarray(questions, dtype=bool)
        self._values[rows] = np.nan
        self._secondary[rows] = np.nan

    def observe(self, cumulants, continuations, values, secondary, rhos) -> None:
        """Add the transition into S_{t+1}; remember S_{t+1}'s values.

        Args:
          cumulants: C_{t+1} [Q]; NaN where a question is stopped (nothing is added for it).
          continuations: c_{t+1} [Q].
          values: V(S_{t+1}, gamma) [Q, G] as published (NaN where stopped).
          secondary: h . x(S_{t+1}, gamma) [Q, G] (TDC's secondary weights, their raw output).
          rhos: rho_t [Q] of the action taken at S_t, the one the learner applied to this transition.
        """
        c = np.asarray(cumulants, dtype=np.float64)[:, None]
        cont = np.asarray(continuations, dtype=np.float64)[:, None]
        delta = self.scales * (c + self.gammas * cont * values - self._values)
        term = np.asarray(rhos, dtype=np.float64)[:, None] * delta * self._secondary
        ok = np.isfinite(term)
        self.counts += ok
        step = np.where(ok, 1.0 / np.maximum(np.minimum(self.counts, self.horizon), 1), 0.0)
        self.mean += step * np.where(ok, term - self.mean, 0.0)
        self._values = np.array(values, dtype=np.float64)
        self._secondary = np.array(secondary, dtype=np.float64)

    def rupee(self) -> np.ndarray:
        """[Q, G]: sqrt(|running mean|) in the cumulant's units (NaN before the first transition)."""
        return np.where(self.counts > 0, np.sqrt(np.abs(self.mean)) / self.scales, np.nan)


class ErrorsWithOffPolicy:
    """A Horde's online errors: realized-return errors of its on-policy questions, RUPEE of its off-policy ones.

    The node's :class:`~gamma_net_core.horde.online_error.OnlineError`, with a :class:`Rupee` beside it fed from
    the learner (its secondary weights at the published gammas and the ratio it last applied)::

        errors = ErrorsWithOffPolicy(learner, gammas=gammas, readouts=readouts)
        each step, after learner.step:  errors.observe(cumulants, continuations, table)   # table [Q, G + R]
        errors.rmse(), errors.baseline_rmse(), errors.counts                             # [Q, G + R]

    Args:
      learner: an off-policy :class:`~gamma_net_core.horde.learner.HordeLearner`.
      gammas: the published timescales [G].
      readouts: {name: (gammas, coefficients)} as :class:`OnlineError` takes them.
    """

    def __init__(self, learner, *, gammas: Sequence[float], readouts=None) -> None:
        self.learner = learner
        self.off = learner.ratios.off_policy.copy()
        self.online = OnlineError(gammas=gammas, n_questions=learner.n_questions, readouts=readouts)
        self.rupee = Rupee(gammas=gammas, n_questions=learner.n_questions, loss_scaling=learner.config.loss_scaling)
        self._updates = learner.update_count

    @property
    def horizons(self) -> list[int]:
        return self.online.horizons

    def restart(self, questions=None) -> None:
        self.online.restart(questions)
        self.rupee.restart(questions)

    def observe(self, cumulants, continuations, predictions) -> None:
        """As :meth:`OnlineError.observe`; the off-policy questions' TD errors from the learner's latest step."""
        self.online.observe(cumulants, continuations, predictions)
        learner, G = self.learner, self.rupee.gammas.shape[0]
        if learner.update_count == self._updates or learner.latest_inputs is None:
            self.rupee.restart()  # nothing learned (a first or frozen step): no transition to score
        inputs = learner.latest_inputs
        if inputs is None:
            return
        self._updates = learner.update_count
        values = np.asarray(predictions, dtype=np.float64)[:, :G]
        c = np.where(np.isfinite(values[:, 0]), np.asarray(cumulants, dtype=np.float64), np.nan)
        secondary = learner.secondary_values(inputs, self.rupee.gammas)
        self.rupee.observe(c, continuations, values, secondary, learner.last_rhos)

    def realized(self) -> RealizedReturns:
        return self.online.realized()

    def _merged(self, on: np.ndarray, off: np.ndarray) -> np.ndarray:
        out = np.array(on, dtype=np.float64)
        G = off.shape[1]
        out[self.off, :G] = off[self.off]
        out[self.off, G:] = np.nan
        return out

    def rmse(self) -> np.ndarray:
        """[Q, G + R]: on-policy questions' realized-return rmse; off-policy ones' RUPEE (NaN at the readouts)."""
        return self._merged(self.online.rmse(), self.rupee.rupee())

    def baseline_rmse(self) -> np.ndarray:
        """[Q, G + R]: the mean predictor's rmse of on-policy questions; NaN for off-policy ones (no yardstick)."""
        return self._merged(self.online.baseline_rmse(), np.full(self.rupee.mean.shape, np.nan))

    @property
    def counts(self) -> np.ndarray:
        """[Q, G + R]: returns scored (on-policy), transitions averaged (off-policy; 0 at the readouts)."""
        out = self.online.counts.copy()
        G = self.rupee.gammas.shape[0]
        out[self.off, :G] = self.rupee.counts[self.off]
        out[self.off, G:] = 0
        return out
