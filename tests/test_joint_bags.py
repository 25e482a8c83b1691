"""Joint selection and validation, and JointState bags (mcap, sqlite3, rosbag1) written and read with rosbags."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import yaml

from gamma_net_core.cli import main
from gamma_net_core.data.bags import (
    BagError,
    JointStateBagWriter,
    iter_joint_states,
    read_joint_states,
    write_recording,
)
from gamma_net_core.data.joints import (
    NANOSECONDS,
    JointSample,
    JointsConfig,
    JointSelector,
    Skip,
    SkipReason,
    stamp_seconds,
    values_by_name,
)
from gamma_net_core.signals.arm_recording import RECORDING_EPOCH_NS, simulate_arm

JOINTS = JointsConfig(input_low=(-1.0, 0.0), input_high=(1.0, 2.0))


@pytest.fixture(scope="module")
def recording():
    return simulate_arm(circuits=1, rng=np.random.default_rng(11))


# --- selector -----------------------------------------------------------------------------------


def test_selector_finds_joints_by_name_among_others_in_any_order():
    selector = JointSelector(JOINTS)
    sample = selector.select(
        stamp=2.5,
        names=["gripper", "elbow", "wrist", "shoulder"],
        position=[9.0, 1.5, math.nan, -0.5],  # NaN in a joint nobody selected does not matter
        velocity=[0.0, 0.2, 0.0, -0.3],
        effort=[],
    )
    assert isinstance(sample, JointSample)
    assert sample.stamp == 2.5
    np.testing.assert_allclose(sample.inputs, [0.25, 0.75])  # (-0.5 - -1) / 2, (1.5 - 0) / 2
    assert sample.cumulant == pytest.approx(0.3)  # the shoulder's speed: |velocity|
    assert selector.accepted == 1 and selector.skips.total == 0


def test_selector_clips_inputs_and_can_keep_the_sign():
    selector = JointSelector(
        JointsConfig(
            input_joints=("elbow",),
            input_fields=("velocity",),
            input_low=(0.0,),
            input_high=(1.0,),
            cumulant_joint="elbow",
            cumulant_field="effort",
            cumulant_absolute=False,
        )
    )
    sample = selector.select(stamp=0.0, names=["elbow"], position=[], velocity=[3.0], effort=[-0.7])
    np.testing.assert_allclose(sample.inputs, [1.0])
    assert sample.cumulant == -0.7


CASES = [
    (SkipReason.NON_FINITE, {"position": [math.nan, 1.0]}, "shoulder.position is nan"),
    (SkipReason.NON_FINITE, {"velocity": [math.inf, 0.0]}, "shoulder.velocity is inf"),
    (SkipReason.NON_FINITE, {"stamp": math.nan}, "stamp is nan"),
    (SkipReason.LENGTH_MISMATCH, {"position": [0.1]}, "position has 1 values for 2 names"),
    (SkipReason.LENGTH_MISMATCH, {"effort": [0.1, 0.2, 0.3]}, "effort has 3 values for 2 names"),
    (SkipReason.MISSING_JOINT, {"names": ["shoulder", "wrist"]}, "joint 'elbow' is not among"),
    (
        SkipReason.DUPLICATE_JOINT,
        {"names": ["elbow", "elbow", "shoulder"], "position": [1, 1, 0], "velocity": []},
        "named more than once",
    ),
    (SkipReason.EMPTY_FIELD, {"velocity": []}, "velocity is empty"),
    (SkipReason.STAMP_BACKWARDS, {"stamp": 0.5}, "earlier than the last"),
]


@pytest.mark.parametrize("reason, change, detail", CASES)
def test_each_kind_of_unusable_message_is_skipped_and_counted(reason, change, detail):
    selector = JointSelector(JOINTS)
    good = {"stamp": 1.0, "names": ["shoulder", "elbow"], "position": [0.0, 1.0], "velocity": [0.1, 0.2]}
    assert isinstance(selector.select(**good), JointSample)
    result = selector.select(**{**good, **change})
    assert isinstance(result, Skip) and result.reason == reason
    assert detail in result.detail
    assert selector.skips[reason] == 1 and selector.skips.total == 1 and selector.accepted == 1
    assert selector.last_stamp == 1.0  # a skipped message changes nothing


def test_values_by_name_picks_raw_values_in_the_order_asked():
    names = ["wrist", "elbow", "shoulder"]
    np.testing.assert_array_equal(values_by_name(names, [0.3, 1.2, -0.4], ["shoulder", "elbow"]), [-0.4, 1.2])
    assert values_by_name(names, [0.3, 1.2], ["shoulder"]) is None
    assert values_by_name(names, [0.3, 1.2, -0.4], ["shoulder", "hand"]) is None


def test_reset_starts_a_new_episode():
    selector = JointSelector(JOINTS)
    fields = {"names": ["shoulder", "elbow"], "position": [0.0, 1.0], "velocity": [0.1, 0.2]}
    selector.select(stamp=10.0, **fields)
    assert isinstance(selector.select(stamp=9.5, **fields), Skip)
    selector.reset()
    assert selector.select(stamp=9.5, **fields).episode_start


def test_small_steps_back_are_skipped_and_jumps_back_or_pauses_start_episodes():
    """One rule for the reader and the node: back by <= max_gap is a bad message, further is a restart."""
    selector = JointSelector(JOINTS, max_gap=0.5)
    fields = {"names": ["shoulder", "elbow"], "position": [0.0, 1.0], "velocity": [0.1, 0.2]}
    seen = []
    for stamp in (10.0, 10.1, 9.8, 9.5, 9.6, 3.0, 3.1, 3.1, 2.9, 4.0, 4.5):
        result = selector.select(stamp=stamp, **fields)
        seen.append("skip" if isinstance(result, Skip) else ("start" if result.episode_start else "next"))
    assert seen == ["start", "next", "skip", "start", "next", "start", "next", "next", "skip", "start", "next"]
    assert selector.skips["stamp_backwards"] == 2 and selector.episodes == 4 and selector.accepted == 9


@pytest.mark.parametrize("max_gap", [0.0, -1.0, math.nan, math.inf, "1"])
def test_bad_max_gap_is_refused(max_gap):
    with pytest.raises(ValueError, match="max_gap must be a positive number"):
        JointSelector(JOINTS, max_gap=max_gap)


@pytest.mark.parametrize(
    "changes, needle",
    [
        ({"input_low": (0.0,)}, "input_low has 1 values for 2 input_joints"),
        ({"input_high": (-1.0, 2.0)}, "input 'shoulder' has input_low -1.0 not below input_high -1.0"),
        ({"input_fields": ("position", "torque")}, "must be one of"),
        ({"cumulant_joint": ""}, "non-empty"),
        ({"input_joints": ("elbow", "elbow")}, "listed twice"),
    ],
)
def test_bad_joint_configs_are_refused(changes, needle):
    with pytest.raises(ValueError, match=needle):
        JointsConfig(**{**JOINTS.__dict__, **changes})


# --- bags ---------------------------------------------------------------------------------------


def _bag_path(tmp_path, storage):
    return tmp_path / ("recording.bag" if storage == "rosbag1" else f"recording_{storage}")


def test_simulated_bag_reads_back_identically_from_every_storage(tmp_path, recording):
    config = JointsConfig()
    read = {}
    for storage in ("mcap", "sqlite3", "rosbag1"):
        path = write_recording(_bag_path(tmp_path, storage), recording, storage=storage)
        messages = list(iter_joint_states(path))
        assert len(messages) == recording.steps
        assert [m.names for m in messages[:1]] == [list(recording.joint_names)]
        np.testing.assert_array_equal([m.stamp for m in messages], recording.stamps)
        for field in ("position", "velocity", "effort"):
            np.testing.assert_array_equal(np.array([getattr(m, field) for m in messages]), getattr(recording, field))
        read[storage] = read_joint_states(path, joints=config)
    expected_inputs = np.clip(
        (recording.position - np.array(config.input_low)) / (np.array(config.input_high) - np.array(config.input_low)),
        0,
        1,
    )
    for storage, data in read.items():
        assert data.messages == recording.steps and data.skipped == 0, storage
        np.testing.assert_array_equal(data.stamps, recording.stamps)
        np.testing.assert_allclose(data.inputs, expected_inputs, rtol=0, atol=1e-15)
        np.testing.assert_array_equal(data.cumulants, np.abs(recording.velocity[:, 0]))
    # A bare storage file (copied off a robot without its metadata.yaml) reads the same.
    for bare in ("recording_mcap/recording_mcap.mcap", "recording_sqlite3/recording_sqlite3.db3"):
        data = read_joint_states(tmp_path / bare, joints=config)
        np.testing.assert_array_equal(data.cumulants, read["mcap"].cumulants)
        np.testing.assert_array_equal(data.inputs, read["mcap"].inputs)


def _write_faults(path, storage):
    """Good messages with extra joints in shuffled order, and one message of each fault."""
    good = []
    with JointStateBagWriter(path, storage=storage) as bag:

        def ok(t, shoulder, elbow, speed):
            bag.write(
                stamp_ns=t,
                names=["wrist", "elbow", "shoulder"],
                position=[0.3, elbow, shoulder],
                velocity=[0.0, 0.1, speed],
                effort=[0.0, 0.0, 0.0],
                receive_ns=t + 5_000_000,
            )
            good.append((stamp_seconds(*divmod(t, NANOSECONDS)), shoulder, elbow, abs(speed)))

        names = ["shoulder", "elbow"]
        ok(1_000_000_000, 0.0, 1.0, -0.2)
        bag.write(stamp_ns=1_100_000_000, names=names, position=[math.nan, 1.0], velocity=[0.1, 0.1])
        bag.write(stamp_ns=1_200_000_000, names=names, position=[0.1, 1.0, 2.0], velocity=[0.1, 0.1])
        bag.write(stamp_ns=1_300_000_000, names=["elbow", "wrist"], position=[1.0, 0.0], velocity=[0.1, 0.1])
        bag.write(stamp_ns=1_400_000_000, names=names, position=[0.1, 1.0], velocity=[])
        ok(1_500_000_000, 0.5, 1.5, 0.3)
        # Stamped back in time, recorded in order (a bag is ordered by when it recorded a message).
        bag.write(
            stamp_ns=1_450_000_000, names=names, position=[0.1, 1.0], velocity=[0.1, 0.1], receive_ns=1_550_000_000
        )
        bag.write(stamp_ns=1_600_000_000, names=names, position=[0.1, 1.0], velocity=[math.inf, 0.1])
        ok(1_700_000_000, -0.5, 0.5, 0.1)
    return good


@pytest.mark.parametrize("storage", ["mcap", "sqlite3", "rosbag1"])
def test_faulty_messages_in_a_bag_are_skipped_and_counted_by_kind(tmp_path, storage):
    path = _bag_path(tmp_path, storage)
    good = _write_faults(path, storage)
    data = read_joint_states(path, joints=JOINTS)
    assert data.messages == 9
    assert data.skips == {
        "non_finite": 2,
        "length_mismatch": 1,
        "missing_joint": 1,
        "duplicate_joint": 0,
        "empty_field": 1,
        "stamp_backwards": 1,
    }
    expected = np.array(good)
    np.testing.assert_array_equal(data.stamps, expected[:, 0])
    np.testing.assert_allclose(data.inputs, np.column_stack([(expected[:, 1] + 1) / 2, expected[:, 2] / 2]))
    np.testing.assert_array_equal(data.cumulants, expected[:, 3])
    # By arrival time, the message stamped back in time is in order and usable.
    by_arrival = read_joint_states(path, joints=JOINTS, clock="receive")
    assert by_arrival.skips["stamp_backwards"] == 0 and by_arrival.skipped == 5
    np.testing.assert_allclose(by_arrival.stamps, [1.005, 1.505, 1.55, 1.705])


def test_a_path_that_is_not_a_bag_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no bag at .*missing"):
        read_joint_states(tmp_path / "missing", joints=JOINTS)
    text = tmp_path / "notes.txt"
    text.write_text("not a bag")
    with pytest.raises(BagError, match=r"notes\.txt is not a readable bag"):
        read_joint_states(text, joints=JOINTS)
    empty = tmp_path / "empty_dir"
    empty.mkdir()
    with pytest.raises(BagError, match="empty_dir is not a readable bag"):
        read_joint_states(empty, joints=JOINTS)
    fake = tmp_path / "fake.bag"
    fake.write_bytes(b"#ROSBAG V2.0\n" + bytes(100))
    with pytest.raises(BagError, match=r"fake\.bag is not a readable bag"):
        read_joint_states(fake, joints=JOINTS)


def test_a_missing_topic_and_a_topic_of_another_type_are_clear_errors(tmp_path):
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    typestore = get_typestore(Stores.ROS2_KILTED)
    String = typestore.types["std_msgs/msg/String"]
    path = tmp_path / "strings"
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        connection = writer.add_connection("/joint_states", "std_msgs/msg/String", typestore=typestore)
        writer.write(connection, 1, typestore.serialize_cdr(String(data="hello"), "std_msgs/msg/String"))
    with pytest.raises(BagError, match=r"'/joint_states' in .*strings carries std_msgs/msg/String, not sensor_msgs"):
        read_joint_states(path, joints=JOINTS)
    with pytest.raises(BagError, match=r"has no topic '/arm/joint_states'; its topics: \{'/joint_states': 'std_msgs"):
        read_joint_states(path, joints=JOINTS, topic="/arm/joint_states")


def test_writer_refuses_an_existing_path_and_an_unknown_storage(tmp_path):
    with pytest.raises(ValueError, match="exists already"):
        JointStateBagWriter(tmp_path)
    with pytest.raises(ValueError, match="storage must be one of"):
        JointStateBagWriter(tmp_path / "x", storage="zip")


# --- the command --------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("storage, suffix", [("mcap", ".mcap"), ("sqlite3", ".db3")])
def test_arm_simulate_writes_a_bag_a_figure_and_the_table(tmp_path, capsys, storage, suffix):
    out = tmp_path / "run"
    report = tmp_path / "report.json"
    argv = ["arm", "simulate", "--circuits", "2", "--out", str(out), "--seed", "5", "--storage", storage]
    assert main([*argv, "--no-progress", "--json", str(report)]) == 0
    printed = capsys.readouterr().out
    data = json.loads(report.read_text())
    rows = dict((r[0], r[1]) for r in data["tables"][0]["rows"])
    assert rows["circuits"] == 2 and len(data["data"]["circuit_times_s"]) == 2
    assert f"{rows['steps']}" in printed and "shoulder" in printed
    assert list((out / "joint_states").glob(f"*{suffix}"))
    assert (out / "arm_recording.png").stat().st_size > 10_000
    read = read_joint_states(out / "joint_states", joints=JointsConfig())
    assert read.messages == rows["steps"] and read.skipped == 0
    assert read.stamps[-1] - read.stamps[0] == pytest.approx(rows["duration (s)"])
    assert read.stamps[0] == RECORDING_EPOCH_NS / 1e9
    # `ros2 bag info` shows the bag's starting time from its metadata: 2020-01-01, not 1970.
    metadata = yaml.safe_load((out / "joint_states" / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert metadata["starting_time"]["nanoseconds_since_epoch"] == RECORDING_EPOCH_NS
    # Same seed, same recording.
    again = simulate_arm(circuits=2, rng=np.random.default_rng(5))
    np.testing.assert_array_equal(read.cumulants, np.abs(again.velocity[:, 0]))
    assert main([*argv, "--no-progress"]) == 2
    assert "exists already" in capsys.readouterr().err


@pytest.mark.parametrize(
    "at, says",
    [
        (0.2, r"reading stopped after 0 of its 3000 messages \(OverflowError: "),  # rosbags' mcap reader raised
        (0.5, r"only 1683 of its 3000 messages could be read"),  # it ended early without a word
    ],
    ids=["overflow", "cut-short"],
)
def test_a_bag_damaged_part_way_is_a_bag_error_naming_how_far_it_read(tmp_path, at, says):
    path = tmp_path / "damaged"
    with JointStateBagWriter(path) as bag:  # mcap, written by rosbags
        for i in range(3000):
            bag.write(stamp_ns=RECORDING_EPOCH_NS + i * 33_333_333, names=["shoulder", "elbow"],
                      position=[-0.75, 1.7], velocity=[0.1 * math.sin(i / 10), 0.0])  # fmt: skip
    (mcap,) = path.glob("*.mcap")
    blob = bytearray(mcap.read_bytes())
    start = int(len(blob) * at)
    blob[start : start + 4096] = bytes(4096)  # 4 KiB zeroed inside its chunk
    mcap.write_bytes(bytes(blob))
    with pytest.raises(BagError, match=rf"damaged is damaged: {says}"):
        read_joint_states(path, joints=JOINTS)
