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
  (:meth:`~PredictAtClient.call`: from a script, a node's start-up, another thread or a
  callback) or awaited in a coroutine callback (:meth:`~PredictAtClient.call_async`); a refusal
  raises :class:`PredictionError` with the node's one-line reason, and so does a service that is
  missing or silent for the timeout.
- :class:`LatestPredictions`: a subscription that keeps the latest view (and calls you back).

Importing this module starts nothing and installs no signal handler: it creates ROS entities
only on the node you hand it, and, for a blocking call, on a hidden helper node beside it.
"""

from __future__ import annotations

import math
import numbers
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from gamma_net_msgs.msg import Prediction, PredictionArray
from gamma_net_msgs.srv import PredictAt
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.executors import SingleThreadedExecutor
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
      TypeError: ``msg`` is neither (its type named).
      ValueError: a message whose arrays do not have the sizes its names and gammas say.
    """

    def __init__(self, msg: PredictionArray | Prediction) -> None:
        if not isinstance(msg, (PredictionArray, Prediction)):
            raise TypeError(
                f"PredictionView reads a gamma_net_msgs PredictionArray or Prediction; got {_type_name(msg)}"
            )
        self.msg = msg
        if isinstance(msg, Prediction):
            self._published = PublishedPredictions([msg.question], msg.gammas, msg.values)
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
        """When the state the predictions are about was observed (``builtin_interfaces/Time``).

        The publishing node stamps each message with the time of the input its state was built
        from (that message's header stamp; its arrival on the node's clock where it has none, or
        where a predictor's ``stamp_source`` says so), not the time it published: compare it with
        your own messages' stamps to pair a prediction with the state it predicts from, and with
        the node clock to see how old that state is.
        """
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


def _type_name(obj) -> str:
    """``obj``'s type as ROS names a message type (``sensor_msgs/msg/JointState``), else Python's."""
    kind = type(obj)
    package, _, rest = kind.__module__.partition(".msg.")
    return f"{package}/msg/{kind.__name__}" if rest else f"{kind.__module__}.{kind.__qualname__}"


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

    Two clients of the service, so that each way of asking works wherever it is written:

    - :meth:`call` (blocking) asks through a hidden helper node of its own (``_<node>_predict_at``,
      hidden from ``ros2 node list``) that only it spins. It does not depend on who spins
      ``node``: the same in a script, before or after ``rclpy.spin_once(node)``, while another
      thread spins ``node`` in an executor, or in a callback of that executor.
    - :meth:`call_async` (awaited in a coroutine callback) asks through a client on ``node`` in a
      reentrant callback group of its own, so that the reply is taken while your callback,
      holding its own (mutually exclusive) group, awaits it.

    Args:
      node: your node; the awaited client is created on it, the helper node in its context.
      service: the service name (relative names resolve in the node's namespace, with its remaps).
    """

    def __init__(self, node: Node, service: str = "predict_at") -> None:
        self.node = node
        self.service = node.resolve_service_name(service)
        self._group = ReentrantCallbackGroup()
        self.client = node.create_client(PredictAt, self.service, callback_group=self._group)
        # Timeouts of awaited calls: steady time, so that a node on simulated time that is not
        # (yet) receiving /clock still gives up.
        self._steady = Clock(clock_type=ClockType.STEADY_TIME)
        self._blocking: tuple[Node, SingleThreadedExecutor, object] | None = None
        self._lock = threading.Lock()  # one blocking call at a time spins the helper's executor

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
        """Ask and wait at most ``timeout_s`` for the answer, whoever spins ``node`` (or nobody).

        In a callback this blocks the callback's thread until the answer comes; in a coroutine
        callback ``await`` :meth:`call_async` instead, which lets your executor go on meanwhile.

        Raises:
          PredictionError: the service is not there within ``timeout_s``, does not answer in it,
            or refuses the request (its reason, e.g. an unknown question or a tau beyond tau_max).
        """
        request = self.request(question, taus=taus, gammas=gammas)
        with self._lock:
            _, executor, client = self._helper()
            if not client.wait_for_service(timeout_sec=timeout_s):
                raise PredictionError(f"no {self.service} service after {timeout_s:g} s")
            future = client.call_async(request)
            executor.spin_until_future_complete(future, timeout_sec=timeout_s)
            if not future.done():
                client.remove_pending_request(future)
                raise PredictionError(f"{self.service} did not answer {question!r} within {timeout_s:g} s")
        return _answer(question, future.result())

    async def call_async(
        self,
        question: str,
        *,
        taus: Sequence[float] | None = None,
        gammas: Sequence[float] | None = None,
        timeout_s: float = 5.0,
    ) -> Answer:
        """Ask, to be awaited in a coroutine callback (``async def`` timer or subscription callback).

        Raises:
          PredictionError: the service is not there or does not answer within ``timeout_s``
            (seconds of steady time), or refuses the request (its reason).
        """
        request = self.request(question, taus=taus, gammas=gammas)
        future = self.client.call_async(request)

        def give_up() -> None:
            timer.cancel()
            if not future.done():
                self.client.remove_pending_request(future)
                if self.client.service_is_ready():
                    reason = f"{self.service} did not answer {question!r} within {timeout_s:g} s"
                else:
                    reason = f"no {self.service} service after {timeout_s:g} s"
                future.set_exception(PredictionError(reason))

        timer = self.node.create_timer(timeout_s, give_up, callback_group=self._group, clock=self._steady)
        try:
            response = await future
        finally:
            self.node.destroy_timer(timer)
        return _answer(question, response)

    def destroy(self) -> None:
        """Destroys both clients and the helper node (also done when the context shuts down)."""
        self.node.destroy_client(self.client)
        if self._blocking is not None:
            helper, executor, _ = self._blocking
            executor.shutdown()
            helper.destroy_node()
            self._blocking = None

    def _helper(self):
        """The helper node, its executor and its client, created on the first blocking call."""
        if self._blocking is None:
            name = f"_{self.node.get_name()}_predict_at"
            # Its own arguments only: a command line's `-r __node:=...` renames the user's node, not this one.
            helper = Node(
                name,
                context=self.node.context,
                namespace=self.node.get_namespace(),
                use_global_arguments=False,
                enable_rosout=False,
                start_parameter_services=False,
            )
            executor = SingleThreadedExecutor(context=self.node.context)
            executor.add_node(helper)
            self._blocking = (helper, executor, helper.create_client(PredictAt, self.service))
        return self._blocking


def _answer(question: str, response: PredictAt.Response) -> Answer:
    if not response.success:
        raise PredictionError(f"predict_at refused {question!r}: {response.message}")
    return Answer(
        question=response.question,
        gammas=np.asarray(response.gammas, dtype=np.float64),
        values=np.asarray(response.values, dtype=np.float64),
        update_count=int(response.update_count),
        stamp=response.header.stamp,
    )


class LatestPredictions:
    """A subscription that keeps the view of the latest predictions, merged over the Horde's workers.

    A Horde split across processes (``horde.launch.py workers:=N``, or one share per machine)
    publishes each share's questions on the same topic. The latest PredictionArray of each
    publisher is kept and :attr:`view` reads all of them as one set of questions by name: the
    rows of each publisher's latest array, at the timescales and readouts they all publish
    (shares of one questions file publish the same), stamped with the oldest of their stamps and
    the smallest update count. A question answered by two publishers is an error, said once
    (the newest array's answer is read); so is a publisher whose timescales or readouts differ
    from the newest array's (its questions are left out until it agrees). With one publisher
    the view is its latest message, as before.

    A malformed message (arrays that do not fit its names and timescales) is dropped with a
    warning (at most one every 10 s): the view stays the last good one, and your callback is not
    called for it.

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
        if message_type not in (PredictionArray, Prediction):
            raise TypeError(f"message_type must be PredictionArray or Prediction; got {message_type!r}")
        self.node = node
        self.view: PredictionView | None = None
        self.received = 0
        self.dropped = 0
        self.publishers: dict[bytes, PredictionArray] = {}  # the latest array of each publisher, oldest first
        self.conflicts: set[str] = set()  # questions (or publishers' timescales) already reported
        self._arrived: float | None = None
        self._on_update = on_update
        self.subscription = node.create_subscription(message_type, topic, self._take, qos)

    def _take(self, msg, info) -> None:
        try:
            view = PredictionView(msg)
        except ValueError as exc:
            self.dropped += 1
            self.node.get_logger().warning(
                f"{self.subscription.topic_name}: dropped {exc}; keeping the previous predictions",
                throttle_duration_sec=10.0,
            )
            return
        if isinstance(msg, PredictionArray):
            key = _publisher(info)
            self.publishers.pop(key, None)
            self.publishers[key] = msg
            if len(self.publishers) > 1:
                view = PredictionView(self._merged())
        self.view = view
        self.received += 1
        self._arrived = clock_seconds(self.node)
        if self._on_update is not None:
            self._on_update(self.view)

    def _merged(self) -> PredictionArray:
        """One PredictionArray of every publisher's latest: the newest's answer where two answer a question."""
        newest = next(reversed(self.publishers.values()))
        gammas, readouts = list(newest.gammas), list(newest.readouts)
        rows: dict[str, tuple[PredictionArray, int]] = {}
        for msg in reversed(self.publishers.values()):  # newest first: it wins a conflict
            if list(msg.gammas) != gammas or list(msg.readouts) != readouts:
                self._conflict(
                    f"gammas {list(msg.gammas)}",
                    f"a publisher of {len(msg.questions)} questions ({msg.questions[0]!r}, ...) publishes gammas "
                    f"{list(msg.gammas)} and readouts {list(msg.readouts)}, the newest {gammas} and {readouts}: "
                    "its questions are left out",
                )
                continue
            for row, question in enumerate(msg.questions):
                if question in rows:
                    self._conflict(question, f"question {question!r} is answered by two publishers; reading the newest")
                    continue
                rows[question] = (msg, row)
        merged = PredictionArray()
        stamps = [m.header.stamp for m, _ in rows.values()]
        merged.header.stamp = min(stamps, key=lambda t: (t.sec, t.nanosec))
        merged.update_count = min(int(m.update_count) for m, _ in rows.values())
        merged.questions = list(rows)
        merged.gammas = gammas
        merged.readouts = readouts
        G, R = len(gammas), len(readouts)
        merged.values = [v for m, r in rows.values() for v in m.values[r * G : (r + 1) * G]]
        merged.readout_values = [v for m, r in rows.values() for v in m.readout_values[r * R : (r + 1) * R]]
        return merged

    def _conflict(self, key: str, line: str) -> None:
        if key not in self.conflicts:
            self.conflicts.add(key)
            self.node.get_logger().error(f"{self.subscription.topic_name}: {line}")

    def age_s(self) -> float:
        """Seconds (node clock) since the latest message arrived; inf before the first."""
        if self._arrived is None:
            return math.inf
        return clock_seconds(self.node) - self._arrived


def _publisher(info) -> bytes:
    """The publisher's identity (its gid) from a subscription's message info; one key where there is none."""
    gid = (info or {}).get("publisher_gid") or {}
    data = gid.get("data") if isinstance(gid, dict) else None
    return bytes(data) if data is not None else b""
