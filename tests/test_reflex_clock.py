"""The reflex's clock cannot be stopped from outside: a real node under ``use_sim_time`` and a real ``/clock``.

A ``/clock`` that freezes, stops or runs backward leaves every input stale once it has not
advanced for ``stale_after_s`` of steady time, and the fail-safe holds; the decisions and the
holds run on the steady clock, so they go on while ``/clock`` stands still. (``use_sim_time`` set
at run time is refused: tests/test_reflex_node_safety.py, through the real ``ros2 param set``.)
"""

from __future__ import annotations

import time

import pytest
from rosgraph_msgs.msg import Clock
from test_reflex_node import STALL, Rig, rules_file
from test_reflex_node_safety import make_reflex

from gamma_net_ros.conversions import seconds_to_stamp

pytestmark = pytest.mark.ros

STALE_AFTER_S = 0.3


class SimClock:
    """Publishes ``/clock`` as a simulator would: ``advance`` moves it with the steady clock, or by ``step``."""

    def __init__(self, rig: Rig, start: float = 1000.0):
        self.publisher = rig.node.create_publisher(Clock, "/clock", 10)
        self.now, self.last = start, time.monotonic()

    def advance(self, rate: float = 1.0) -> None:
        """Move it by ``rate`` times the steady time since the last call (0: frozen; negative: backward)."""
        steady = time.monotonic()
        self.now += rate * (steady - self.last)
        self.last = steady
        self.publisher.publish(Clock(clock=seconds_to_stamp(self.now)))


def test_a_clock_that_freezes_stops_or_runs_backward_leaves_the_reflex_holding(tmp_path, executor, spin):
    rules = rules_file(tmp_path, STALL | {"hold_s": 0.0}, stale_after_s=STALE_AFTER_S)
    reflex = make_reflex(rules, use_sim_time="true", hold_period_s=0.05)
    executor.add_node(reflex)
    rig = Rig(executor, spin)
    clock = SimClock(rig)
    held_at = {}

    def flowing():
        clock.advance()
        rig.predict(0.2)

    def fresh() -> bool:
        return reflex.state.status[0].seen > 0 and not reflex.state.stopped and not reflex.clock_stalled

    for case, rate, publish in (("frozen", 0.0, True), ("stopped", 1.0, False), ("backward", -1.0, True)):
        assert rig.until(fresh, feed=flowing), case  # /clock advancing, predictions fresh: commands pass
        assert rig.command(0.4, 0.3) == [0.4, 0.3], case
        stalls = reflex.counts["clock_stalls"]
        started = clock.last  # the clock's last advance

        def broken(rate=rate, publish=publish):  # the predictions keep coming; only the clock misbehaves
            if publish:
                clock.advance(rate)
            rig.predict(0.2)

        assert rig.until(lambda: reflex.state.stopped, feed=broken), case
        held_at[case] = time.monotonic() - started
        assert reflex.counts["clock_stalls"] == stalls + 1 and reflex.clock_stalled, case
        if case == "frozen":  # said on /diagnostics
            said = lambda: any("the clock stands still" in d.message for d in rig.diagnostics)  # noqa: E731
            assert rig.until(said, feed=broken), [d.message for d in rig.diagnostics]
        # Stopped, the hold goes out on the steady clock though /clock stands still, and commands are held.
        sent = len(rig.commands)
        assert rig.until(lambda sent=sent: len(rig.commands) >= sent + 2, feed=broken), case
        assert all(list(m.velocity) == [0.0, 0.0] for m in rig.commands[sent:]), case
        assert rig.command(0.4, 0.3) == [0.0, 0.0], case
        clock.last = time.monotonic()  # the simulation resumes from where its clock stood
    assert reflex.counts["errors"] == 0
    # Reported, not asserted (a loaded machine's scheduling is not the node's): stale_after_s plus a tick or two.
    print(f"held {', '.join(f'{k} after {v:.3f} s' for k, v in held_at.items())} (stale_after_s {STALE_AFTER_S})")
