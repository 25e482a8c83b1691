"""Field paths on real rclpy and rosbags messages; the questions YAML and its one-line refusals."""

from __future__ import annotations

import pathlib

import pytest
from rosbags.typesys import Stores, get_typestore
from sensor_msgs.msg import BatteryState, Imu, JointState

from gamma_net_core.horde.fields import parse_field
from gamma_net_core.horde.questions import load_questions
from gamma_net_core.horde.readouts import forecast_steps

ROOT = pathlib.Path(__file__).resolve().parents[1]
TYPESTORE = get_typestore(Stores.ROS2_HUMBLE)


def joint_state():
    return JointState(name=["shoulder", "elbow"], position=[0.25, 1.5], velocity=[0.5, -1.0], effort=[2.0, 3.0])


def through_rosbags(message, msgtype):
    """The same message as rosbags deserializes it from a recording (CDR round trip)."""
    from rclpy.serialization import serialize_message

    return TYPESTORE.deserialize_cdr(serialize_message(message), msgtype)


@pytest.mark.parametrize("as_bag", [False, True])
def test_fields_resolve_on_rclpy_and_rosbags_messages(as_bag):
    js, imu, battery = joint_state(), Imu(), BatteryState(voltage=12.5, present=True)
    imu.linear_acceleration.z = 9.8
    if as_bag:
        js = through_rosbags(js, "sensor_msgs/msg/JointState")
        imu = through_rosbags(imu, "sensor_msgs/msg/Imu")
        battery = through_rosbags(battery, "sensor_msgs/msg/BatteryState")
    assert parse_field("velocity[elbow]").resolve(js) == -1.0
    assert parse_field("effort[shoulder]").resolve(js) == 2.0
    assert parse_field("position[1]").resolve(js) == 1.5
    assert parse_field("position[-1]").resolve(js) == 1.5
    assert parse_field("linear_acceleration.z").resolve(imu) == pytest.approx(9.8)
    assert parse_field("voltage").resolve(battery) == pytest.approx(12.5)
    assert parse_field("present").resolve(battery) == 1.0
    assert parse_field("header.stamp.sec").resolve(js) == 0.0


@pytest.mark.parametrize(
    ("path", "message", "says"),
    [
        ("velocity[wrist]", "js", "no 'wrist' in name ['shoulder', 'elbow']"),
        ("speed", "js", "no field 'speed'"),
        ("position[5]", "js", "index 5 out of range for a sequence of 2"),
        ("header.frame_id", "js", "is a str, not a number"),
        ("linear_acceleration", "imu", "is a geometry_msgs/msg/Vector3, not a number"),
        ("voltage[0]", "battery", "cannot index float with [0]"),
    ],
)
def test_missing_or_non_numeric_fields_name_path_and_type(path, message, says):
    msgs = {"js": (joint_state(), "sensor_msgs/msg/JointState"), "imu": (Imu(), "sensor_msgs/msg/Imu")}
    msgs["battery"] = (BatteryState(), "sensor_msgs/msg/BatteryState")
    msg, msgtype = msgs[message]
    for m in (msg, through_rosbags(msg, msgtype)):
        with pytest.raises(ValueError) as err:
            parse_field(path).resolve(m)
        assert str(err.value) == f"field {path!r} of {msgtype}: {says}"


@pytest.mark.parametrize("path", ["", "velocity[", "a..b", "1abc", "v[]", "velocity[elbow]x"])
def test_malformed_paths_are_refused(path):
    with pytest.raises(ValueError, match="field path"):
        parse_field(path)


def spec_doc(**changes):
    js = {"topic": "/joint_states", "type": "sensor_msgs/msg/JointState"}
    doc = {
        "rate_hz": 20.0,
        "state": [
            {**js, "field": "position[shoulder]", "low": -2.0, "high": 2.0},
            {**js, "field": "position[elbow]", "low": -2.0, "high": 2.0},
        ],
        "learner": {"tilings": [8], "memory_size": 512, "step_size": 0.2},
        "timescales": {"n_gamma": 1, "n_tau": 5, "tau_max": 50},
        "readouts": [{"name": "hyper", "kind": "hyperbolic", "k": 0.2}, {"name": "next_1s", "kind": "window"}],
        "questions": [
            {"name": "shoulder_speed", "cumulant": {**js, "field": "velocity[shoulder]", "transform": "abs"}},
            {
                "name": "volts",
                "cumulant": {"topic": "/battery", "type": "sensor_msgs/BatteryState", "field": "voltage"},
            },
            {
                "name": "until_elbow",
                "cumulant": {**js, "field": "position[elbow]", "transform": "indicator", "threshold": 1.0},
                "termination": {**js, "field": "position[elbow]", "threshold": 1.2, "direction": "above"},
            },
        ],
    }
    doc.update(changes)
    return doc


def test_spec_from_mapping_topics_and_transforms():
    spec = load_questions(spec_doc())
    assert spec.names == ("shoulder_speed", "volts", "until_elbow")
    assert spec.topics() == {"/joint_states": "sensor_msgs/msg/JointState", "/battery": "sensor_msgs/msg/BatteryState"}
    assert spec.learner.state_low == (-2.0, -2.0) and spec.learner.tilings == (8,)
    assert spec.timescales.n_tau == 5 and spec.rate_hz == 20.0
    assert spec.readout("next_1s").seconds == 1.0
    speed, _, event = spec.questions
    assert speed.cumulant.apply(-0.5) == 0.5
    assert event.cumulant.apply(1.1) == 1.0 and event.cumulant.apply(0.9) == 0.0
    assert event.termination.continuation(1.3) == 0.0 and event.termination.continuation(1.1) == 1.0
    assert speed.termination is None


def test_a_forecast_readout_is_parsed_with_its_horizon():
    spec = load_questions(spec_doc(readouts=[{"name": "in_half_s", "kind": "forecast", "seconds": 0.5}]))
    readout = spec.readout("in_half_s")
    assert (readout.kind, readout.seconds) == ("forecast", 0.5)
    assert forecast_steps(readout, rate_hz=spec.rate_hz) == 10


def test_the_shipped_arm_questions_load():
    spec = load_questions(ROOT / "config" / "horde.yaml")
    assert {"shoulder_speed", "elbow_speed", "shoulder_effort"} <= set(spec.names)
    assert any(q.termination is not None for q in spec.questions)


def bad(doc_changes=None, question=None, **kw):
    doc = spec_doc(**(doc_changes or {}))
    if question is not None:
        doc["questions"][question[0]] = question[1]
    return doc


JS = {"topic": "/joint_states", "type": "sensor_msgs/msg/JointState"}


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        (bad({"rate": 3}), "top level: unknown keys ['rate']"),
        (
            bad(question=(0, {"name": "q", "cumulant": {**JS, "field": "v", "tranform": "abs"}})),
            "question 'q'.cumulant: unknown keys ['tranform']",
        ),
        (
            bad(question=(0, {"name": "q", "cumulant": {**JS, "field": "v", "transform": "cube"}})),
            "question 'q'.cumulant.transform: must be one of",
        ),
        (
            bad(question=(0, {"name": "q", "cumulant": {**JS, "field": "v", "transform": "indicator"}})),
            "question 'q'.cumulant.threshold: required",
        ),
        (
            bad(question=(0, {"name": "q", "cumulant": {**JS, "field": "v[", "transform": "abs"}})),
            "question 'q'.cumulant.field: field path 'v['",
        ),
        (
            bad(question=(0, {"name": "q", "cumulant": {**JS, "type": "JointState", "field": "v"}})),
            "question 'q'.cumulant.type: expected pkg/msg/Type",
        ),
        (
            bad(question=(0, {"name": "q", "cumulant": {**JS, "field": "v"}, "termination": {**JS, "field": "v"}})),
            "question 'q'.termination.threshold: required",
        ),
        (bad(question=(0, {"name": "q"})), "question 'q': cumulant is required"),
        (
            bad(question=(1, {"name": "until_elbow", "cumulant": {**JS, "field": "v"}})),
            "questions: name 'until_elbow' appears twice",
        ),
        (bad({"learner": {"step_sze": 0.1}}), "learner: unknown GammaNetConfig settings ['step_sze']"),
        (bad({"learner": {"state_low": [0, 0]}}), "learner.state_low: state ranges come from"),
        (bad({"timescales": {"tau_max": 0.5}}), "timescales: tau_min 1.0 must be below tau_max 0.5"),
        (
            bad({"state": [{**JS, "field": "position[0]", "low": 1, "high": 0}]}),
            "state[0] (position[0]): low 1.0 must be below high 0.0",
        ),
        (bad({"state": [{**JS, "field": "position[0]", "low": 1}]}), "state[0] (position[0]).high: required"),
        (
            bad({"readouts": [{"name": "w", "kind": "window", "seconds": 10}]}),
            "readout 'w'.seconds: 10.0 s is 200 steps",
        ),
        (bad({"readouts": [{"name": "w", "kind": "box"}]}), "readout 'w'.kind: must be one of"),
        (
            bad({"readouts": [{"name": "f", "kind": "forecast", "seconds": 2.6}]}),
            "readout 'f'.seconds: 2.6 s is 52 steps at 20.0 Hz, beyond timescales.tau_max 50: train longer "
            "timescales or shorten the horizon",
        ),
        (
            bad({"readouts": [{"name": "f", "kind": "forecast", "seconds": 0.02}]}),
            "readout 'f'.seconds: 0.02 s is 0.4 steps at 20.0 Hz; a forecast looks at least one step ahead",
        ),
        (bad({"readouts": [{"name": "f", "kind": "forecast"}]}), "readout 'f'.seconds: required by a forecast"),
        (
            bad({"readouts": [{"name": "f", "kind": "forecast", "seconds": 0.5, "k": 10}]}),
            "readout 'f'.k: only a hyperbolic readout has k (1 / (1 + k t)); a forecast's horizon is seconds",
        ),
        (
            bad({"readouts": [{"name": "w", "kind": "window", "seconds": 0.5, "k": 0.2}]}),
            "readout 'w'.k: only a hyperbolic readout has k",
        ),
        (
            bad({"readouts": [{"name": "h", "kind": "hyperbolic", "k": 0.1, "seconds": 2.0}]}),
            "readout 'h'.seconds: a hyperbolic readout has no horizon in seconds; its shape is k, per step",
        ),
        (bad({"adaptation": {"method": "idbd"}}), "adaptation: AdaptationConfig.method must be one of"),
        (bad({"questions": []}), "questions: a non-empty list is required"),
    ],
)
def test_bad_questions_are_refused_naming_question_and_key(doc, says):
    with pytest.raises(ValueError) as err:
        load_questions(doc)
    assert says in str(err.value)
    assert "\n" not in str(err.value)


def test_bad_file_is_refused_naming_it(tmp_path):
    path = tmp_path / "q.yaml"
    path.write_text("questions: [\n")
    with pytest.raises(ValueError, match=f"{path}: not valid YAML"):
        load_questions(path)
    with pytest.raises(FileNotFoundError, match="no questions file"):
        load_questions(tmp_path / "none.yaml")
