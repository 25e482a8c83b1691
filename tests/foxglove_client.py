"""A client of the Foxglove WebSocket protocol (v1), as the Foxglove app speaks it.

foxglove-sdk's server (0.30) accepts the protocol's v1 messages only under the subprotocol name
``foxglove.sdk.v1`` and answers a handshake offering only ``foxglove.websocket.v1`` with HTTP 400
("Missing expected sec-websocket-protocol header"); the live view's gate accepts either
(gamma_net_ros.live_gate). The client offers both, the SDK's first.

Only what a viewer does: connect with the protocol's subprotocol, read ``serverInfo`` and the
``advertise``d channels, ``subscribe`` to channels, and decode the binary ``messageData`` frames
(opcode 0x01, subscription id u32 LE, log time u64 LE ns, payload: here JSON).
"""

from __future__ import annotations

import json
import struct
import time

from websockets.sync.client import connect

SUBPROTOCOLS = ["foxglove.sdk.v1", "foxglove.websocket.v1"]
MESSAGE_DATA = 0x01


class FoxgloveClient:
    """Connected to ``ws://host:port``; :meth:`poll` reads what has arrived, without waiting long."""

    def __init__(self, url: str) -> None:
        self.socket = connect(url, subprotocols=SUBPROTOCOLS, proxy=None, open_timeout=30, legacy=True)
        self.server_info: dict | None = None
        self.channels: dict[str, dict] = {}  # topic -> advertised channel
        self.subscriptions: dict[int, str] = {}  # subscription id -> topic
        self.received: dict[str, list[tuple[int, dict]]] = {}  # topic -> [(log time ns, message)]

    def poll(self, seconds: float = 0.05) -> None:
        """Reads every frame that arrives within ``seconds`` (at least one wait)."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                frame = self.socket.recv(timeout=max(deadline - time.monotonic(), 0.0))
            except TimeoutError:
                return
            self._take(frame)

    def _take(self, frame: str | bytes) -> None:
        if isinstance(frame, str):
            message = json.loads(frame)
            if message["op"] == "serverInfo":
                self.server_info = message
            elif message["op"] == "advertise":
                self.channels.update({c["topic"]: c for c in message["channels"]})
            return
        opcode, subscription, log_time = struct.unpack_from("<BIQ", frame)
        assert opcode == MESSAGE_DATA, f"unexpected binary opcode {opcode:#x}"
        topic = self.subscriptions[subscription]
        self.received.setdefault(topic, []).append((log_time, json.loads(frame[struct.calcsize("<BIQ") :])))

    def subscribe(self, topic: str) -> None:
        """Subscribes to an advertised channel by its topic."""
        sub = len(self.subscriptions) + 1
        self.subscriptions[sub] = topic
        request = {"op": "subscribe", "subscriptions": [{"id": sub, "channelId": self.channels[topic]["id"]}]}
        self.socket.send(json.dumps(request))

    def close(self) -> None:
        self.socket.close()
