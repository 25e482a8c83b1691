"""Node: a Horde's predictions, realized returns and errors live in Foxglove, over the Foxglove WebSocket protocol.

    ros2 run gamma_net_ros live_view          # ws://127.0.0.1:8765; docs/live-view.md

Foxglove (the app, or app.foxglove.dev) connects to ``ws://localhost:8765`` and, with the layout
``config/live_view.json``, plots each question's predictions at every published timescale, the
realized returns beside the predictions they score, and the running errors. Each question is one
JSON channel per Horde topic, named after it (``/horde/predictions/shoulder_speed``,
``/horde/returns/shoulder_speed``, ``/horde/errors/shoulder_speed``); a predictor's ``Prediction``
topic is one channel of its own name (gamma_net_ros.live_records). Their arrays run over the
published timescales in order (``taus``), so a Plot panel draws ``.scaled[0]`` over time, or the
latest ``.scaled[:]`` against ``.taus[:]``; readouts are named (``.readouts.next_2s``).

Values are as published (``values``, the discounted return) and times (1 - gamma) (``scaled``:
the signal's average over about the next tau steps, one axis for all timescales). The returns
(``horde/returns``, published while someone subscribes) are those that completed at a tick,
``returns`` beside the ``predictions`` made ``steps_ago`` ticks before (about 6.9 tau: a return
is known only once its horizon has passed), and both scaled. The errors are the Horde's running
errors against the realized returns (``horde/errors``): ``rmse``, the mean predictor's
``mean_rmse``, their ``ratio`` (below 1: the question learned something) and the ``samples``
scored. JSON has no NaN: a value that is not finite is null.

Who may connect (gamma_net_ros.live_gate): a web page only from an origin in ``allowed_origins``
(this machine's pages by default), and, with ``token_file``, only a client that presents its token
(``ws://localhost:8765/?token=...``). Clients may offer either subprotocol name,
``foxglove.sdk.v1`` (the SDK's) or ``foxglove.websocket.v1`` (Lichtblick's).
"""

from __future__ import annotations

import pathlib
import sys

import foxglove
from rclpy.node import Node

from gamma_net_ros.live_gate import LOCAL_ORIGINS, Admission, LiveGate, parse_origins
from gamma_net_ros.live_records import CONVERSIONS, SCHEMAS, errors_records, predictions_records, returns_records
from gamma_net_ros.node_main import run_node
from gamma_net_ros.params import declare

__all__ = ["SCHEMAS", "LiveView", "errors_records", "main", "predictions_records", "returns_records"]


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
        origins = declare(
            self,
            "allowed_origins",
            list(LOCAL_ORIGINS),
            "web page origins that may connect (scheme://host[:port]); programs send none",
            read_only=True,
        )
        token_file = declare(
            self, "token_file", "", "a file holding the token a client must give ('' = none)", read_only=True
        )
        admission = Admission(origins=parse_origins(origins), token=_read_token(token_file))
        topics = {
            "predictions": ("horde/predictions", "a Horde's PredictionArray topic ('' = none)"),
            "errors": ("horde/errors", "a Horde's PredictionErrors topic ('' = none)"),
            "returns": ("horde/returns", "a Horde's RealizedReturns topic ('' = none)"),
            "prediction": ("predictions", "a predictor's Prediction topic ('' = none)"),
        }
        self.channels: dict[str, foxglove.Channel] = {}
        # The SDK's server on a private port; the gate, where clients connect, admits and relays.
        self.server = foxglove.start_server(name="gamma_net live_view", host="127.0.0.1", port=0)
        try:
            self.gate = LiveGate(
                host=host,
                port=port,
                upstream_port=self.server.port,
                admission=admission,
                refused=lambda line: self.get_logger().warning(line, throttle_duration_sec=5.0),
            )
        except OSError as exc:
            raise ValueError(
                f"cannot serve on {host}:{port} ({exc.strerror or exc}); "
                "give another port: -p port:=N (0: any free one)"
            ) from None
        for key, (default, description) in topics.items():
            if topic := declare(self, f"{key}_topic", default, description, read_only=True):
                topic = self.resolve_topic_name(topic)
                kind, convert, schema = CONVERSIONS[key]
                callback = lambda msg, t=topic, c=convert, s=schema: self.show(c, msg, t, s)  # noqa: E731
                self.create_subscription(kind, topic, callback, 10)
        self.get_logger().info(
            f"serving ws://{host}:{self.gate.port} (Foxglove: open a connection to it)"
            + ("; clients give the token of token_file" if admission.token else "")
        )

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
        if hasattr(self, "gate"):
            self.gate.close()
        if hasattr(self, "server"):
            self.server.stop()
        super().destroy_node()


def _read_token(path: str) -> str:
    """The token in file ``path`` (its first line), "" for no path; ValueError naming the file if unusable."""
    if not path:
        return ""
    try:
        token = pathlib.Path(path).expanduser().read_text().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(
            f"parameter token_file: cannot read {path} ({getattr(exc, 'strerror', None) or exc})"
        ) from None
    if not token:
        raise ValueError(f"parameter token_file: {path} is empty; put the token in it")
    return token


def main(args=None) -> int:
    return run_node(LiveView, args)


if __name__ == "__main__":
    sys.exit(main())
