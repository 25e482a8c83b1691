"""Reading published predictions: a question's value at a timescale, one reader for every consumer.

A Horde publishes every question at a few timescales (a PredictionArray: ``values`` row-major
[questions, gammas], ``readout_values`` [questions, readouts]); a predictor publishes one signal
(a Prediction). :class:`PublishedPredictions` validates such a message's arrays once, then reads
them by name::

    published = PublishedPredictions(questions, gammas, values, readouts, readout_values)  # ValueError if malformed
    value, interpolated = published.value("shoulder_effort", tau=10, scaled=True)

``scaled`` is the explicit choice between the two numbers a consumer may mean:

- ``scaled=False``: the discounted return V_gamma as the learner predicts it (the client's
  :class:`~gamma_net_ros.client.PredictionView`).
- ``scaled=True``: ``(1 - gamma) V_gamma``, in the cumulant's units (a weighted average of the
  cumulant over about the next tau steps), so one threshold means the same at every timescale
  and on the present signal (the reflex's rules).

At a published timescale the value is the learner's; between two it is interpolated linearly in
tau between the two around it (the paper's probe baseline), on the chosen quantity.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: A requested tau within this relative distance of a published one is that one (no interpolation).
EXACT = 1e-9


class PublishedPredictions:
    """A published prediction message's arrays, validated, read by question name and timescale.

    Args:
      questions: the question names, one row each (a Prediction's: its cumulant name).
      gammas: the published discounts, each finite in [0, 1), no two equal.
      values: ``len(questions) * len(gammas)`` predictions, row-major [question, gamma].
      readouts: readout names.
      readout_values: ``len(questions) * len(readouts)`` values, row-major [question, readout].

    Raises:
      ValueError: one line naming what is malformed (sizes, a gamma, a repeated name).
    """

    def __init__(
        self,
        questions: Sequence[str],
        gammas: Sequence[float],
        values: Sequence[float],
        readouts: Sequence[str] = (),
        readout_values: Sequence[float] = (),
    ) -> None:
        self.questions = list(questions)
        self.readouts = list(readouts)
        self.gammas = np.asarray(gammas, dtype=np.float64).ravel()
        values = np.asarray(values, dtype=np.float64).ravel()
        readout_values = np.asarray(readout_values, dtype=np.float64).ravel()
        shape = (len(self.questions), self.gammas.size)
        if values.size != shape[0] * shape[1] or readout_values.size != shape[0] * len(self.readouts):
            raise ValueError(
                f"malformed prediction message: {values.size} values for {shape[0]} questions x {shape[1]} gammas, "
                f"{readout_values.size} readout values for {len(self.readouts)} readouts"
            )
        bad = ~np.isfinite(self.gammas) | (self.gammas < 0.0) | (self.gammas >= 1.0)
        if bad.any():
            raise ValueError(f"malformed prediction message: gamma {float(self.gammas[bad][0])!r} is not in [0, 1)")
        if np.unique(self.gammas).size != self.gammas.size:
            raise ValueError(f"malformed prediction message: a gamma is published twice in {self.gammas.tolist()}")
        for label, names in (("question", self.questions), ("readout", self.readouts)):
            if len(set(names)) != len(names):
                raise ValueError(f"malformed prediction message: a {label} is published twice in {names}")
        self.values = values.reshape(shape)  # [questions, gammas]
        self.readout_values = readout_values.reshape(shape[0], len(self.readouts))
        self.taus = 1.0 / (1.0 - self.gammas)
        self._order = np.argsort(self.taus, kind="stable")  # neighbours bracket a tau whatever the published order

    def question_index(self, question: str) -> int:
        """The row of ``question``; ValueError naming it and the questions there are."""
        try:
            return self.questions.index(question)
        except ValueError:
            raise ValueError(f"no question {question!r} in the predictions; questions: {self.questions}") from None

    def value(self, question: str, *, tau: float, scaled: bool) -> tuple[float, bool]:
        """``question``'s prediction at timescale ``tau`` (>= 1, finite).

        Args:
          question: a question name.
          tau: the timescale in steps.
          scaled: True for ``(1 - gamma) V_gamma`` (the cumulant's units), False for ``V_gamma``.

        Returns:
          (value, interpolated): ``interpolated`` is False at a published timescale.

        Raises:
          ValueError: an unknown question, or a tau outside the published ones (named, with them).
        """
        row = self.values[self.question_index(question)]
        if scaled:
            row = row * (1.0 - self.gammas)
        exact = np.flatnonzero(np.abs(self.taus - tau) <= EXACT * tau)
        if exact.size:
            return float(row[exact[0]]), False
        if self.gammas.size == 0:
            raise ValueError(f"tau {tau:g} of {question!r}: the message has no timescales")
        taus = self.taus[self._order]
        if not taus[0] <= tau <= taus[-1]:
            published = ", ".join(f"{t:g}" for t in taus)
            raise ValueError(
                f"tau {tau:g} of {question!r} is outside the published timescales (tau {published}): "
                "ask predict_at (PredictAtClient) for it, or publish it"
            )
        return float(np.interp(tau, taus, row[self._order])), True

    def readout(self, question: str, name: str) -> float:
        """``question``'s readout ``name`` as published."""
        q = self.question_index(question)
        if name not in self.readouts:
            raise ValueError(f"no readout {name!r} in the predictions; readouts: {self.readouts}")
        return float(self.readout_values[q, self.readouts.index(name)])
