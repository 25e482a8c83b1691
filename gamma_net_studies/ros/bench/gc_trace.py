"""Runs a node module with the garbage collector's pauses written to a file: the evidence for latency bursts.

    python -m gamma_net_studies.ros.bench.gc_trace TRACE_FILE gamma_net_ros.horde.node --ros-args ...

Each collection that takes at least ``MIN_PAUSE_S`` (or is not of the youngest generation) is
one line ``start stop generation collected`` (wall-clock seconds, as the benchmark's own
stamps), written when it ends. The node itself runs unchanged, as ``python -m MODULE`` would
run it (``gamma-net bench horde-node`` starts it this way).
"""

from __future__ import annotations

import gc
import runpy
import sys
import time

#: Shorter collections of generation 0 are not written (hundreds a second, tens of microseconds each).
MIN_PAUSE_S = 0.0002


def trace_collections(path: str) -> None:
    """Append a line to ``path`` for every collection worth noting, from now on in this process."""
    out = open(path, "w", buffering=1)  # a line at a time: the node ends with os._exit, nothing is flushed then
    started = [0.0]

    def on_collection(phase: str, info: dict) -> None:
        now = time.time()
        if phase == "start":
            started[0] = now
        elif info["generation"] > 0 or now - started[0] >= MIN_PAUSE_S:
            out.write(f"{started[0]:.6f} {now:.6f} {info['generation']} {info['collected']}\n")

    gc.callbacks.append(on_collection)


def read_trace(path) -> list[tuple[float, float, int]]:
    """(start s, stop s, generation) of each collection a trace file holds."""
    pauses = []
    with open(path) as lines:
        for line in lines:
            fields = line.split()
            if len(fields) == 4:
                pauses.append((float(fields[0]), float(fields[1]), int(fields[2])))
    return pauses


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        sys.exit("usage: python -m gamma_net_studies.ros.bench.gc_trace TRACE_FILE MODULE [ARGS...]")
    trace_collections(argv[0])
    sys.argv = [argv[1], *argv[2:]]
    runpy.run_module(argv[1], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
