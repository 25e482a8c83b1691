"""Reading predictions in your own node: by question name and timescale, from topics or the service.

The Horde node publishes ``gamma_net_msgs/PredictionArray`` (every question at the published
timescales, and the readouts); a predictor publishes ``gamma_net_msgs/Prediction`` (one signal).
Three pieces read them without knowing their layout::

    latest = LatestPredictions(node, "horde/predictions")       # keeps the newest message's view
    ...
    reading = latest.view.average("shoulder_effort", tau=30)    # (1 - gamma) V, in the effort's units
    if reading.value > 0.05: ...                                # compare with a threshold in those units
    answer = PredictAtClient(node).call("shoulder_effort", taus=[30])   # exact, from the learner

- :class:`PredictionView`: a question's value at a timescale (tau, or gamma), a readout by name.
  :meth:`~PredictionView.average` is what to compare with a threshold: (1 - gamma) V, the
  average of the signal over about the next tau steps in the signal's units (the reflex's
  convention, and ``gamma-net horde thresholds``'s); :meth:`~PredictionView.value` gives V itself
  (a discounted sum of about tau signals). At a published timescale the value is the learner's;
  between two it is interpolated linearly in tau (as the paper's probe baseline does) and the
  :class:`Reading` says so (``interpolated``); outside the published range, or for an unknown
  question, readout or timescale, ValueError names it and what there is.
- :class:`PredictAtClient`: the ``predict_at`` service at exact timescales, blocking
  (:meth:`~PredictAtClient.call`) or awaited in a coroutine callback
  (:meth:`~PredictAtClient.call_async`); a refusal raises :class:`PredictionError` with the
  node's one-line reason.
- :class:`LatestPredictions`: a subscription that keeps the latest view (and calls you back).

Importing this module starts nothing and installs no signal handler: it creates ROS entities
only on the node you hand it.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from gamma_net_msgs.msg import Prediction, PredictionArray
from gamma_net_msgs.srv import PredictAt
from rclpy.node import Node

from gamma_net_core.horde.reading import EXACT, PublishedPredictions  # noqa: F401 (EXACT: as before)
from gamma_net_ros.conversions import clock_seconds


class PredictionError(ValueError):
    """A prediction could not be given: the node refused the request, or the reply did not come."""


@dataclass(frozen=True)
class Reading:
    """One question's prediction at one timescale.

    Attributes:
      question: the question's (or predicted signal's) name.
      tau: the timescale read, in steps (tau = 1 / (1 - gamma)).
      value: with ``scaled`` (from :meth:`PredictionView.average`), (1 - gamma) V: the average of
        the cumulant over about the next tau steps, in the cumulant's units, the number to compare
        with a threshold; else V, the discounted return (a sum of about tau cumulants).
      interpolated: True where ``tau`` lies between published timescales and the value is
        interpolated linearly in tau between the two around it; False where it was published.
      update_count: the learner's updates when it predicted.
      scaled: whether ``value`` is (1 - gamma) V (True) or V (False).
    """

    question: str
    tau: float
    value: float
    interpolated: bool
    update_count: int
    scaled: bool = False

    @property
    def gamma(self) -> float:
        return 1.0 - 1.0 / self.tau


class PredictionView:
    """A PredictionArray or Prediction, read by question name and timescale.

    Args:
      msg: a ``gamma_net_msgs/PredictionArray`` (a Horde's) or ``Prediction`` (a predictor's,
        whose one question is its ``cumulant`` name).

    Raises:
      ValueError: a message whose arrays do not have the sizes its names and gammas say.
    """

    def __init__(self, msg: PredictionArray | Prediction) -> None:
        self.msg = msg
        if isinstance(msg, Prediction):
            self._published = PublishedPredictions([msg.cumulant], msg.gammas, msg.values)
        else:
            self._published = PublishedPredictions(
                msg.questions, msg.gammas, msg.values, msg.readouts, msg.readout_values
            )
        self.questions: list[str] = self._published.questions
        self.readouts: list[str] = self._published.readouts
        self.gammas = self._published.gammas
        self.values = self._published.values  # [questions, gammas]
        self.readout_values = self._published.readout_values
        self.taus = self._published.taus

    @property
    def stamp(self):
        """The time of the state the predictions are about (``builtin_interfaces/Time``)."""
        return self.msg.header.stamp

    @property
    def update_count(self) -> int:
        return int(self.msg.update_count)

    def question_index(self, question: str) -> int:
        """The row of ``question``; ValueError naming it and the questions there are."""
        return self._published.question_index(question)

    def average(self, question: str, *, tau: float | None = None, gamma: float | None = None) -> Reading:
        """``question``'s (1 - gamma) V at ``tau`` (or ``gamma``): the number to compare with a threshold.

        The average of the cumulant over about the next tau steps (a weighted average, weights
        (1 - gamma) gamma^k), in the cumulant's units: one threshold means the same at every
        timescale and on the signal itself. ``gamma-net horde thresholds`` tabulates, per
        threshold on it, the lead time before events and the false alarms (docs/horde.md).
        Between published timescales, (1 - gamma) V is interpolated linearly in tau (as the reflex
        reads it). Arguments and errors as :meth:`value`.
        """
        return self.value(question, tau=tau, gamma=gamma, scaled=True)

    def value(
        self, question: str, *, tau: float | None = None, gamma: float | None = None, scaled: bool = False
    ) -> Reading:
        """``question``'s prediction at timescale ``tau`` (or ``gamma``).

        Args:
          question: a question name (a Prediction's: its cumulant name).
          tau: the timescale in steps, >= 1; or give ``gamma`` in [0, 1) instead.
          gamma: the timescale as a discount.
          scaled: False (default): V, the discounted return as the learner predicts it; True:
            (1 - gamma) V, as :meth:`average`.

        Returns:
          The :class:`Reading`; ``interpolated`` says whether it lies between published timescales.

        Raises:
          ValueError: an unknown question, both or neither of tau and gamma, or a timescale that
            is invalid or outside the published ones (named, with the published range).
        """
        self.question_index(question)
        if (tau is None) == (gamma is None):
            raise ValueError("give the timescale as exactly one of tau or gamma")
        if tau is not None:
            if not (_is_number(tau) and math.isfinite(tau) and tau >= 1.0):
                raise ValueError(f"tau must be a finite number >= 1; got {tau!r}")
            tau = float(tau)
        elif not (_is_number(gamma) and 0.0 <= gamma < 1.0):
            raise ValueError(f"gamma must be in [0, 1); got {gamma!r}")
        else:
            tau = 1.0 / (1.0 - gamma)
        value, interpolated = self._published.value(question, tau=tau, scaled=bool(scaled))
        return Reading(question, float(tau), value, interpolated, self.update_count, scaled=bool(scaled))

    def readout(self, question: str, name: str) -> float:
        """``question``'s readout ``name`` (e.g. a window or forecast from the questions file)."""
        return self._published.readout(question, name)


def _is_number(x) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


@dataclass(frozen=True)
class Answer:
    """A ``predict_at`` reply: ``values[i]`` is the prediction at ``gammas[i]``, at the state of ``stamp``."""

    question: str
    gammas: np.ndarray
    values: np.ndarray
    update_count: int
    stamp: object

    @property
    def taus(self) -> np.ndarray:
        return 1.0 / (1.0 - self.gammas)


class PredictAtClient:
    """The ``predict_at`` service of a predictor or Horde node, at exact timescales.

    Args:
      node: your node; the service client is created on it.
      service: the service name (relative names resolve in the node's namespace).
    """

    def __init__(self, node: Node, service: str = "predict_at") -> None:
        self.node = node
        self.client = node.create_client(PredictAt, service)

    @staticmethod
    def request(question: str, *, taus: Sequence[float] | None = None, gammas: Sequence[float] | None = None):
        """The PredictAt request for ``question`` at ``taus`` (or ``gammas``)."""
        if (taus is None) == (gammas is None):
            raise ValueError("give the timescales as exactly one of taus or gammas")
        scale = PredictAt.Request.SCALE_TAU if taus is not None else PredictAt.Request.SCALE_GAMMA
        given = taus if taus is not None else gammas
        return PredictAt.Request(timescales=[float(x) for x in given], scale=scale, question=question)

    def call(
        self,
        question: str,
        *,
        taus: Sequence[float] | None = None,
        gammas: Sequence[float] | None = None,
        timeout_s: float = 5.0,
    ) -> Answer:
        """Ask and wait for the answer, spinning ``node`` meanwhile (its executor, or a temporary one).

        For a script or a node's start-up: call it where nothing else spins that executor. From
        a callback, ``await`` :meth:`call_async` instead (a callback that blocks on a reply
        only its own executor can deliver waits forever).

        Raises:
          PredictionError: the service is not there within ``timeout_s``, does not answer in it,
            or refuses the request (its reason, e.g. an unknown question or a tau beyond tau_max).
        """
        request = self.request(question, taus=taus, gammas=gammas)
        if not self.client.wait_for_service(timeout_sec=timeout_s):
            raise PredictionError(f"no {self.client.srv_name} service after {timeout_s:g} s")
        future = self.client.call_async(request)
        if self.node.executor is not None:
            self.node.executor.spin_until_future_complete(future, timeout_sec=timeout_s)
        else:
            import rclpy  # here, not at import: importing this module touches no global state

            rclpy.spin_until_future_complete(self.node, future, timeout_sec=timeout_s)
        if not future.done():
            self.client.remove_pending_request(future)
            raise PredictionError(f"{self.client.srv_name} did not answer {question!r} within {timeout_s:g} s")
        return _answer(question, future.result())

    async def call_async(
        self, question: str, *, taus: Sequence[float] | None = None, gammas: Sequence[float] | None = None
    ) -> Answer:
        """Ask, to be awaited in a coroutine callback (``async def`` timer or subscription callback).

        Raises:
          PredictionError: the node refused the request (its reason).
        """
        response = await self.client.call_async(self.request(question, taus=taus, gammas=gammas))
        return _answer(question, response)


def _answer(question: str, response: PredictAt.Response) -> Answer:
    if not response.success:
        raise PredictionError(f"predict_at refused {question!r}: {response.message}")
    return Answer(
        question=response.cumulant,
        gammas=np.asarray(response.gammas, dtype=np.float64),
        values=np.asarray(response.values, dtype=np.float64),
        update_count=int(response.update_count),
        stamp=response.header.stamp,
    )


class LatestPredictions:
    """A subscription that keeps the view of the latest prediction message.

    Args:
      node: your node; the subscription is created on it.
      topic: ``horde/predictions`` (PredictionArray) or a predictor's ``predictions`` (Prediction).
      message_type: ``PredictionArray`` (default) or ``Prediction``.
      on_update: optional ``callback(view)`` after each message is taken.
      qos: queue depth or QoS profile; the nodes publish reliably with depth 10.
    """

    def __init__(
        self,
        node: Node,
        topic: str = "horde/predictions",
        *,
        message_type: type = PredictionArray,
        on_update: Callable[[PredictionView], None] | None = None,
        qos=10,
    ) -> None:
        self.node = node
        self.view: PredictionView | None = None
        self.received = 0
        self._arrived: float | None = None
        self._on_update = on_update
        self.subscription = node.create_subscription(message_type, topic, self._take, qos)

    def _take(self, msg) -> None:
        self.view = PredictionView(msg)
        self.received += 1
        self._arrived = clock_seconds(self.node)
        if self._on_update is not None:
            self._on_update(self.view)

    def age_s(self) -> float:
        """Seconds (node clock) since the latest message arrived; inf before the first."""
        if self._arrived is None:
            return math.inf
        return clock_seconds(self.node) - self._arrived
