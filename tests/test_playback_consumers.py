"""bag_player and a consumer that falls silent for a while (a long compile, a stalled machine).

The real bag_player process plays to a consumer node in this process, which reports what it
takes on ``joint_states/taken`` and then stops spinning for longer than the player's
``consumer_timeout``. The player plays on meanwhile; when the consumer reports again it is
waited for again, and the player's last line counts exactly what the consumer took: all of it
when its queue held the rest, fewer when its queue overflowed (it said "acknowledged 0" after
a predictor took 3,008 of 5,400 messages).
"""

from __future__ import annotations

import re
import time

import pytest
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from waiting import spin_for, wait_until

from gamma_net_core.data.bags import JointStateBagWriter
from gamma_net_core.data.joints import NANOSECONDS
from gamma_net_core.signals.arm_recording import RECORDING_EPOCH_NS
from gamma_net_ros.flow_control import TakenReporter
from gamma_net_ros.processes import NodeProcess, node_command

pytestmark = pytest.mark.ros
N = 300
START_S = 300.0


class Consumer(Node):
    def __init__(self, depth: int) -> None:
        super().__init__("stalling_consumer")
        self.taken = 0
        qos = QoSProfile(depth=depth, reliability=ReliabilityPolicy.RELIABLE)
        self.create_subscription(JointState, "joint_states", self._take, qos)
        self.reporter = TakenReporter(self, "joint_states", taken=lambda: self.taken)

    def _take(self, _msg) -> None:
        self.taken += 1


def _bag(path) -> None:
    with JointStateBagWriter(path) as writer:
        for i in range(N):
            writer.write(
                stamp_ns=RECORDING_EPOCH_NS + i * NANOSECONDS // 30, names=["shoulder"], position=[0.0], velocity=[0.0]
            )


@pytest.mark.parametrize("depth", [N, 10], ids=["queue-holds-the-rest", "queue-overflows"])
def test_the_last_line_counts_what_a_consumer_that_fell_silent_took(tmp_path, executor, spin, depth):
    _bag(tmp_path / "bag")
    consumer = Consumer(depth)
    executor.add_node(consumer)
    params = {"bag": str(tmp_path / "bag"), "reliable": True, "consumers": 1, "rate": 60.0, "window": 10}
    player = NodeProcess(
        node_command("gamma_net_ros.bag_player", params={**params, "consumer_timeout": 1.0, "drain_timeout": 5.0}),
        log_path=tmp_path / "player.log",
    ).start()
    try:
        assert spin(executor, lambda: consumer.taken >= 20, timeout=START_S), (tmp_path / "player.log").read_text()
        # Silent (not spinning) until the player has given up on it (after its 1 s consumer_timeout),
        # then 2 s more while it plays on unheard: at 60 Hz more than a queue of 10 holds.
        player_log = tmp_path / "player.log"
        assert wait_until(lambda: "no longer waited for" in player_log.read_text(), timeout=60), player_log.read_text()
        time.sleep(2.0)
        assert spin(executor, lambda: not player.running, timeout=START_S)
        spin_for(executor, 2.0)  # anything still on its way would be taken unreported: none may be
    finally:
        code = player.stop()
    log = (tmp_path / "player.log").read_text()
    last = log.strip().splitlines()[-1]
    assert "Traceback" not in log
    assert "no longer waited for" in log and "reports again" in log, log
    acknowledged = int(re.search(r"published 300, acknowledged (\d+)", last).group(1))
    assert acknowledged == consumer.taken, (consumer.taken, last)
    if depth == N:
        assert acknowledged == N and code == 0, log
    else:
        assert 20 <= acknowledged < N and code == 1 and "a consumer stopped reporting" in last, log
