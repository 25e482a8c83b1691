"""A node process that the middleware holds after a stop ends anyway, once its own cleanup is done.

Fast DDS can block a participant's teardown (shared-memory ports of processes that ended at the
same moment, eProsima/Fast-DDS#1144, #2051): a node stopped with Ctrl-C then sits inside rclpy's
``destroy_node`` or ``shutdown`` for ever, ignores the SIGTERM ``ros2 launch`` sends 5 s later (a
signal there only sets the stop flag) and is SIGKILLed 10 s after the SIGINT. :class:`StallWatch` waits for the
stop; if the main thread is still inside rclpy :data:`GRACE_S` seconds later and has not left it
by the next look, the node's own cleanup (torque off, the last checkpoint, a bag's metadata) is
over, since the process's own code is not on the stack's top: it writes every thread's stack to a
file in the ROS log directory, says so in one line and ends the process with code 0. While the
node's own code runs (a checkpoint written slowly on a busy machine) it waits, however long; if
that lasts :data:`REPORT_S` seconds, it leaves the stacks and one line all the same, once.

:class:`LoopWatch` writes every thread's stack when the spin loop is held. A Python thread
writes them while Python runs; a thread that holds the GIL inside C (a middleware call that never
returns and never lets the GIL go) freezes the signal handlers and every Python thread alike, and
the process, deaf to SIGINT and SIGTERM, would be SIGKILLed with no word of where it was: for that,
faulthandler's watchdog, a C thread that needs no GIL, writes them. It reads the other threads'
frames without a lock, so it is armed only for when no Python can run: while Python runs it would
read frames being freed, and a dump then can end the process with SIGSEGV.
"""

from __future__ import annotations

import datetime
import faulthandler
import math
import os
import pathlib
import sys
import threading
import time

import rclpy
import rclpy.logging

#: Seconds after the stop before a main thread still inside rclpy counts as held by the middleware.
GRACE_S = 3.0
#: Seconds between looks at the main thread once the grace is over.
LOOK_S = 0.25
#: Seconds after the stop when a node still stopping in its own code leaves its threads' stacks (and goes on).
REPORT_S = 8.0
#: Seconds the spin loop may go without coming round before :class:`LoopWatch` writes the stacks.
HELD_S = 5.0
#: Seconds after the spin loop ends (the stop seen, the teardown begun) before it writes them:
#: after the SIGTERM that ``ros2 launch`` sends 5 s after its SIGINT, before its SIGKILL at 10 s.
STOPPING_HELD_S = 7.0
#: How much longer than the bound the C watchdog waits: this thread re-arms it well within that if it can run
#: at all (the GIL is handed on every 5 ms), so the C thread writes only while no Python runs.
C_MARGIN_S = 1.0
#: The looking thread looks (and re-arms the C watchdog, which starts a thread each time) at most this often.
REARM_S = 1.0
#: Where rclpy's own Python code lives: a frame there is rclpy's (or the middleware's under it).
RCLPY_DIR = str(pathlib.Path(rclpy.__file__).resolve().parent)


def in_rclpy(frame) -> bool:
    """Whether ``frame`` (a thread's innermost Python frame) is rclpy's own code."""
    return frame is not None and str(pathlib.Path(frame.f_code.co_filename).resolve()).startswith(RCLPY_DIR)


class StallWatch:
    """A daemon thread that ends the process if the middleware holds it after ``stop`` is set.

    Args:
      name: the node's name, for the line and the file.
      stop: set when the node is told to stop (its signal handlers set it).
      log_dir: where the stacks go (rclpy's logging directory when None).
    """

    def __init__(self, name: str, stop: threading.Event, *, log_dir: pathlib.Path | None = None) -> None:
        self.name = name
        self.stop = stop
        self.log_dir = log_dir
        self.main = threading.main_thread().ident
        self.done = threading.Event()
        threading.Thread(target=self._watch, name="stall_watch", daemon=True).start()

    def finished(self) -> None:
        """The node is down: nothing more to watch."""
        self.done.set()

    def _watch(self) -> None:
        self.stop.wait()
        if self.done.wait(GRACE_S):
            return
        held = None  # the rclpy frame seen at the last look
        report_at = time.monotonic() + REPORT_S - GRACE_S
        while not self.done.wait(LOOK_S):
            frame = sys._current_frames().get(self.main)
            if not in_rclpy(frame):
                held = None  # the node's own code (or nothing of ROS): its cleanup goes on
                if report_at is not None and time.monotonic() >= report_at:
                    report_at = None  # once: where a slow stop spends its time, for whoever reads the log
                    sys.stderr.write(
                        f"[{self.name}] still stopping {REPORT_S:g} s after the stop, in its own code "
                        f"(every thread's stack: {self._write_stacks()})\n"
                    )
                    sys.stderr.flush()
            elif held is frame:
                self._end()
            else:
                held = frame

    def _end(self) -> None:
        where = self._write_stacks()
        sys.stderr.write(
            f"[{self.name}] the middleware still held the node {GRACE_S:g} s after the stop, its own cleanup "
            f"done: ended without waiting for it (every thread's stack: {where})\n"
        )
        sys.stderr.flush()
        os._exit(0)

    def _write_stacks(self) -> str:
        try:
            directory = self.log_dir or pathlib.Path(rclpy.logging.get_logging_directory())
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / f"{self.name}_{os.getpid()}_{time.strftime('%Y%m%d-%H%M%S')}_shutdown_stall.txt"
            with open(path, "w") as stacks:
                faulthandler.dump_traceback(file=stacks, all_threads=True)
            return str(path)
        except Exception as exc:  # a full disk must not keep the process from ending
            return f"not written: {exc}"


class LoopWatch:
    """Every thread's stack in a file when the node's spin loop is held.

    The loop calls :meth:`beat` at each turn. A daemon thread looks every :func:`look_s` s: if the
    loop has not come round for :data:`HELD_S` s it writes the stacks (holding the GIL, so no
    frame changes under it), and again every :data:`HELD_S` s while the hold lasts; once the loop
    has ended (:meth:`stopping`), once if the process is still there :data:`STOPPING_HELD_S` s
    later. At each look it also re-arms faulthandler's C watchdog, which writes them only if this
    thread could not run for that long: the GIL held inside C, when no Python runs and the C
    thread's unlocked read of the frames is safe.

    It only writes: whether a held loop recovers is the loop's business, and a stop held by the
    middleware is :class:`StallWatch`'s. The file is ``NAME_PID_held_stacks.txt`` in the ROS log
    directory, each dump under a ``Timeout (H:MM:SS)!`` line; :meth:`close` removes it if nothing
    was written. A file with stacks in it belongs to a process that was held (left by one without
    a clean end: killed while held); an empty one, to a process killed, or ended by
    :class:`StallWatch`, before it was held that long.

    Args:
      name: the node's name, for the file.
      log_dir: where the file goes (rclpy's logging directory when None).
    """

    def __init__(self, name: str, *, log_dir: pathlib.Path | None = None) -> None:
        directory = log_dir or pathlib.Path(rclpy.logging.get_logging_directory())
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{name}_{os.getpid()}_held_stacks.txt"
        self.file = open(self.path, "w")  # this thread and the C watchdog write to it until close()
        self.turned_at = time.monotonic()
        self.stopped_at: float | None = None
        self.written_at = -math.inf  # the last dump while the loop ran
        self.stop_written = False  # the dump after the loop ended
        self.done = threading.Event()
        self.lock = threading.Lock()  # the file's one user at a time: the looking thread or close()
        self._arm()
        self.thread = threading.Thread(target=self._watch, name="loop_watch", daemon=True)
        self.thread.start()

    def beat(self) -> None:
        """The loop came round."""
        self.turned_at = time.monotonic()

    def stopping(self) -> None:
        """The loop has ended: the stacks are written if the process is still there in :data:`STOPPING_HELD_S` s."""
        self.stopped_at = time.monotonic()

    def close(self) -> str | None:
        """Disarm; the file's path if stacks were written, else None (the file removed)."""
        self.done.set()
        self.thread.join(timeout=2 * look_s() + 1.0)
        with self.lock:
            faulthandler.cancel_dump_traceback_later()
            self.file.close()
        if self.path.stat().st_size > 0:
            return str(self.path)
        self.path.unlink(missing_ok=True)
        return None

    def due(self, now: float) -> float | None:
        """The hold's bound, in seconds, if the stacks are due at ``now`` (else None): :data:`HELD_S` since the
        last turn or the last dump, whichever is later; once, :data:`STOPPING_HELD_S` after the loop ended."""
        bound = self.bound()
        if self.stopped_at is not None:
            return bound if not self.stop_written and now - self.stopped_at >= bound else None
        return bound if now - max(self.turned_at, self.written_at) >= bound else None

    def bound(self) -> float:
        """Seconds without a turn before the stacks are due: :data:`STOPPING_HELD_S` once the loop ended, else
        :data:`HELD_S`."""
        return STOPPING_HELD_S if self.stopped_at is not None else HELD_S

    def _watch(self) -> None:
        while not self.done.wait(look_s()):
            self._arm()
            if (held := self.due(time.monotonic())) is not None:
                self._write(held)

    def _arm(self) -> None:
        """The C watchdog, for a hold in which this thread cannot run: it writes after the bound unless re-armed."""
        with self.lock:
            if not self.file.closed:
                faulthandler.dump_traceback_later(self.bound() + C_MARGIN_S, file=self.file)

    def _write(self, held: float) -> None:
        with self.lock:
            if self.file.closed:
                return
            self.written_at = time.monotonic()
            self.stop_written = self.stopped_at is not None
            self.file.write(f"Timeout ({datetime.timedelta(seconds=int(held))})!\n")  # faulthandler's own line
            self.file.flush()
            faulthandler.dump_traceback(file=self.file, all_threads=True)


def look_s() -> float:
    """Seconds between :class:`LoopWatch`'s looks: a quarter of the bound, at most :data:`REARM_S`."""
    return min(REARM_S, HELD_S / 4)
