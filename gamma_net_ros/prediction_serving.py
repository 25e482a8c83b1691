"""What every predictor node shares: the published timescales and the PredictAt service's answers.

Both the linear `predictor` and the `neural_predictor` publish Predictions at
``publish_timescales`` (given as tau or gamma by ``publish_scale``, changeable at run time and
validated before they are taken) and answer ``predict_at`` at the timescales a request
gives, with a clear error for a bad request. A request may ask for at most
``max_request_timescales`` timescales (the single-threaded node answers nothing else
meanwhile), and none beyond the largest timescale the learner was trained on (its tau_max):
a Γ-net extrapolates there without bound. Errors name the value on the scale the request used.
"""

from __future__ import annotations

import numpy as np
from gamma_net_msgs.msg import Prediction
from gamma_net_msgs.srv import PredictAt
from rcl_interfaces.msg import SetParametersResult
from rclpy.node import Node

from gamma_net_core.timescales import PROBE_TAUS, to_gammas
from gamma_net_ros.params import declare

_SCALES = {PredictAt.Request.SCALE_GAMMA: "gamma", PredictAt.Request.SCALE_TAU: "tau"}


class PublishedTimescales:
    """The ``publish_scale`` and ``publish_timescales`` parameters of ``node``, as validated gammas.

    The node calls :meth:`validate` from its set-parameters callback and :meth:`apply` from its
    post-set callback; :attr:`gammas` always holds valid discounts, none beyond ``largest_tau``
    (where ``predict_at`` refuses to answer, published values would be as unbounded).

    Args:
      node: the predictor node (declares the two parameters, changeable at run time).
      largest_tau: the largest timescale the learner trains on, as tau (its ``tau_max``).
      default: the default ``publish_timescales``, as tau.

    Raises:
      ValueError: the timescales at start are not valid, or lie beyond ``largest_tau``, naming the value.
    """

    def __init__(self, node: Node, largest_tau: float, *, default=PROBE_TAUS) -> None:
        self.node = node
        self.largest_tau = float(largest_tau)
        scale = declare(node, "publish_scale", "tau", "how publish_timescales is given: tau or gamma")
        timescales = declare(node, "publish_timescales", [float(t) for t in default], "timescales to publish")
        self.gammas = self.checked(timescales, scale)

    def checked(self, timescales, scale: str) -> np.ndarray:
        """``timescales`` on ``scale`` as gammas; ValueError naming a bad one or one beyond ``largest_tau``."""
        try:
            gammas = to_gammas(timescales, scale)
        except ValueError as exc:
            raise ValueError(f"publish_timescales refused: {exc}") from None
        with np.errstate(divide="ignore"):  # gamma 1.0: tau inf, beyond any learner
            taus = 1.0 / (1.0 - gammas)
        beyond = np.flatnonzero(taus > self.largest_tau * (1.0 + 1e-9))
        if beyond.size:
            i = int(beyond[0])
            largest = f"tau {self.largest_tau:g}" if scale == "tau" else f"gamma {1.0 - 1.0 / self.largest_tau!r}"
            raise ValueError(
                f"publish_timescales refused: {scale} {float(np.atleast_1d(timescales)[i])!r} at index {i} is "
                f"beyond the largest timescale the learner trains on, {largest} (its tau_max)"
            )
        return gammas

    def validate(self, parameters) -> SetParametersResult:
        values = {p.name: p.value for p in parameters}
        if "publish_timescales" in values or "publish_scale" in values:
            scale = values.get("publish_scale", self.node.get_parameter("publish_scale").value)
            timescales = values.get("publish_timescales", self.node.get_parameter("publish_timescales").value)
            try:
                self.checked(timescales, scale)
            except ValueError as exc:
                return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    def apply(self, parameters) -> bool:
        """Take new values after they were set; True if the published timescales changed."""
        if not any(p.name in ("publish_timescales", "publish_scale") for p in parameters):
            return False
        scale = self.node.get_parameter("publish_scale").value
        self.gammas = self.checked(self.node.get_parameter("publish_timescales").value, scale)
        self.node.get_logger().info(f"publishing at gamma {np.round(self.gammas, 6).tolist()}")
        return True

    @property
    def taus(self) -> list[float]:
        return np.round(1.0 / (1.0 - self.gammas), 3).tolist()


class TimescaleRequests:
    """The timescales a PredictAt request may ask for, with the ``max_request_timescales`` parameter.

    Args:
      node: the predictor node (declares ``max_request_timescales``, changeable at run time).
      largest_tau: the largest timescale the learner trains on, as tau (its ``tau_max``).
    """

    def __init__(self, node: Node, largest_tau: float) -> None:
        self.node = node
        self.largest_tau = float(largest_tau)
        declare(
            node,
            "max_request_timescales",
            1000,
            "timescales one predict_at request may ask for at most",
            low=1,
            high=1_000_000,
        )

    @property
    def cap(self) -> int:
        return self.node.get_parameter("max_request_timescales").value

    def gammas(self, request: PredictAt.Request) -> np.ndarray:
        """The request's timescales as validated gammas.

        Raises:
          ValueError: a bad scale, too many timescales, or a timescale that is not a valid
            tau/gamma or lies beyond ``largest_tau``, named on the request's own scale.
        """
        if request.scale not in _SCALES:
            raise ValueError(f"scale must be SCALE_GAMMA (0) or SCALE_TAU (1); got {request.scale}")
        scale = _SCALES[request.scale]
        if len(request.timescales) > self.cap:
            raise ValueError(
                f"{len(request.timescales)} timescales requested; at most {self.cap} per request "
                "(parameter max_request_timescales)"
            )
        given = np.asarray(request.timescales, dtype=np.float64)
        gammas = to_gammas(given, scale)
        # Compared as tau, which both scales reach exactly enough: 1 - 1/100 is 0.99 to the last bit.
        with np.errstate(divide="ignore"):  # a tau too large for float64's gamma is gamma 1.0: tau inf
            taus = 1.0 / (1.0 - gammas)
        beyond = np.flatnonzero(taus > self.largest_tau * (1.0 + 1e-9))
        if beyond.size:
            i = int(beyond[0])
            largest = (
                f"tau {exact(self.largest_tau)}"
                if scale == "tau"
                else f"gamma {exact(1.0 - 1.0 / self.largest_tau)} (tau {exact(self.largest_tau)})"
            )
            raise ValueError(
                f"{scale} {exact(given[i])} at index {i} is beyond the largest timescale the learner was trained on, "
                f"{largest}"
            )
        return gammas


def exact(value: float) -> str:
    """``value`` as the shortest text that reads back as the same float ("101", "0.999999999999", "1e+20").

    A refusal names the value that was sent: ``:g`` keeps 6 digits and would call gamma
    0.999999999999 "1", a value nobody asked for.
    """
    text = repr(float(value))
    return text[:-2] if text.endswith(".0") else text


def answer(response: PredictAt.Response, prediction: Prediction) -> PredictAt.Response:
    """A successful PredictAt response carrying ``prediction``."""
    response.success = True
    response.header = prediction.header
    response.question = prediction.question
    response.gammas = prediction.gammas
    response.values = prediction.values
    response.update_count = prediction.update_count
    return response


def refuse(response: PredictAt.Response, error: Exception) -> PredictAt.Response:
    """A failed PredictAt response whose message names what was wrong; nothing else is filled."""
    response.success = False
    response.message = str(error)
    return response
