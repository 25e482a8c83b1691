"""`gamma-net horde train` on a real rosbag2 of two topics of different types, as a user runs it."""

from __future__ import annotations

import json
import pathlib
import subprocess

import numpy as np
import pytest
import yaml
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore
from waiting import bound

from gamma_net_core.horde.learner import HordeLearner
from gamma_net_core.horde.questions import load_questions
from gamma_net_core.horde.sampling import read_signals

RATE = 20.0
JS = {"topic": "/joint_states", "type": "sensor_msgs/msg/JointState"}
BATTERY = {"topic": "/battery", "type": "sensor_msgs/msg/BatteryState"}


def write_bag(path: pathlib.Path, *, seconds: float = 60.0, gap=(30.0, 31.0)) -> pathlib.Path:
    """JointState at 50 Hz (a swinging elbow), BatteryState at 5 Hz with a one-second silence (``gap``)."""
    store = get_typestore(Stores.ROS2_HUMBLE)
    T = store.types
    writer = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
    writer.open()
    js = writer.add_connection("/joint_states", "sensor_msgs/msg/JointState", typestore=store)
    bat = writer.add_connection("/battery", "sensor_msgs/msg/BatteryState", typestore=store)
    start = 1_000_000_000
    for n in range(int(seconds * 50)):
        t = n / 50
        ns = start + round(t * 1e9)
        header = T["std_msgs/msg/Header"](
            stamp=T["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9), frame_id=""
        )
        angle = 1.5 + np.sin(2 * np.pi * t / 4.0)
        msg = T["sensor_msgs/msg/JointState"](
            header=header,
            name=["shoulder", "elbow"],
            position=np.array([0.5 * np.cos(2 * np.pi * t / 4.0), angle]),
            velocity=np.array([0.1, np.cos(2 * np.pi * t / 4.0)]),
            effort=np.zeros(2),
        )
        writer.write(js, ns, store.serialize_cdr(msg, "sensor_msgs/msg/JointState"))
        if n % 10 == 0 and not gap[0] <= t < gap[1]:
            battery = T["sensor_msgs/msg/BatteryState"](
                header=header,
                voltage=12.0 - t / 60,
                temperature=np.nan,
                current=np.nan,
                charge=np.nan,
                capacity=np.nan,
                design_capacity=np.nan,
                percentage=np.nan,
                power_supply_status=0,
                power_supply_health=0,
                power_supply_technology=0,
                present=True,
                cell_voltage=np.zeros(0),
                cell_temperature=np.zeros(0),
                location="",
                serial_number="",
            )
            writer.write(bat, ns, store.serialize_cdr(battery, "sensor_msgs/msg/BatteryState"))
    writer.close()
    return path


def questions(tmp_path, **change) -> pathlib.Path:
    doc = {
        "rate_hz": RATE,
        "stale_after_s": 0.5,
        "publish_taus": [1, 5, 20],
        "state": [
            {**JS, "field": "position[elbow]", "low": 0.0, "high": 3.0},
            {**JS, "field": "position[shoulder]", "low": -1.0, "high": 1.0},
        ],
        "learner": {"tilings": [16], "memory_size": 1024, "step_size": 0.1},
        "timescales": {"n_gamma": 1, "n_tau": 3, "tau_max": 20},
        "readouts": [{"name": "next_half_s", "kind": "window", "seconds": 0.5}],
        "questions": [
            {"name": "elbow_speed", "cumulant": {**JS, "field": "velocity[elbow]", "transform": "abs"}},
            {"name": "voltage", "cumulant": {**BATTERY, "field": "voltage"}},
            {
                "name": "until_elbow_high",
                "cumulant": {**JS, "field": "velocity[shoulder]"},
                "termination": {**JS, "field": "position[elbow]", "threshold": 2.3},
            },
        ],
    }
    doc.update(change)
    path = tmp_path / "questions.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture(scope="module")
def bag(tmp_path_factory):
    return write_bag(tmp_path_factory.mktemp("bag") / "two_topics")


def test_signals_are_sampled_on_the_clock_with_stale_ticks_skipped(bag, tmp_path):
    spec = load_questions(questions(tmp_path))
    signals = read_signals(bag, spec)
    assert signals.messages == {"/joint_states": 3000, "/battery": 295}
    t = signals.times - signals.times[0]  # both topics start at the bag's first message
    assert np.allclose(np.diff(t), 1 / RATE)
    # the battery's last message before its silence is at 29.8 s: stale from 30.3 s until it speaks at 31 s
    stale = (t > 30.3 + 1e-6) & (t < 31.0 - 1e-6)
    assert signals.skips == {"stale": int(stale.sum()), "non_finite": 0} and stale.sum() >= 12
    assert np.array_equal(~signals.usable, stale)
    # the latest message of each topic: JointState every 20 ms, BatteryState every 200 ms
    t_js = np.floor(t * 50 + 1e-6) / 50
    assert np.allclose(signals.inputs[:, 0], 1.5 + np.sin(2 * np.pi * t_js / 4.0))
    t_bat = np.floor(t * 5 + 1e-6) / 5
    t_bat[(t_bat >= 30.0) & (t_bat < 31.0)] = 29.8  # silent: the last message before the gap is the latest
    assert np.allclose(signals.cumulants[~stale, 1], (12.0 - t_bat / 60)[~stale], atol=1e-5)
    held = signals.continuations[:, 2] == 0.0
    assert np.array_equal(held, signals.inputs[:, 0] > 2.3) and held.any() and not held.all()


@pytest.mark.slow
def test_horde_train_scores_every_question_and_saves_a_resumable_learner(bag, tmp_path):
    path = questions(tmp_path)
    out = tmp_path / "out"
    result = subprocess.run(
        ["gamma-net", "horde", "train", "--bag", str(bag), "--questions", str(path), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=bound(300),
    )
    assert result.returncode == 0, result.stderr
    data = json.loads((out / "horde_train.json").read_text())
    assert set(data["questions"]) == {"elbow_speed", "voltage", "until_elbow_high"}
    for q in data["questions"].values():
        assert [row["tau"] for row in q["timescales"]] == [1.0, 5.0, 20.0]
        assert "next_half_s" in q["readouts"]
    speed = data["questions"]["elbow_speed"]["timescales"]
    # a periodic signal, state = the phase: the Γ-net's tau = 1 prediction is near exact
    assert speed[0]["gamma_net_final_mean"] < 0.1
    assert data["skips"]["stale"] > 0 and data["transitions"] < data["ticks"] - 1
    for figure in ("horde_errors.png", "horde_predictions.png"):
        assert (out / figure).stat().st_size > 1000
    HordeLearner.load(out / "horde.npz", spec=load_questions(path))


@pytest.mark.slow
@pytest.mark.parametrize(
    ("change", "says"),
    [
        (
            {"questions": [{"name": "q", "cumulant": {**JS, "field": "velocity[wrist]"}}]},
            "field 'velocity[wrist]' of sensor_msgs/msg/JointState: no 'wrist' in name ['shoulder', 'elbow']",
        ),
        (
            {"questions": [{"name": "q", "cumulant": {"topic": "/imu", "type": "sensor_msgs/msg/Imu", "field": "x"}}]},
            "has no topic '/imu' (the questions need it)",
        ),
        (
            {"questions": [{"name": "q", "cumulant": {**BATTERY, "type": "sensor_msgs/msg/Imu", "field": "x"}}]},
            "topic '/battery' in",
        ),
        (
            {"learner": {"tilings": [16], "memory_size": 1024, "step_size": 1000.0}},
            "non-finite or too large (largest TD error",
        ),
        (
            # The first signal of /joint_states names the right type; a later one a type that does not exist.
            {
                "questions": [
                    {
                        "name": "q",
                        "cumulant": {**JS, "type": "sensor_msgs/msg/JointStat", "field": "velocity[elbow]"},
                    }
                ]
            },
            "carries sensor_msgs/msg/JointState, not sensor_msgs/msg/JointStat as the questions say for field "
            "'velocity[elbow]'",
        ),
    ],
)
def test_bad_questions_fail_with_one_line_and_write_nothing(bag, tmp_path, change, says):
    out = tmp_path / "out"
    result = subprocess.run(
        [
            "gamma-net",
            "horde",
            "train",
            "--no-progress",
            "--bag",
            str(bag),
            "--questions",
            str(questions(tmp_path, **change)),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=bound(300),
    )
    assert result.returncode == 1
    assert says in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_an_out_that_is_a_file_is_refused_before_any_learning(bag, tmp_path):
    existing = tmp_path / "results"
    existing.write_text("the user's notes\n")
    result = subprocess.run(
        ["gamma-net", "horde", "train", "--bag", str(bag), "--questions", str(questions(tmp_path)),
         "--out", str(existing)],
        capture_output=True,
        text=True,
        timeout=bound(300),
    )  # fmt: skip
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == f"gamma-net horde train: --out {existing} is a file; it must name a folder"
    assert existing.read_text() == "the user's notes\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["questions.yaml", "results"]
