"""The ALE bridge as a real node: a recording (or live ALE) in, Transition messages out, no loss."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from gamma_net_msgs.msg import Transition
from rclpy.parameter import Parameter
from waiting import bound

from gamma_net_core.atari.env import AtariConfig
from gamma_net_core.atari.record import record
from gamma_net_core.data.shards import ShardError, ShardReader
from gamma_net_ros.ale_bridge import AleBridge
from gamma_net_ros.paths import config_file
from gamma_net_ros.processes import NodeProcess, node_command
from gamma_net_ros.transition_counter import TransitionCounter

pytestmark = pytest.mark.ros
ATARI = config_file("atari")
STEPS = 200


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """A real recording: Centipede, random policy, episodes cut at 70 steps, shards of 64 rows."""
    out = tmp_path_factory.mktemp("bridge") / "centipede"
    record(out, steps=STEPS, config=AtariConfig(max_episode_steps=70), shard_size=64, progress=False)
    return out


class Collector(TransitionCounter):
    """A consumer that keeps every message (and can be slow: ``delay`` s each)."""

    def __init__(self, **params) -> None:
        super().__init__(parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
        self.messages: list[Transition] = []

    def on_transition(self, msg: Transition) -> None:
        self.messages.append(msg)
        super().on_transition(msg)


def bridge(**params) -> AleBridge:
    return AleBridge(
        cli_args=["--ros-args", "--params-file", str(ATARI)],
        parameter_overrides=[Parameter(k, value=v) for k, v in params.items()],
    )


def assert_same_as_recording(messages, directory) -> None:
    rows = list(ShardReader(directory))
    assert len(messages) == len(rows)
    for msg, row in zip(messages, rows, strict=True):
        assert (msg.episode, msg.step, msg.terminal, msg.truncated) == (
            row.episode,
            row.step,
            row.terminal,
            row.truncated,
        )
        assert msg.cumulant == pytest.approx(row.cumulant)
        np.testing.assert_array_equal(np.frombuffer(msg.features, np.float32), row.features)


def test_every_transition_reaches_a_slow_subscriber_in_order_and_the_bridge_exits(executor, spin, recording, tmp_path):
    # The subscriber's queue holds only the bridge's window: without flow control most would be lost.
    slow = Collector(delay=0.003, queue_depth=16, report_every=4)
    executor.add_node(slow)
    params = {"shard_dir": str(recording), "exit_at_end": True, "window": 16, "progress_period": 0.2}
    command = node_command("gamma_net_ros.ale_bridge", params_file=ATARI, params=params, node="ale_bridge")
    process = NodeProcess(command, log_path=tmp_path / "bridge.log").start()
    try:
        assert spin(executor, lambda: not process.running, timeout=45), "the bridge did not stop at the end"
    finally:
        code = process.stop(timeout=bound(10.0))
    log = (tmp_path / "bridge.log").read_text()
    assert code == 0, log
    assert f"done: {STEPS} transitions" in log and "published" in log  # progress lines, then the summary
    assert slow.out_of_order == 0
    assert_same_as_recording(slow.messages, recording)
    assert {m.episode for m in slow.messages} == {0, 1, 2}  # two 70-step cuts, then a partial episode
    assert [m.step for m in slow.messages if m.truncated] == [69, 69]


def test_a_set_rate_paces_the_messages(executor, spin, recording):
    counter = Collector()
    node = bridge(shard_dir=str(recording), consumers=0, rate=400.0)
    executor.add_node(counter)
    executor.add_node(node)
    assert spin(executor, lambda: node.finished.done(), timeout=20)
    assert node.finished.result() == 0 and node.state == "done"
    # Without flow control "done" means acknowledged by DDS (in the reader's queue), not yet taken.
    assert spin(executor, lambda: len(counter.messages) == STEPS, timeout=5)
    assert counter.out_of_order == 0
    # Stamped as published: 200 messages at 400/s span about 199/400 s (a slow machine only adds; the
    # margin is the first message's delay after the schedule starts). Unpaced, they take ~0.02 s.
    stamps = [m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in counter.messages]
    assert stamps[-1] - stamps[0] >= (STEPS - 1) / 400.0 - 0.05


def test_live_ale_publishes_each_step_as_it_happens(executor, spin):
    consumer = Collector(report_every=2)
    node = bridge(source="live", steps=25, **{"env.max_episode_steps": 10, "seed": 3})
    executor.add_node(consumer)
    executor.add_node(node)
    assert spin(executor, lambda: node.finished.done(), timeout=30)
    got = [(m.episode, m.step, m.truncated) for m in consumer.messages]
    assert got == [(e, s, s == 9 and e < 2) for e in range(3) for s in range(10)][:25]
    phi = np.stack([np.frombuffer(m.features, np.float32) for m in consumer.messages])
    assert phi.shape == (25, 512) and np.isfinite(phi).all() and phi.std() > 0


def _corrupt(path) -> None:
    blob = bytearray(path.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    path.write_bytes(bytes(blob))


@pytest.fixture
def copy_of(recording, tmp_path):
    import shutil

    target = tmp_path / "copy"
    shutil.copytree(recording, target)
    return target


def test_bad_recordings_are_refused_at_start(rclpy_session, tmp_path, copy_of):
    with pytest.raises(FileNotFoundError, match=f"no transition recording at {tmp_path / 'nowhere'}"):
        bridge(shard_dir=str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match="shard_dir is empty"):
        bridge()
    with pytest.raises(ShardError, match="the recording's features have size 512, the network expects 256"):
        bridge(shard_dir=str(copy_of), feature_size=256)
    with pytest.raises(ValueError, match="window 3000 must not exceed queue_depth 2000"):
        bridge(shard_dir=str(copy_of), window=3000)
    with pytest.raises(ValueError, match="unknown Atari game 'centipeed'; close matches: centipede"):
        bridge(source="live", **{"env.game": "centipeed"})
    _corrupt(copy_of / "shard-000002-n000064.npz")
    with pytest.raises(ShardError, match=r"shard-000002-n000064\.npz is corrupt: its SHA-256 does not match"):
        bridge(shard_dir=str(copy_of))
    (copy_of / "shard-000001-n000064.npz").unlink()
    with pytest.raises(FileNotFoundError, match=r"shard-000001-n000064\.npz .* is missing"):
        bridge(shard_dir=str(copy_of))


def test_the_command_says_why_it_refuses_to_start(copy_of):
    _corrupt(copy_of / "index.json")
    command = node_command("gamma_net_ros.ale_bridge", params_file=ATARI, params={"shard_dir": str(copy_of)})
    result = subprocess.run(command, capture_output=True, text=True, timeout=bound(60))
    assert result.returncode == 1
    assert f"refusing to start: {copy_of / 'index.json'} is not a readable index" in result.stdout + result.stderr


def test_a_shard_that_goes_bad_during_replay_stops_the_bridge(executor, spin, copy_of):
    counter = Collector()
    node = bridge(shard_dir=str(copy_of), verify=False)  # checked only as each shard is reached
    _corrupt(copy_of / "shard-000001-n000064.npz")
    executor.add_node(counter)
    executor.add_node(node)
    assert spin(executor, lambda: node.finished.done(), timeout=20)
    assert node.finished.result() == 1 and node.state == "failed"
    assert "shard-000001-n000064.npz is corrupt" in node.error
    # The first shard whole, all taken before the node said it failed; nothing of the bad shard.
    assert len(counter.messages) == node.published == 64
