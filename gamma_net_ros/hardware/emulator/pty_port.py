"""The emulator's serial port: a pseudo-terminal, optionally behind a stable symlink.

The slave end is what the driver opens (like ``/dev/ttyUSB0``); the symlink stands for
``/dev/serial/by-id/...``, which survives the device being unplugged and plugged back in.
The emulator never replaces or deletes a path it did not make: an existing ``link`` is
refused, unless it is a leftover of an emulator that was killed (a symlink to a pty that is
gone).
"""

from __future__ import annotations

import errno
import os
import pathlib
import tty


def stale_pty_link(path: pathlib.Path) -> bool:
    """Whether ``path`` is a symlink to a pty that no longer exists (left by a killed emulator)."""
    if not path.is_symlink():
        return False
    target = os.readlink(path)
    return target.startswith("/dev/pts/") and not os.path.exists(target)


def check_link_free(path: pathlib.Path) -> None:
    """Raise FileExistsError, naming ``path``, if something that is not ours is there."""
    if os.path.lexists(path) and not stale_pty_link(path):
        raise FileExistsError(
            f"--link {path} already exists and is not a servo emulator's: remove it or choose another path"
        )


class PtyPort:
    """A pty whose slave end is the servos' serial port.

    Args:
      link: path of a symlink to the slave end, kept across reopenings; None: use the
        slave's /dev/pts name.
    """

    def __init__(self, link: str | os.PathLike | None = None) -> None:
        self.link = pathlib.Path(link) if link else None
        self.master: int | None = None
        self._slave: int | None = None
        self.slave_name = ""
        self.hung_up = False  # the master read EIO: no process holds the slave end any more
        self._made_link = ""  # the target of the symlink we made last (ours while it still points there)

    @property
    def is_open(self) -> bool:
        return self.master is not None

    @property
    def path(self) -> str:
        """The path the driver opens."""
        return str(self.link) if self.link else self.slave_name

    def _owns_link(self) -> bool:
        return bool(self._made_link) and self.link.is_symlink() and os.readlink(self.link) == self._made_link

    def open(self) -> None:
        """A new pty (and the link pointed at it).

        Raises:
          FileExistsError: something that is not ours is at the link path; nothing changed.
        """
        if self.link and not self._owns_link():
            check_link_free(self.link)
        master, slave = os.openpty()
        tty.setraw(slave)  # no echo or line editing before the SDK configures the port
        os.set_blocking(master, False)
        self.master, self._slave, self.slave_name = master, slave, os.ttyname(slave)
        self.hung_up = False
        if self.link:
            self.link.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.link.with_name(f".{self.link.name}.{os.getpid()}.tmp")
            try:
                os.symlink(self.slave_name, tmp)  # fails rather than overwrite anything
            except OSError:
                self.close()
                raise
            try:
                os.replace(tmp, self.link)
            except OSError:
                tmp.unlink(missing_ok=True)
                self.close()
                raise
            self._made_link = self.slave_name

    def let_go(self) -> None:
        """Close our own hold on the slave end: the master reads EIO (:attr:`hung_up`) once the host's is closed too.

        The slave is kept open otherwise so that a host closing and reopening the port (a driver's
        reconnect) never hangs the pty up.
        """
        if self._slave is not None:
            os.close(self._slave)
            self._slave = None

    def close(self) -> None:
        """Close the pty; the link goes too, if it is still ours."""
        if self.link and self._owns_link():
            self.link.unlink()
        for fd in (self.master, self._slave):
            if fd is not None:
                os.close(fd)
        self.master = self._slave = None

    def read(self) -> bytes:
        """What the host sent since the last read (maybe nothing)."""
        try:
            return os.read(self.master, 4096)
        except (BlockingIOError, InterruptedError):
            return b""
        except OSError as exc:  # EIO: nothing holds the slave end (only once we let go of it)
            if exc.errno == errno.EIO:
                self.hung_up = True
            return b""

    def write(self, frame: bytes) -> bool:
        """Send ``frame``; False if the pty buffer is full (the host is not reading)."""
        try:
            os.write(self.master, frame)
        except OSError:
            return False
        return True
