"""Node: a Horde's predictions and errors live in Foxglove, over the Foxglove WebSocket protocol.

    ros2 run gamma_net_ros live_view          # ws://127.0.0.1:8765; docs/live-view.md

Foxglove (the app, or app.foxglove.dev) connects to ``ws://localhost:8765`` and, with the layout
``config/live_view.json``, plots each question's predictions at every published timescale and
its running error. Each question is one JSON channel of its predictions and one of its errors,
named after the ROS topic (``/horde/predictions/shoulder_speed``, ``/horde/errors/shoulder_speed``);
a predictor's ``Prediction`` topic is one channel of its own name. Their arrays run over the
published timescales in order (``taus``), so a Plot panel draws ``.scaled[0]`` over time, or the
latest ``.scaled[:]`` against ``.taus[:]``; readouts are named (``.readouts.next_2s``).

Values are as published (``values``, the discounted return) and times (1 - gamma) (``scaled``:
the signal's average over about the next tau steps, one axis for all timescales). The errors are
the Horde's running errors against the realized returns (``horde/errors``): ``rmse``, the mean
predictor's ``mean_rmse``, their ``ratio`` (below 1: the question learned something) and the
``samples`` scored. JSON has no NaN: an error with no return scored yet is null.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence

import foxglove
from gamma_net_msgs.msg import Prediction, PredictionArray, PredictionErrors
from rclpy.node import Node

from gamma_net_ros.node_main import run_node
from gamma_net_ros.params import declare

#: An array of numbers; an element may be null (a NaN: JSON has none). The schema says only "number":
#: Lichtblick and the open-source Foxglove Studio it forked (1.48 on npm has the same reader) read a
#: JSON schema's types as single names and refuse every channel whose schema has a list
#: (["number", "null"]): their plots stay empty.
_NUMBERS = {"type": "array", "items": {"type": "number"}}
_HEADER = {
    "type": "object",
    "properties": {
        "stamp": {"type": "object", "properties": {"sec": {"type": "integer"}, "nsec": {"type": "integer"}}}
    },
}
#: The JSON schema of each kind of channel (Foxglove completes message paths from it).
SCHEMAS = {
    "predictions": {
        "title": "gamma_net/QuestionPredictions",
        "type": "object",
        "properties": {
            "header": _HEADER,
            "question": {"type": "string"},
            "update_count": {"type": "integer"},
            "taus": _NUMBERS,
            "gammas": _NUMBERS,
            "values": _NUMBERS,
            "scaled": _NUMBERS,
            "readouts": {"type": "object", "additionalProperties": {"type": "number"}},
        },
    },
    "errors": {
        "title": "gamma_net/QuestionErrors",
        "type": "object",
        "properties": {
            "header": _HEADER,
            "question": {"type": "string"},
            "taus": _NUMBERS,
            "rmse": _NUMBERS,
            "mean_rmse": _NUMBERS,
            "ratio": _NUMBERS,
            "samples": {"type": "array", "items": {"type": "integer"}},
            "readouts": {"type": "object", "additionalProperties": {"type": "object"}},
        },
    },
}


def _number(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _header(header) -> dict:
    return {"stamp": {"sec": int(header.stamp.sec), "nsec": int(header.stamp.nanosec)}}


def _taus(gammas: Sequence[float]) -> list[float]:
    return [1.0 / (1.0 - g) for g in gammas]


def _check(kind: str, field: str, got: Sequence, expected: int, shape: str) -> None:
    if len(got) != expected:
        raise ValueError(f"malformed {kind}: {len(got)} {field} for {shape}")


def predictions_records(msg: PredictionArray | Prediction, topic: str) -> dict[str, dict]:
    """The JSON message of each question's channel: ``{channel topic: record}``.

    A ``PredictionArray`` on ``topic`` gives one channel per question (``topic/question``), a
    ``Prediction`` one channel, ``topic`` itself.

    Raises:
      ValueError: the message's arrays do not match its questions and timescales, naming which.
    """
    if isinstance(msg, Prediction):
        _check("Prediction", "values", msg.values, len(msg.gammas), f"{len(msg.gammas)} gammas")
        questions, values, readouts, names = [msg.question], [list(msg.values)], [{}], [topic]
    else:
        G, R, Q = len(msg.gammas), len(msg.readouts), len(msg.questions)
        _check("PredictionArray", "values", msg.values, Q * G, f"{Q} questions x {G} gammas")
        _check("PredictionArray", "readout_values", msg.readout_values, Q * R, f"{Q} questions x {R} readouts")
        questions = list(msg.questions)
        values = [list(msg.values[q * G : (q + 1) * G]) for q in range(Q)]
        readouts = [dict(zip(msg.readouts, msg.readout_values[q * R : (q + 1) * R])) for q in range(Q)]
        names = [f"{topic}/{q}" for q in questions]
    gammas = [float(g) for g in msg.gammas]
    return {
        name: {
            "header": _header(msg.header),
            "question": question,
            "update_count": int(msg.update_count),
            "taus": _taus(gammas),
            "gammas": gammas,
            "values": [_number(v) for v in row],
            "scaled": [_number((1.0 - g) * v) for g, v in zip(gammas, row)],
            "readouts": {k: _number(v) for k, v in readout.items()},
        }
        for name, question, row, readout in zip(names, questions, values, readouts)
    }


def errors_records(msg: PredictionErrors, topic: str) -> dict[str, dict]:
    """The JSON message of each question's error channel (``topic/question``): ``{channel topic: record}``.

    Raises:
      ValueError: the message's arrays do not match its questions, timescales and readouts.
    """
    G, Q = len(msg.gammas), len(msg.questions)
    P = G + len(msg.readouts)
    for field in ("rmse", "mean_rmse", "samples"):
        _check("PredictionErrors", field, getattr(msg, field), Q * P, f"{Q} questions x {P} timescales and readouts")

    def cell(k: int) -> dict:
        rmse, mean = msg.rmse[k], msg.mean_rmse[k]
        ratio = rmse / mean if math.isfinite(rmse) and math.isfinite(mean) and mean > 0 else math.nan
        return {"rmse": _number(rmse), "mean_rmse": _number(mean), "ratio": _number(ratio), "samples": msg.samples[k]}

    records = {}
    for q, question in enumerate(msg.questions):
        cells = [cell(q * P + k) for k in range(P)]
        records[f"{topic}/{question}"] = {
            "header": _header(msg.header),
            "question": question,
            "taus": _taus(msg.gammas),
            **{key: [c[key] for c in cells[:G]] for key in ("rmse", "mean_rmse", "ratio", "samples")},
            "readouts": dict(zip(msg.readouts, cells[G:])),
        }
    return records


class LiveView(Node):
    def __init__(self, **kwargs) -> None:
        super().__init__("live_view", **kwargs)
        host = declare(self, "host", "127.0.0.1", "address to serve on ('0.0.0.0': every interface)", read_only=True)
        port = declare(
            self,
            "port",
            8765,
            "WebSocket port (Foxglove's default; 0: any free one)",
            low=0,
            high=65535,
            read_only=True,
        )
        topics = {
            "predictions": (PredictionArray, "horde/predictions", "a Horde's PredictionArray topic ('' = none)"),
            "errors": (PredictionErrors, "horde/errors", "a Horde's PredictionErrors topic ('' = none)"),
            "prediction": (Prediction, "predictions", "a predictor's Prediction topic ('' = none)"),
        }
        self.channels: dict[str, foxglove.Channel] = {}
        try:
            self.server = foxglove.start_server(name="gamma_net live_view", host=host, port=port)
        except RuntimeError as exc:
            raise ValueError(
                f"cannot serve on {host}:{port} ({exc}); give another port: -p port:=N (0: any free one)"
            ) from None
        for key, (kind, default, description) in topics.items():
            if topic := declare(self, f"{key}_topic", default, description, read_only=True):
                topic = self.resolve_topic_name(topic)
                convert = errors_records if kind is PredictionErrors else predictions_records
                schema = SCHEMAS["errors" if kind is PredictionErrors else "predictions"]
                callback = lambda msg, t=topic, c=convert, s=schema: self.show(c, msg, t, s)  # noqa: E731
                self.create_subscription(kind, topic, callback, 10)
        self.get_logger().info(f"serving ws://{host}:{self.server.port} (Foxglove: open a connection to it)")

    def show(self, convert, msg, topic: str, schema: dict) -> None:
        try:
            records = convert(msg, topic)
        except ValueError as exc:  # one bad message from elsewhere must not stop the view
            self.get_logger().warning(f"skipped a message on {topic}: {exc}", throttle_duration_sec=5.0)
            return
        now = self.get_clock().now().nanoseconds or None
        for name, record in records.items():
            if name not in self.channels:
                self.channels[name] = foxglove.Channel(name, schema=schema)
            self.channels[name].log(record, log_time=now)

    def destroy_node(self) -> None:
        if hasattr(self, "server"):
            self.server.stop()
        super().destroy_node()


def main(args=None) -> int:
    return run_node(LiveView, args)


if __name__ == "__main__":
    sys.exit(main())
