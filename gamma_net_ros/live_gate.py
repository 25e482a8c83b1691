"""The live view's front door: who may open the Foxglove stream, under either subprotocol name.

foxglove-sdk's server (0.30) has no say over who connects: it accepts any WebSocket ``Origin``,
so a web page the operator happens to open could read the stream from ``ws://localhost:8765``
(browsers let a page open a WebSocket to any address; only the server can refuse it). And it
accepts only the subprotocol name ``foxglove.sdk.v1``, answering a client that offers just
``foxglove.websocket.v1`` (Lichtblick, the protocol's own clients) with HTTP 400.

:class:`LiveGate` listens where the user asked and relays each accepted connection, frame by
frame, to the SDK's server on a private port of 127.0.0.1:

- ``Origin``: a browser's handshake carries its page's origin; it must be on the allow list
  (this machine's pages by default: ``http(s)://localhost``, ``127.0.0.1``, ``[::1]``, any port).
  A handshake without one comes from a program, not a web page (Foxglove or Lichtblick desktop, a
  script), and is let through the Origin check.
- a token, if one is set: ``?token=...`` in the URL or ``Authorization: Bearer ...``.
- the subprotocol: ``foxglove.sdk.v1`` or ``foxglove.websocket.v1``, whichever the client offers
  (the former first); the SDK's server is always spoken to as ``foxglove.sdk.v1``.

A refused handshake gets HTTP 403 (Origin) or 401 (token) and a line for the node's log.
"""

from __future__ import annotations

import hmac
import http
import threading
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from websockets.sync.server import Server, ServerConnection, serve

#: What the SDK's server speaks; what Lichtblick and the protocol's clients offer (docs/live-view.md).
SUBPROTOCOLS = ("foxglove.sdk.v1", "foxglove.websocket.v1")
#: Origins of this machine's pages (any port): the default allow list.
LOCAL_ORIGINS = (
    "http://localhost",
    "https://localhost",
    "http://127.0.0.1",
    "https://127.0.0.1",
    "http://[::1]",
    "https://[::1]",
)
#: Largest frame relayed from a client (subscriptions, small requests) or from the server, bytes.
MAX_FRAME = 64 * 2**20


@dataclass(frozen=True)
class Admission:
    """Who may connect."""

    #: Allowed ``Origin`` values (``scheme://host`` matches any port; with a port, that port only).
    origins: tuple[str, ...] = LOCAL_ORIGINS
    #: The token a client must present; "" for none.
    token: str = ""

    def refusal(self, origin: str | None, path: str, authorization: str | None) -> tuple[int, str] | None:
        """Why a handshake is refused, as (HTTP status, reason), or None to let it through.

        Args:
          origin: its ``Origin`` header (None: not sent, the client is not a web page).
          path: the request's path and query (``/?token=...``).
          authorization: its ``Authorization`` header, if any.
        """
        if origin is not None and not self.allows(origin):
            return (
                http.HTTPStatus.FORBIDDEN,
                f"Origin {origin!r} is not allowed (allowed_origins: {list(self.origins)})",
            )
        if self.token:
            given = urllib.parse.parse_qs(urllib.parse.urlsplit(path).query).get("token", [""])[0]
            if authorization and authorization.lower().startswith("bearer "):
                given = authorization[len("bearer ") :].strip()
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                return http.HTTPStatus.UNAUTHORIZED, "a missing or wrong token (?token=... in the URL)"
        return None

    def allows(self, origin: str) -> bool:
        """Whether a page of ``origin`` may connect."""
        given = urllib.parse.urlsplit(origin.strip().lower())
        for allowed in self.origins:
            want = urllib.parse.urlsplit(allowed.strip().lower().rstrip("/"))
            if (given.scheme, given.hostname) != (want.scheme, want.hostname):
                continue
            if want.port is None or want.port == given.port:
                return True
        return False


class LiveGate:
    """Serves ``host:port``, admits by :class:`Admission`, relays to the SDK's server at ``127.0.0.1:upstream_port``.

    Args:
      host, port: where clients connect (port 0: any free one, see :attr:`port`).
      upstream_port: the foxglove-sdk server's port on 127.0.0.1.
      admission: who may connect.
      refused: called with a line for each refused handshake (the node logs it, throttled).
    """

    def __init__(
        self,
        *,
        host: str,
        port: int,
        upstream_port: int,
        admission: Admission,
        refused: Callable[[str], None],
    ) -> None:
        self.upstream = f"ws://127.0.0.1:{upstream_port}"
        self.admission = admission
        self.refused = refused
        self.server: Server = serve(
            self._relay,
            host,
            port,
            subprotocols=list(SUBPROTOCOLS),
            process_request=self._admit,
            compression=None,
            max_size=MAX_FRAME,
        )
        self.port = self.server.socket.getsockname()[1]
        self.thread = threading.Thread(target=self.server.serve_forever, name="live_view.gate", daemon=True)
        self.thread.start()

    def _admit(self, connection: ServerConnection, request):
        headers = request.headers
        why = self.admission.refusal(headers.get("Origin"), request.path, headers.get("Authorization"))
        if why is None:
            return None
        status, reason = why
        self.refused(f"refused a connection from {connection.remote_address[0]}: {reason}")
        return connection.respond(status, f"{reason}\n")

    def _relay(self, client: ServerConnection) -> None:
        try:
            upstream = connect(
                self.upstream, subprotocols=[SUBPROTOCOLS[0]], proxy=None, compression=None, max_size=MAX_FRAME
            )
        except (OSError, ConnectionClosed) as exc:
            self.refused(f"the Foxglove server is not answering ({exc}): closed a connection")
            client.close()
            return
        back = threading.Thread(target=_pump, args=(upstream, client), name="live_view.gate.down", daemon=True)
        back.start()
        _pump(client, upstream)
        back.join()

    def close(self) -> None:
        """Stop listening and close every connection."""
        self.server.shutdown()


def _pump(source, sink) -> None:
    """Frames from ``source`` to ``sink`` until either closes; then both are closed."""
    try:
        for frame in source:
            sink.send(frame)
    except (ConnectionClosed, OSError):
        pass
    finally:
        source.close()
        sink.close()


def parse_origins(values: Sequence[str]) -> tuple[str, ...]:
    """The ``allowed_origins`` parameter, checked: each ``scheme://host[:port]``.

    Raises:
      ValueError: one that is not an origin, naming it.
    """
    out = []
    for value in values:
        parts = urllib.parse.urlsplit(value.strip())
        try:
            parts.port  # noqa: B018 - raises on a port that is not a number
        except ValueError:
            parts = None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
            raise ValueError(
                f"parameter allowed_origins: {value!r} is not an origin (scheme://host[:port], "
                "e.g. https://app.foxglove.dev)"
            )
        out.append(value.strip())
    return tuple(out)
