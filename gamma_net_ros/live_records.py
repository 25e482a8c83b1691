"""The live view's JSON records: each ROS message of a Horde (or a predictor) as one record per question.

Each question is one JSON channel per topic, named after it (``/horde/predictions/<question>``,
``/horde/errors/<question>``, ``/horde/returns/<question>``); a ``Prediction`` is one channel of its
topic's own name. Arrays run over the published timescales in order (``taus``); readouts are named.
JSON has no NaN: a value that is not finite (a stopped question, an error with nothing scored, a
return not complete at that tick) is null. :data:`SCHEMAS` are the channels' JSON schemas (Foxglove
completes message paths from them). The ``live_view`` node serves the records; docs/live-view.md
lists their fields.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from gamma_net_msgs.msg import Prediction, PredictionArray, PredictionErrors, RealizedReturns

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
_INTEGERS = {"type": "array", "items": {"type": "integer"}}


def _channel(title: str, **fields: dict) -> dict:
    """A channel's JSON schema: its message's header and question, then its own fields."""
    properties = {"header": _HEADER, "question": {"type": "string"}, **fields}
    return {"title": title, "type": "object", "properties": properties}


#: The JSON schema of each kind of channel (Foxglove completes message paths from it).
SCHEMAS = {
    "predictions": _channel(
        "gamma_net/QuestionPredictions",
        update_count={"type": "integer"}, taus=_NUMBERS, gammas=_NUMBERS, values=_NUMBERS, scaled=_NUMBERS,
        readouts={"type": "object", "additionalProperties": {"type": "number"}},
    ),
    "errors": _channel(
        "gamma_net/QuestionErrors",
        taus=_NUMBERS, rmse=_NUMBERS, mean_rmse=_NUMBERS, ratio=_NUMBERS, samples=_INTEGERS,
        readouts={"type": "object", "additionalProperties": {"type": "object"}},
    ),
    "returns": _channel(
        "gamma_net/QuestionReturns",
        update_count={"type": "integer"}, taus=_NUMBERS, gammas=_NUMBERS, returns=_NUMBERS, predictions=_NUMBERS,
        scaled_returns=_NUMBERS, scaled_predictions=_NUMBERS, steps_ago=_INTEGERS,
        readouts={"type": "object", "additionalProperties": {"type": "object"}},
    ),
}  # fmt: skip


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


def returns_records(msg: RealizedReturns, topic: str) -> dict[str, dict]:
    """The JSON message of each question's returns channel (``topic/question``): ``{channel topic: record}``.

    Per timescale, the return that completed at the message's tick (null: none did) beside the
    prediction it scores, made ``steps_ago`` ticks before; ``scaled_*`` are both times (1 - gamma).

    Raises:
      ValueError: the message's arrays do not match its questions, timescales and readouts.
    """
    G, Q = len(msg.gammas), len(msg.questions)
    P = G + len(msg.readouts)
    for field in ("returns", "predictions", "steps_ago"):
        _check("RealizedReturns", field, getattr(msg, field), Q * P, f"{Q} questions x {P} timescales and readouts")
    gammas = [float(g) for g in msg.gammas]
    records = {}
    for q, question in enumerate(msg.questions):
        returns, predictions = msg.returns[q * P : (q + 1) * P], msg.predictions[q * P : (q + 1) * P]
        steps_ago = [int(n) for n in msg.steps_ago[q * P : (q + 1) * P]]
        records[f"{topic}/{question}"] = {
            "header": _header(msg.header),
            "question": question,
            "update_count": int(msg.update_count),
            "taus": _taus(gammas),
            "gammas": gammas,
            "returns": [_number(v) for v in returns[:G]],
            "predictions": [_number(v) for v in predictions[:G]],
            "scaled_returns": [_number((1.0 - g) * v) for g, v in zip(gammas, returns)],
            "scaled_predictions": [_number((1.0 - g) * v) for g, v in zip(gammas, predictions)],
            "steps_ago": steps_ago[:G],
            "readouts": {
                name: {"return": _number(r), "prediction": _number(v), "steps_ago": n}
                for name, r, v, n in zip(msg.readouts, returns[G:], predictions[G:], steps_ago[G:])
            },
        }
    return records


#: What each kind of live view topic carries: its message type and how it becomes records.
CONVERSIONS = {
    "predictions": (PredictionArray, predictions_records, SCHEMAS["predictions"]),
    "errors": (PredictionErrors, errors_records, SCHEMAS["errors"]),
    "returns": (RealizedReturns, returns_records, SCHEMAS["returns"]),
    "prediction": (Prediction, predictions_records, SCHEMAS["predictions"]),
}
