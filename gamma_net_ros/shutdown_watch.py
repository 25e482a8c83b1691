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

:class:`LoopWatch` covers what a Python thread cannot: a thread that holds the GIL inside C
(a middleware call that never returns and never lets the GIL go) freezes the signal handlers and
:class:`StallWatch` alike, and the process, deaf to SIGINT and SIGTERM, is SIGKILLed with no word
of where it was. faulthandler's watchdog is a C thread that needs no GIL.
"""

from __future__ import annotations

import faulthandler
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
#: The loop re-arms the C watchdog at most this often (each arming starts a thread).
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
    """Every thread's stack in a file, written by a C thread, when the node's spin loop is held.

    Armed at each turn of the loop (:meth:`beat`, at most once a :data:`REARM_S`), faulthandler's
    watchdog writes the stacks if the loop has not come round for :data:`HELD_S` s, and again every
    :data:`HELD_S` s until it does (a hold for good adds a dump every HELD_S s); once the loop
    has ended (:meth:`stopping`), if the process is still there :data:`STOPPING_HELD_S` s later.
    It only writes: whether a held loop recovers is the loop's business, and a stop held by the
    middleware is :class:`StallWatch`'s. The file is ``NAME_PID_held_stacks.txt`` in the ROS log
    directory; :meth:`close` removes it if nothing was written. A file with stacks in it belongs to
    a process that was held (left by one without a clean end: killed while held); an empty one, to
    a process killed, or ended by :class:`StallWatch`, before it was held that long.

    Args:
      name: the node's name, for the file.
      log_dir: where the file goes (rclpy's logging directory when None).
    """

    def __init__(self, name: str, *, log_dir: pathlib.Path | None = None) -> None:
        directory = log_dir or pathlib.Path(rclpy.logging.get_logging_directory())
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / f"{name}_{os.getpid()}_held_stacks.txt"
        self.file = open(self.path, "w")  # the C watchdog writes to it until close()
        self.armed_at = -REARM_S

    def beat(self) -> None:
        """The loop came round: the stacks are written if it does not again within :data:`HELD_S` s."""
        now = time.monotonic()
        # Re-armed well before it would fire: armed only every HELD_S, a loop turning freely would
        # see it fire between two turns, and a hold that began then would never be written. And it
        # repeats until re-armed: a loop slowed past HELD_S (a starved machine) fires it once, and
        # a hold that begins before the loop comes round again is written at the next repeat.
        if now - self.armed_at >= min(REARM_S, HELD_S / 2):
            self.armed_at = now
            faulthandler.dump_traceback_later(HELD_S, repeat=True, file=self.file)

    def stopping(self) -> None:
        """The loop has ended: the stacks are written if the process is still there in :data:`STOPPING_HELD_S` s."""
        faulthandler.dump_traceback_later(STOPPING_HELD_S, file=self.file)

    def close(self) -> str | None:
        """Disarm; the file's path if stacks were written, else None (the file removed)."""
        faulthandler.cancel_dump_traceback_later()
        self.file.close()
        if self.path.stat().st_size > 0:
            return str(self.path)
        self.path.unlink(missing_ok=True)
        return None
