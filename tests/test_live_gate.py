"""Who may open the live view: a web page only from an allowed Origin, a client only with the token; either subprotocol.

The admission rules are checked as pure functions; the node is started as users start it, and each
handshake is a real WebSocket client's against it.
"""

from __future__ import annotations

import json
import socket

import pytest
from rclpy.node import Node
from waiting import spin_until
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from gamma_net_ros.live_gate import SUBPROTOCOLS, Admission, parse_origins
from gamma_net_ros.processes import NodeProcess, node_command


@pytest.mark.parametrize(
    "origin, allowed",
    [
        ("http://localhost:3000", True),
        ("http://127.0.0.1:8080", True),
        ("https://localhost", True),
        ("http://[::1]:5173", True),
        ("https://app.foxglove.dev", False),
        ("http://localhost.evil.example", False),
        ("http://evil.example", False),
        ("null", False),  # a sandboxed page
        ("file://", False),
    ],
)
def test_only_this_machines_pages_are_allowed_by_default(origin, allowed):
    assert Admission().allows(origin) is allowed
    assert (Admission().refusal(origin, "/", None) is None) is allowed


def test_an_origin_with_a_port_allows_that_port_only_and_a_token_is_checked():
    admission = Admission(origins=("https://app.foxglove.dev", "http://robot.local:8080"), token="s3cret")
    assert admission.allows("https://app.foxglove.dev") and admission.allows("http://robot.local:8080")
    assert not admission.allows("http://robot.local:9090") and not admission.allows("http://app.foxglove.dev")
    assert admission.refusal(None, "/?token=s3cret", None) is None
    assert admission.refusal(None, "/", "Bearer s3cret") is None
    assert admission.refusal(None, "/?token=wrong", None)[0] == 401
    assert admission.refusal(None, "/", None)[0] == 401
    assert admission.refusal("http://evil.example", "/?token=s3cret", None)[0] == 403


def test_allowed_origins_are_checked_naming_the_bad_one():
    assert parse_origins(["https://app.foxglove.dev", "http://localhost:8080"]) == (
        "https://app.foxglove.dev",
        "http://localhost:8080",
    )
    for bad in ("app.foxglove.dev", "ftp://x", "http://host/path", "http://host:port"):
        with pytest.raises(ValueError, match=f"allowed_origins: {bad!r} is not an origin"):
            parse_origins([bad])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server_info(url: str, subprotocols, origin=None) -> tuple[str, dict]:
    """The negotiated subprotocol and the serverInfo of a handshake (raises InvalidStatus if refused)."""
    with connect(url, subprotocols=subprotocols, origin=origin, proxy=None, open_timeout=30) as socket_:
        while True:
            message = json.loads(socket_.recv(timeout=30))
            if message["op"] == "serverInfo":
                return socket_.subprotocol, message


@pytest.mark.ros
def test_the_live_view_admits_by_origin_and_token_under_either_subprotocol(executor, tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    port = _free_port()
    log = tmp_path / "live_view.log"
    command = node_command("gamma_net_ros.live_view", params={"port": port, "token_file": str(token)})
    executor.add_node(Node("gate_rig"))
    url = f"ws://127.0.0.1:{port}/?token=s3cret"
    with NodeProcess(command, log) as view:
        up = lambda: "serving ws://" in log.read_text() or not view.running  # noqa: E731
        assert spin_until(executor, up, timeout=60) and view.running, log.read_text()
        # Each subprotocol name alone, as a client that knows only that one offers it.
        for name in SUBPROTOCOLS:
            chosen, info = _server_info(url, [name])
            assert chosen == name and info["name"] == "gamma_net live_view"
        assert _server_info(url, list(SUBPROTOCOLS))[0] == "foxglove.sdk.v1"
        assert _server_info(url, ["foxglove.websocket.v1"], origin="http://localhost:3000")[0]
        with pytest.raises(InvalidStatus) as refused:
            _server_info(url, list(SUBPROTOCOLS), origin="https://evil.example")
        assert refused.value.response.status_code == 403
        with pytest.raises(InvalidStatus) as refused:
            _server_info(f"ws://127.0.0.1:{port}/", list(SUBPROTOCOLS))
        assert refused.value.response.status_code == 401
        assert view.stop() == 0, log.read_text()
    output = log.read_text()
    assert "Origin 'https://evil.example' is not allowed" in output, output
    assert "Traceback" not in output, output


@pytest.mark.ros
def test_an_unreadable_token_file_is_refused_in_one_line(tmp_path):
    missing = tmp_path / "no_token"
    log = tmp_path / "live_view.log"
    command = node_command("gamma_net_ros.live_view", params={"port": 0, "token_file": str(missing)})
    with NodeProcess(command, log) as view:
        assert view.wait(timeout=60) == 1
    output = log.read_text()
    assert f"refusing to start: parameter token_file: cannot read {missing}" in output, output
    assert "Traceback" not in output and len(output.strip().splitlines()) == 1, output
