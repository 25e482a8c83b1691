"""A 1 kHz burst of transitions into the real neural predictor process: nothing lost silently.

The neural predictor (its own process, as ``ros2 run`` starts it) gets ``Transition`` messages
at 1 kHz for ``BURST_S`` seconds from a plain publisher (no flow control, unlike the bridge);
one in :data:`BAD_EVERY` carries a NaN feature, and the node's queue holds one message, so that
some are dropped on the way. Its status on /diagnostics then counts them:
``received`` (handed to the node) = ``processed`` (moved into the replay) + ``skipped`` (refused
as invalid) once nothing is ``queued``, and ``lost`` (sent, never handed: gaps in the
publisher's sequence numbers), so that received + lost is every message sent.

The issue's run is 10 s: ``GAMMA_NET_BURST_S=10 python -m pytest tests/test_neural_predictor_burst.py -s``.
"""

from __future__ import annotations

import math
import os
import time

import numpy as np
import pytest
from diagnostic_counts import DiagnosticCounts
from gamma_net_msgs.msg import Transition
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from waiting import bound, publish_burst, spin_until

from gamma_net_ros.conversions import seconds_to_stamp
from gamma_net_ros.paths import config_file
from gamma_net_ros.processes import NodeProcess, node_command

pytestmark = pytest.mark.ros
RATE_HZ, BURST_S = 1000.0, float(os.environ.get("GAMMA_NET_BURST_S", "2"))
#: Every BAD_EVERY-th message has a NaN feature: the node must refuse it and count it.
BAD_EVERY = 50
EPISODE = 100
DEPTH = 10  # the publisher's: a user's node with the default depth, not the bridge's window
#: Real code paths at toy sizes (the paper's network trains far slower than 1 kHz; receiving must not care).
TINY = {
    "learner.hidden_sizes": [16, 8],
    "learner.batch_size": 8,
    "learner.replay_capacity": 20000,
    "learner.min_replay_history": 100,
    "learner.update_period": 8,
    "learner.target_sync_period": 100,
    "queue_depth": 1,  # the node's queue overflows now and then: what it drops must show as lost
}
COUNTS = ("received", "processed", "skipped", "skipped.non_finite", "queued", "lost")


def _transition(n: int) -> Transition:
    msg = Transition()
    msg.header.stamp = seconds_to_stamp(n / RATE_HZ)
    features = np.full(512, 0.1 * math.sin(n / 9), np.float32)
    if n % BAD_EVERY == BAD_EVERY - 1:
        features[3] = math.nan
    msg.features = features
    msg.cumulant = float(n % 7 == 0)
    msg.episode, msg.step = divmod(n, EPISODE)
    msg.terminal = msg.step == EPISODE - 1
    return msg


def test_a_1khz_burst_is_counted_received_processed_skipped_and_lost(tmp_path, executor):
    log = tmp_path / "neural_predictor.log"
    rig = Node("neural_burst_rig")
    executor.add_node(rig)
    reliable = QoSProfile(depth=DEPTH, reliability=ReliabilityPolicy.RELIABLE)
    transitions = rig.create_publisher(Transition, "burst_transitions", reliable)
    watch = DiagnosticCounts(rig, "neural_predictor:", COUNTS)
    counts, reports = watch.counts, watch.reports
    command = node_command("gamma_net_ros.neural_predictor.node", params_file=config_file("atari"), params=TINY,
                           remaps={"transitions": "burst_transitions"}, node="neural_predictor")  # fmt: skip
    with NodeProcess(command, log_path=log) as node:
        ready = lambda: transitions.get_subscription_count() > 0 and bool(reports)  # noqa: E731
        assert spin_until(executor, ready, 120.0, step=0.1), log.read_text()
        sent = publish_burst(executor, lambda n: transitions.publish(_transition(n)), RATE_HZ, BURST_S)
        ended = time.monotonic()

        def caught_up() -> bool:
            """A report made after the burst ended, with every message received moved on or skipped."""
            done = counts["processed"] + counts["skipped"]
            return reports[-1] > ended + 0.5 and counts["queued"] == 0 and counts["received"] == done

        settled = spin_until(executor, caught_up, 60.0)
        assert node.stop(timeout=bound(30.0)) == 0, log.read_text()
    print(f"sent {sent}, diagnostics {counts}")  # shown with -s
    assert settled, (sent, counts)
    assert counts["received"] == counts["processed"] + counts["skipped"], counts
    # Every message sent was received or counted lost; only those before the first taken are not counted
    # (at most the publisher's depth).
    assert sent - DEPTH <= counts["received"] + counts["lost"] <= sent, (sent, counts)
    bad = sent // BAD_EVERY
    assert 0 < counts["skipped"] == counts["skipped.non_finite"] <= bad, (bad, counts)
    if counts["lost"] == 0 and counts["received"] == sent:
        assert counts["skipped"] == bad, (bad, counts)
