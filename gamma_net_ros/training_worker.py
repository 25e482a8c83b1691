"""The neural predictor's training thread: intake into the replay, owed updates, and the node's chores.

The executor thread only validates and queues transitions; this thread, at a lower CPU priority
(``nice``) so that receiving keeps up on a busy machine, moves them into the learner's replay
and trains one update at a time, calling ``between`` after each (the node's taken reports,
predictions and checkpoints, which must not run while an update changes the network).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

from gamma_net_core.neural.learner import TrainingDiverged
from gamma_net_core.neural.online import TransitionStream


class TrainingWorker:
    """Starts the thread on construction; :meth:`stop` joins it and takes in what is still queued.

    Args:
      stream: the node's transition stream (its learner and queue).
      logger: the node's logger (errors, and a diverged training once).
      nice: nice increment of the thread (0: none).
      between: called in the thread after each update or idle turn.
      alive: False once the node's context is shut down (errors then end the thread quietly).
    """

    def __init__(
        self,
        stream: TransitionStream,
        logger,
        *,
        nice: int,
        between: Callable[[], None],
        alive: Callable[[], bool],
        name: str = "neural_predictor.train",
    ) -> None:
        self.stream, self.logger, self.nice, self.between, self.alive = stream, logger, nice, between, alive
        self._diverged_logged = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        if self.nice:
            # Linux schedules threads apart: a nicer worker leaves the receiving thread the CPU it needs.
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), self.nice)
        while not self._stop.is_set():
            try:
                busy = self._once()
            except Exception as exc:  # the worker must not die quietly; at shutdown the context goes first
                if not self.alive():
                    return
                self.logger.error(f"worker: {type(exc).__name__}: {exc}", throttle_duration_sec=5.0)
                busy = 0
            if not busy:
                self.stream.wait(0.05)

    def _once(self) -> int:
        try:
            busy = self.stream.work(max_updates=1)
        except TrainingDiverged as exc:
            busy = 1
            if not self._diverged_logged:
                self._diverged_logged = True
                self.logger.error(f"training stopped: {exc}")
        self.between()
        return busy

    def stop(self) -> None:
        """Stop the thread, then move whatever is still queued into the replay (no update)."""
        self._stop.set()
        self.stream.wake()
        if self._thread.is_alive():
            self._thread.join()
        # Received is kept: what waits behind a max_update_lag bound goes in too, its updates owed.
        self.stream.max_update_lag = 0
        while self.stream.queued and self.stream.work(max_updates=0):
            pass
