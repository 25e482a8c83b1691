"""A 1 kHz burst into the real bag recorder process: every message in the bag, or counted lost.

The recorder (its own process, as ``ros2 run`` starts it) records a topic that a plain publisher
fills at 1 kHz for ``BURST_S`` seconds, each message numbered. Its status on /diagnostics then
counts them: ``received`` (handed to the node) = ``processed`` (written) + ``skipped``, and
``lost`` (sent, never handed: gaps in the publisher's sequence numbers). After Ctrl-C the bag,
read back with `rosbags`, holds exactly ``processed`` messages of the topic, in order, and the
numbers missing from it are exactly ``lost``; the recorder's last line says the same counts.

A recorder whose writes fail (a file-size limit standing in for a full disk) stops in one error
line per failure, exit code 1, no traceback, and counts what it could not write.

The issue's run is 10 s: ``GAMMA_NET_BURST_S=10 python -m pytest tests/test_recorder_burst.py -s``.
"""

from __future__ import annotations

import os
import re
import shlex
import time

import pytest
from diagnostic_counts import DiagnosticCounts
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from test_bag_recorder import read_bag
from waiting import bound, publish_burst, spin_until

from gamma_net_ros.processes import NodeProcess, node_command

pytestmark = pytest.mark.ros
RATE_HZ, BURST_S = 1000.0, float(os.environ.get("GAMMA_NET_BURST_S", "2"))
TOPIC = "/burst_states"
DEPTH = 10  # the publisher's: a robot's joint_states with the default depth
COUNTS = ("received", "processed", "skipped", "lost", f"received.{TOPIC}", f"recorded.{TOPIC}", f"lost.{TOPIC}")


def _state(n: int) -> JointState:
    return JointState(name=["shoulder", "elbow"], position=[float(n), 0.5], velocity=[0.1, -0.2])


def test_a_1khz_burst_is_in_the_bag_or_counted_lost(tmp_path, executor):
    bag = tmp_path / "bag"
    log = tmp_path / "recorder.log"
    rig = Node("recorder_burst_rig")
    executor.add_node(rig)
    reliable = QoSProfile(depth=DEPTH, reliability=ReliabilityPolicy.RELIABLE)
    states = rig.create_publisher(JointState, TOPIC, reliable)
    watch = DiagnosticCounts(rig, "bag_recorder:", COUNTS, ready_key=f"received.{TOPIC}")
    counts, reports = watch.counts, watch.reports
    command = node_command("gamma_net_ros.bag_recorder", params={"topics": [TOPIC], "output": str(bag)})
    with NodeProcess(command, log_path=log) as recorder:
        ready = lambda: states.get_subscription_count() > 0 and bool(reports)  # noqa: E731
        assert spin_until(executor, ready, 120.0, step=0.1), log.read_text()
        sent = publish_burst(executor, lambda n: states.publish(_state(n)), RATE_HZ, BURST_S)
        ended = time.monotonic()

        def caught_up() -> bool:
            """A report made after the burst ended, the last message received, each received one accounted for."""
            return reports[-1] > ended + 0.5 and counts["received"] == counts["processed"] + counts["skipped"]

        settled = spin_until(executor, caught_up, 60.0)
        assert recorder.stop(timeout=bound(30.0)) == 0, log.read_text()
    out = log.read_text()
    print(f"sent {sent}, diagnostics {counts}")  # shown with -s
    assert settled, (sent, counts)
    assert counts["received"] == counts[f"received.{TOPIC}"] and counts["lost"] == counts[f"lost.{TOPIC}"], counts
    assert counts["processed"] == counts[f"recorded.{TOPIC}"] == counts["received"] and counts["skipped"] == 0, counts
    # Every message sent was received or counted lost; only those before the first taken are not counted
    # (at most the publisher's depth).
    assert sent - DEPTH <= counts["received"] + counts["lost"] <= sent, (sent, counts)

    numbers = [int(m.position[0]) for m in read_bag(bag)[TOPIC]]
    assert len(numbers) == counts["processed"], (len(numbers), counts)
    assert numbers == sorted(set(numbers)) and numbers[-1] == sent - 1, numbers[-5:]
    assert len(set(range(numbers[0], sent)) - set(numbers)) == counts["lost"], counts
    final = re.search(r"wrote \S+: (\d+) messages .*; received (\d+), skipped (\d+), lost on the way (\d+)", out)
    assert final, out
    assert [int(g) for g in final.groups()] == [counts[k] for k in ("processed", "received", "skipped", "lost")]


def test_a_write_that_fails_stops_the_recording_in_one_line(tmp_path, executor):
    bag = tmp_path / "bag"
    log = tmp_path / "recorder.log"
    rig = Node("recorder_full_disk_rig")
    executor.add_node(rig)
    states = rig.create_publisher(JointState, TOPIC, QoSProfile(depth=DEPTH, reliability=ReliabilityPolicy.RELIABLE))
    command = node_command("gamma_net_ros.bag_recorder", params={"topics": [TOPIC], "output": str(bag)})
    # 64 KiB at most per file (Python ignores SIGXFSZ: a write past it fails with EFBIG), while the bag's first
    # chunk (1 MiB) fills within the burst.
    limited = ["bash", "-c", f"ulimit -f 64 && exec {shlex.join(command)}"]
    big = lambda n: JointState(position=[float(n)] * 100)  # noqa: E731
    with NodeProcess(limited, log_path=log) as recorder:
        assert spin_until(executor, lambda: states.get_subscription_count() > 0, 120.0, step=0.1), log.read_text()
        publish_burst(executor, lambda n: states.publish(big(n)), RATE_HZ, max(BURST_S, 2.0))
        code = recorder.wait(timeout=bound(60.0))  # it ends by itself
    out = log.read_text()
    assert code == 1 and "Traceback" not in out, out
    (failed,) = [line for line in out.splitlines() if "cannot write" in line]
    assert f"cannot write {TOPIC} to {bag} ([Errno 27] File too large): recording stopped" in failed, out
    assert f"cannot close {bag} ([Errno 27] File too large): the bag has no index" in out, out
    assert f"{bag} is incomplete: " in out and f"wrote {bag}" not in out, out
    final = re.search(r"received (\d+), skipped (\d+) \(write_failed 1(?:, stopped (\d+))?\)", out)
    assert final, out
    received, skipped, stopped = (int(g or 0) for g in final.groups())
    assert skipped == 1 + stopped and received > skipped, out


def test_a_bag_that_cannot_be_closed_at_ctrl_c_exits_non_zero(tmp_path, executor):
    """Every write fits until Ctrl-C: the messages sit in the bag's first chunk (1 MiB, in memory), and the
    close that writes them and the index meets the 64 KiB limit. What was recorded is lost: one error line,
    exit code 3 (the code of a failed final save), no traceback."""
    bag = tmp_path / "bag"
    log = tmp_path / "recorder.log"
    rig = Node("recorder_close_rig")
    executor.add_node(rig)
    states = rig.create_publisher(JointState, TOPIC, QoSProfile(depth=DEPTH, reliability=ReliabilityPolicy.RELIABLE))
    watch = DiagnosticCounts(rig, "bag_recorder:", [f"received.{TOPIC}"], ready_key=f"received.{TOPIC}")
    command = node_command("gamma_net_ros.bag_recorder", params={"topics": [TOPIC], "output": str(bag)})
    limited = ["bash", "-c", f"ulimit -f 64 && exec {shlex.join(command)}"]
    n = 150  # about 900 bytes each: 135 kB, past the limit, within the chunk
    with NodeProcess(limited, log_path=log) as recorder:
        assert spin_until(executor, lambda: states.get_subscription_count() > 0, 120.0, step=0.1), log.read_text()
        for k in range(n):
            states.publish(JointState(position=[float(k)] * 100))
            executor.spin_once(timeout_sec=0.0)
        taken = lambda: watch.counts.get(f"received.{TOPIC}")  # noqa: E731
        assert spin_until(executor, lambda: taken() == n, 60.0), (taken(), log.read_text())
        code = recorder.stop(timeout=bound(30.0))
    out = log.read_text()
    assert code == 3 and "Traceback" not in out, out
    assert f"cannot close {bag} ([Errno 27] File too large): the bag has no index" in out, out
    assert "cannot write" not in out, out
