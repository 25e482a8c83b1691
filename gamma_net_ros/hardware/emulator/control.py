"""The emulator's control socket: one JSON request per connection, one JSON reply line.

The socket lives in a private folder (mode 0700) that the emulator makes and removes, so
only its user can change a running emulator's faults. Clients are served on their own
thread, never on the one that answers the servos' serial traffic, and a request is read
with a size limit and a time limit: a stuck or oversized client cannot stall the servos.
"""

from __future__ import annotations

import json
import os
import pathlib
import select
import socket
import stat
import threading
from collections.abc import Callable

SOCKET_NAME = "socket"
MAX_REQUEST_BYTES = 64 * 1024
CLIENT_TIMEOUT_S = 2.0


def socket_path(control: str | os.PathLike) -> pathlib.Path:
    """The socket inside a control folder (or ``control`` itself if it is the socket)."""
    path = pathlib.Path(control)
    return path / SOCKET_NAME if path.is_dir() else path


def _stale_control_dir(path: pathlib.Path) -> bool:
    """Whether ``path`` is a control folder left by a killed emulator: ours, private, a dead socket only."""
    try:
        info = path.lstat()
        entries = os.listdir(path)
    except OSError:
        return False
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) != 0o700:
        return False
    if entries != [SOCKET_NAME] or not stat.S_ISSOCK((path / SOCKET_NAME).lstat().st_mode):
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path / SOCKET_NAME))
        except OSError:
            return True  # nobody listens
    return False


def check_control_free(path: pathlib.Path) -> None:
    """Raise FileExistsError, naming ``path``, if something that is not a stale control folder is there."""
    if os.path.lexists(path) and not _stale_control_dir(path):
        raise FileExistsError(
            f"--control {path} already exists and is not a stopped servo emulator's: remove it or choose another path"
        )


def read_line(conn: socket.socket, limit: int | None = None) -> str:
    """One newline-terminated line (or what came before the peer closed).

    Raises:
      ValueError: more than ``limit`` bytes without a newline.
    """
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
        if limit is not None and len(data) > limit:
            raise ValueError(f"request longer than {limit} bytes")
    return data.decode()


class ControlServer:
    """Serves ``handle(request) -> reply fields`` on a Unix socket in a private folder, on its own thread.

    Args:
      folder: the control folder to make (it must not exist, or be a stopped emulator's).
      handle: carries out one request (a dict); its exceptions are answered, never fatal.
    """

    def __init__(self, folder: str | os.PathLike, handle: Callable[[dict], dict]) -> None:
        self.folder = pathlib.Path(folder)
        self.handle = handle
        self._server: socket.socket | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def socket_path(self) -> pathlib.Path:
        return self.folder / SOCKET_NAME

    @property
    def running(self) -> bool:
        return self._thread is not None

    def start(self) -> ControlServer:
        """Make the folder, listen, and serve on a background thread.

        Raises:
          FileExistsError: the folder exists and is not a stopped emulator's; nothing changed.
        """
        check_control_free(self.folder)
        if os.path.lexists(self.folder):  # a stopped emulator's: ours to replace
            self.socket_path.unlink()
            self.folder.rmdir()
        self.folder.parent.mkdir(parents=True, exist_ok=True)
        self.folder.mkdir(mode=0o700)
        os.chmod(self.folder, 0o700)  # whatever the umask
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._server.bind(str(self.socket_path))
            self._server.listen(8)
        except OSError:
            self._server.close()
            self._server = None
            self.socket_path.unlink(missing_ok=True)
            self.folder.rmdir()
            raise
        self._stop.clear()
        self._thread = threading.Thread(target=self._serve, name="servo-emulator-control", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; remove the socket and the folder (only what this server made)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=CLIENT_TIMEOUT_S + 1.0)
            self._thread = None
        if self._server is not None:
            self._server.close()
            self._server = None
            self.socket_path.unlink(missing_ok=True)
            try:
                self.folder.rmdir()
            except OSError:
                pass  # someone put something else in it: leave it

    def _serve(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._server], [], [], 0.1)
            if not ready:
                continue
            try:
                conn, _ = self._server.accept()
            except OSError:
                continue
            with conn:
                self._answer(conn)

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(CLIENT_TIMEOUT_S)
        try:
            request = json.loads(read_line(conn, MAX_REQUEST_BYTES))
            if not isinstance(request, dict):
                raise ValueError(f"a request is a JSON object; got {type(request).__name__}")
            reply = {"ok": True, **self.handle(request)}
        except Exception as exc:  # a bad command is answered, never fatal
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        try:
            conn.sendall((json.dumps(reply) + "\n").encode())
        except OSError:
            pass  # the client left
