"""What goes wrong between the servos and the host: lost, damaged and late replies, adapter latency.

:class:`Faults` are the settings; :class:`ReplyQueue` applies them to each status packet on its
way out and holds it until it is due. One wire: a late reply holds back the ones behind it.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Faults:
    """What goes wrong with each reply, drawn independently per reply (probabilities sum to at most 1).

    ``latency_s`` is not drawn: like a USB serial adapter's latency timer (an FTDI chip holds
    received bytes for 16 ms by default), it holds every reply that long.
    """

    drop: float = 0.0  # the reply is never sent
    corrupt: float = 0.0  # one byte of the reply's error/parameter field is flipped: its CRC fails
    delay: float = 0.0  # the reply (and those queued behind it) goes out delay_s late
    delay_s: float = 0.1  # s
    latency_s: float = 0.0  # s; every reply goes out this late (the adapter's latency timer)

    def __post_init__(self) -> None:
        for name in ("drop", "corrupt", "delay"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"fault probability {name}={value!r} must be within [0, 1]")
        if self.drop + self.corrupt + self.delay > 1.0 + 1e-12:
            raise ValueError(f"fault probabilities drop+corrupt+delay={self.drop + self.corrupt + self.delay} exceed 1")
        for name in ("delay_s", "latency_s"):
            value = getattr(self, name)
            if not 0.0 <= value <= 10.0:
                raise ValueError(f"{name}={value!r} must be within [0, 10] s")


class ReplyQueue:
    """Status packets on their way to the host, after the faults had their say.

    Args:
      rng: draws the faults.
      counters: where ``dropped``, ``corrupted``, ``delayed`` are counted.
      clock: seconds, monotonic.
    """

    def __init__(
        self,
        rng: np.random.Generator,
        counters: collections.Counter,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rng = rng
        self.counters = counters
        self.clock = clock
        self._outgoing: collections.deque[tuple[float, bytes]] = collections.deque()

    def __len__(self) -> int:
        return len(self._outgoing)

    def clear(self) -> None:
        self._outgoing.clear()

    def next_due(self) -> float | None:
        """When the first queued reply is due (monotonic s), or None if none is queued."""
        return self._outgoing[0][0] if self._outgoing else None

    def put(self, frame: bytes, faults: Faults) -> None:
        """Queue one encoded status packet, dropped, damaged or delayed as ``faults`` draw."""
        draw = self.rng.random()
        not_before = self.clock() + faults.latency_s
        if draw < faults.drop:
            self.counters["dropped"] += 1
            return
        if draw < faults.drop + faults.corrupt:
            frame = bytearray(frame)
            # Flip bits of one byte from the error byte on (framing intact, CRC now wrong).
            index = int(self.rng.integers(8, len(frame) - 2)) if len(frame) > 10 else len(frame) - 1
            frame[index] ^= int(self.rng.integers(1, 256))
            frame = bytes(frame)
            self.counters["corrupted"] += 1
        elif draw < faults.drop + faults.corrupt + faults.delay:
            not_before += faults.delay_s
            self.counters["delayed"] += 1
        if self._outgoing:  # one wire: a late reply holds back the ones behind it
            not_before = max(not_before, self._outgoing[-1][0])
        self._outgoing.append((not_before, frame))

    def pop_due(self) -> bytes | None:
        """The first reply if it is due now, removed from the queue; else None."""
        if self._outgoing and self._outgoing[0][0] <= self.clock():
            return self._outgoing.popleft()[1]
        return None
