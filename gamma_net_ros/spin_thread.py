"""An executor spinning in a background thread, stopped and joined before its nodes are destroyed.

The benches and studies publish and wait from their main thread and spin their node in a daemon
thread. Ending that takes an order: the thread stops spinning and is joined, then the executor is
shut down, then the node destroyed. ``executor.shutdown()`` alone does not wait for a spin in
progress: the thread may still hold the node's handle, and rclpy then destroys the node (and, with
the last node, the DDS participant) on that thread when it lets go, holding the GIL. Once, that
destruction deadlocked with a discovery callback of a node exiting at the same moment, and
``gamma-net bench ros`` spun at 100 % CPU and never exited. A thread stopped between
``spin_once`` calls holds nothing. (Shutting an executor down under a spinning thread also raced
with the thread's own use of it: an InvalidHandle traceback at the end of a run.) For the same
deadlock, a bench stops the node processes it measures before destroying its own node, so their
leaving is seen while its participant still stands.
"""

from __future__ import annotations

import threading

from rclpy.executors import ExternalShutdownException


class SpinThread:
    """``executor`` spun in a daemon thread, ``period_s`` at a time, until :meth:`stop`."""

    def __init__(self, executor, period_s: float = 0.05) -> None:
        self.executor = executor
        self.period_s = period_s
        self._stopping = threading.Event()
        self.thread = threading.Thread(target=self._spin, daemon=True, name="spin")
        self.thread.start()

    def _spin(self) -> None:
        try:
            while not self._stopping.is_set() and self.executor.context.ok():
                self.executor.spin_once(timeout_sec=self.period_s)
        except ExternalShutdownException:
            pass  # the context was shut down under the wait (Ctrl-C): the spin is over, as spin() ends

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop spinning, join the thread, shut the executor down; whether the thread ended in ``timeout`` s."""
        self._stopping.set()
        self.thread.join(timeout)
        self.executor.shutdown(timeout_sec=timeout)
        return not self.thread.is_alive()
