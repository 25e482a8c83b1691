"""What numba compiles while a block runs: to check that a node's warm-up left nothing to compile."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def numba_compilations() -> Iterator[list[str]]:
    """Yields a list that collects ``"dispatcher args"`` for every numba compilation started inside the block."""
    import numba.core.event as numba_event

    class Compilations(numba_event.Listener):
        def __init__(self) -> None:
            self.seen: list[str] = []

        def on_start(self, event) -> None:
            self.seen.append(f"{event.data.get('dispatcher')} {event.data.get('args')}")

        def on_end(self, event) -> None:
            pass

    listener = Compilations()
    with numba_event.install_listener("numba:compile", listener):
        yield listener.seen
