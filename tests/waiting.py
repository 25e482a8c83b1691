"""How tests wait: for readiness (a line, a topic, a service, a count), within bounds scaled for slow machines.

A wait ends as soon as what it waits for is there, so a generous bound costs nothing on a quick
machine and only delays the report of a real failure. The bounds written in the tests are what
the shared 2-core development machine needs; ``GAMMA_NET_TEST_SLOWDOWN`` multiplies every one of
them. Its default, 4, lets a machine four times slower (a busy laptop or CI runner) pass.
Fixed-length windows that assert that nothing happens (`spin_for`) are not scaled: they are
part of what the test checks, not a wait.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

#: Default factor on every bound: the suite passes on a machine this many times slower.
DEFAULT_SLOWDOWN = 4.0


def _slowdown() -> float:
    text = os.environ.get("GAMMA_NET_TEST_SLOWDOWN", str(DEFAULT_SLOWDOWN))
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value >= 1.0:  # also refuses nan
        raise ValueError(f"GAMMA_NET_TEST_SLOWDOWN must be a number >= 1; got {text!r}")
    return value


SLOWDOWN = _slowdown()


def bound(seconds: float) -> float:
    """The bound for a wait written as ``seconds`` on the development machine, scaled by the slowdown.

    Args:
        seconds: how long the wait may take on the shared 2-core development machine.

    Returns:
        ``seconds * SLOWDOWN``.
    """
    return seconds * SLOWDOWN


def wait_until(predicate: Callable[[], bool], timeout: float, step: float = 0.05) -> bool:
    """Polls ``predicate`` until it holds or ``bound(timeout)`` seconds pass.

    Args:
        predicate: what is waited for.
        timeout: the bound on the development machine, in seconds (scaled here).
        step: seconds between polls.

    Returns:
        The predicate's last value.
    """
    deadline = time.monotonic() + bound(timeout)
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()


def spin_until(executor, predicate: Callable[[], bool], timeout: float = 10.0, step: float = 0.05) -> bool:
    """Spins ``executor`` until ``predicate()`` holds or ``bound(timeout)`` seconds pass.

    Args:
        executor: the rclpy executor holding the test's nodes.
        predicate: what is waited for.
        timeout: the bound on the development machine, in seconds (scaled here).
        step: the longest single spin, in seconds.

    Returns:
        The predicate's last value.
    """
    deadline = time.monotonic() + bound(timeout)
    while time.monotonic() < deadline:
        if predicate():
            return True
        executor.spin_once(timeout_sec=step)
    return predicate()


def spin_for(executor, seconds: float, step: float = 0.05) -> None:
    """Spins ``executor`` for exactly ``seconds`` (not scaled): a window in which a test checks what happens.

    Args:
        executor: the rclpy executor holding the test's nodes.
        seconds: the window's length.
        step: the longest single spin, in seconds.
    """
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        executor.spin_once(timeout_sec=min(step, left))


def publish_burst(executor, publish: Callable[[int], None], rate_hz: float, seconds: float) -> int:
    """Calls ``publish(n)`` for n = 0, 1, ... at ``rate_hz`` for ``seconds`` of real time, spinning between.

    The messages keep to the rate on average (those a slow spin delayed go out together after it):
    a burst into a node, whose keep-last queues then drop what it cannot take.

    Returns:
        How many were published: ``rate_hz * seconds``.
    """
    total, sent, began = int(rate_hz * seconds), 0, time.monotonic()
    while sent < total:
        while sent < min(total, (time.monotonic() - began) * rate_hz):
            publish(sent)
            sent += 1
        spin_for(executor, 0.0005, step=0.0005)
    return sent
