"""Field paths over arrays (slices, aggregates, REP 117), transforms on every signal, and the registries.

The Horde and the reflex read a question's value through one function: a property test over
random LaserScans with inf, -inf and NaN beams checks that the Horde's rows and the reflex's
signal readers give the same value for every transform, and both the value a plain oracle gives.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rosbags.typesys import Stores, get_typestore
from sensor_msgs.msg import BatteryState, JointState, LaserScan, Range

from gamma_net_core.horde.fields import AGGREGATES, parse_field
from gamma_net_core.horde.questions import Readout, load_questions
from gamma_net_core.horde.readouts import READOUT_KINDS, ideal_discount, readout_weights
from gamma_net_core.horde.transforms import TRANSFORMS
from gamma_net_core.reflex.rules import load_rules
from gamma_net_ros.horde.rows import Row
from gamma_net_ros.horde.topics import check_field
from gamma_net_ros.reflex.settings import signal_readers

INF, NAN = math.inf, math.nan
SCAN = {"topic": "/base/scan", "type": "sensor_msgs/msg/LaserScan"}
TYPESTORE = get_typestore(Stores.ROS2_HUMBLE)


def scan(ranges, *, range_min=0.1, range_max=8.0) -> LaserScan:
    return LaserScan(range_min=range_min, range_max=range_max, ranges=[float(r) for r in ranges])


def through_rosbags(message, msgtype):
    from rclpy.serialization import serialize_message

    return TYPESTORE.deserialize_cdr(serialize_message(message), msgtype)


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)


# -- field paths


@pytest.mark.parametrize("as_bag", [False, True])
def test_aggregates_read_slices_of_a_scan_with_inf_read_per_rep_117(as_bag):
    msg = scan([INF, 1.0, 2.0, -INF, NAN, 4.0, INF])
    if as_bag:
        msg = through_rosbags(msg, "sensor_msgs/msg/LaserScan")
    low = msg.range_min  # rclpy keeps 0.1; a recording carries it as float32
    expected = {
        "ranges[0]": 8.0,  # +inf: nothing within range_max
        "ranges[3]": low,  # -inf: too close
        "ranges[-3]": NAN,  # NaN: no reading
        "min(ranges[0:3])": 1.0,
        "min(ranges)": low,
        "max(ranges[1:3])": 2.0,
        "mean(ranges[-3:])": 6.0,  # (4 + 8) / 2: the NaN beam has no reading
        "mean(ranges[:3])": 11.0 / 3.0,
        "argmin(ranges[1:])": 2.0,  # the -inf beam, counted from the slice's first
        "argmax(ranges[1:3])": 1.0,
        "argmax(ranges)": 0.0,  # the first of two range_max beams
        "min(ranges[4:5])": NAN,  # no beam with a reading
    }
    for path, value in expected.items():
        assert same(parse_field(path).resolve(msg), value), path
    # the file's values win over the message's limits
    assert parse_field("ranges[0]").resolve(msg, inf_as=30.0) == 30.0
    assert parse_field("min(ranges[2:4])").resolve(msg, minus_inf_as=-1.0) == -1.0


def test_a_range_reads_per_rep_117_and_other_fields_keep_their_infinities():
    assert parse_field("range").resolve(Range(range=INF, min_range=0.02, max_range=4.0)) == 4.0
    assert parse_field("range").resolve(Range(range=-INF, min_range=0.5, max_range=4.0)) == 0.5
    battery = BatteryState(voltage=INF, current=-INF)
    assert parse_field("voltage").resolve(battery) == INF  # no range limit beside it
    assert parse_field("voltage").resolve(battery, inf_as=12.0) == 12.0
    assert parse_field("current").resolve(battery, minus_inf_as=-5.0) == -5.0
    # a driver's limit that is not finite is no limit
    assert parse_field("ranges[0]").resolve(scan([INF], range_max=INF)) == INF


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("ranges[0:3]", "a slice reads many numbers; wrap it in an aggregate, one of ['argmax', 'argmin', 'max', "),
        ("median(ranges)", "unknown aggregate 'median'; known: ['argmax', 'argmin', 'max', 'mean', 'min']"),
        ("min(ranges[0:2][0])", "a slice must be the last index"),
        ("min()", "min() of nothing"),
    ],
)
def test_malformed_aggregates_are_refused_in_one_line(path, says):
    with pytest.raises(ValueError) as err:
        parse_field(path)
    assert says in str(err.value) and f"field path {path!r}" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("path", "message", "says"),
    [
        ("min(ranges[9:])", scan([1.0, 2.0]), "the slice [9:] is empty"),
        ("min(ranges)", scan([]), "min() of an empty sequence"),
        ("min(range_max)", scan([1.0]), "min() needs a sequence; this is a float"),
        ("mean(header)", scan([1.0]), "mean() needs a sequence; this is a std_msgs/msg/Header"),
        ("max(name)", JointState(name=["a"]), "max() needs numbers"),
    ],
)
def test_an_aggregate_that_cannot_be_read_names_path_and_type(path, message, says):
    with pytest.raises(ValueError) as err:
        parse_field(path).resolve(message)
    assert str(err.value).startswith(f"field {path!r} of sensor_msgs/msg/") and says in str(err.value)


def test_aggregates_are_checked_against_the_message_type_before_the_node_starts():
    for path in ("min(ranges[0:5])", "argmin(ranges[-5:])", "mean(intensities)", "ranges[-3]"):
        check_field(LaserScan, path)
    for path, says in [
        ("min(range_max)", "min() needs a sequence of numbers; 'range_max' is a float"),
        ("min(header)", "min() needs a sequence of numbers; 'header' is a std_msgs/Header"),
        ("min(rangez[0:5])", "LaserScan has no field 'rangez'"),
        ("ranges[0:5]", "cannot read 'ranges[0:5]'"),
    ]:
        with pytest.raises(ValueError) as err:
            check_field(LaserScan, path)
        assert says in str(err.value) and "\n" not in str(err.value), str(err.value)


# -- transforms on cumulants and state inputs


def doc(state=None, cumulant=None, readouts=()):
    return {
        "rate_hz": 10.0,
        "state": state or [{**SCAN, "field": "range_max", "low": 0.0, "high": 100.0}],
        "readouts": list(readouts),
        "questions": [{"name": "q", "cumulant": cumulant or {**SCAN, "field": "ranges[0]"}}],
    }


def test_state_inputs_take_transforms_and_a_file_names_what_inf_reads_as():
    spec = load_questions(
        doc(
            state=[
                {**SCAN, "field": "min(ranges[0:2])", "transform": "clip", "max": 3.0, "low": 0.0, "high": 3.0},
                {**SCAN, "field": "ranges[-1]", "transform": "inverse", "inf_as": 20.0, "low": 0.0, "high": 10.0},
            ],
            cumulant={**SCAN, "field": "ranges[0]", "transform": "indicator", "threshold": 0.35, "direction": "below"},
        )
    )
    msg = scan([INF, INF, 0.2, INF])
    clip, inverse = spec.state
    assert clip.read(msg) == 3.0 and inverse.read(msg) == 1.0 / 20.0
    assert spec.questions[0].cumulant.read(msg) == 0.0  # open space in front: a well-defined 0
    assert spec.questions[0].cumulant.read(scan([0.2])) == 1.0
    assert inverse.apply(0.0) != inverse.apply(0.0)  # 1 / 0 is no value: NaN


@pytest.mark.parametrize(
    ("cumulant", "says"),
    [
        ({"transform": "cube"}, "question 'q'.cumulant.transform: must be one of ['abs', 'clip', "),
        ({"transform": "clip"}, "question 'q'.cumulant: the clip transform needs min, max or both"),
        ({"transform": "clip", "min": 2, "max": 1}, "question 'q'.cumulant: clip's min 2.0 must be below its max 1.0"),
        ({"transform": "abs", "threshold": 1.0}, "question 'q'.cumulant: unknown keys ['threshold']"),
        ({"transform": "indicator", "threshold": "x"}, "question 'q'.cumulant.threshold: must be a finite number"),
        ({"transform": "indicator", "threshold": 1, "direction": "up"}, "cumulant.direction: must be one of ['above'"),
        ({"inf_as": float("inf")}, "question 'q'.cumulant.inf_as: must be a finite number; got inf"),
    ],
)
def test_a_bad_transform_is_refused_in_one_line_naming_the_value(cumulant, says):
    with pytest.raises(ValueError) as err:
        load_questions(doc(cumulant={**SCAN, "field": "ranges[0]", **cumulant}))
    assert says in str(err.value) and "\n" not in str(err.value), str(err.value)


# -- registries: one entry per name, an unknown name refused naming the known ones


def test_an_unknown_name_is_refused_by_every_registry_never_a_fall_through():
    with pytest.raises(ValueError, match=r"^unknown transform 'cube'; known: \['abs', 'clip', 'identity'"):
        TRANSFORMS["cube"]
    with pytest.raises(ValueError, match=r"^unknown aggregate 'median'; known: \['argmax', 'argmin', 'max'"):
        AGGREGATES["median"]
    box = Readout(name="b", kind="box", seconds=1.0)  # e.g. restored from a checkpoint of another version
    for read in (readout_weights, lambda r, **kw: ideal_discount(r, np.arange(5), **kw)):
        with pytest.raises(ValueError, match=r"^unknown readout kind 'box'; known: \['forecast', 'hyperbolic'"):
            read(box, rate_hz=10.0, tau_max=100.0)
    with pytest.raises(ValueError, match=r"readout 'b'.kind: must be one of \['forecast', 'hyperbolic', 'window'\]"):
        load_questions(doc(readouts=[{"name": "b", "kind": "box"}]))
    with pytest.raises(ValueError, match="transform 'abs' is registered already"):
        TRANSFORMS.add("abs", TRANSFORMS["abs"])
    assert {"hyperbolic", "window", "forecast"} <= set(READOUT_KINDS)


# -- the Horde and the reflex read one question the same way


def _transform(draw) -> dict:
    name = draw(st.sampled_from(["identity", "abs", "square", "indicator", "clip", "inverse"]))
    if name == "indicator":
        return {
            "transform": name,
            "threshold": draw(st.floats(0.0, 10.0)),
            "direction": draw(st.sampled_from(["above", "below"])),
        }
    if name == "clip":
        low = draw(st.floats(-1.0, 5.0))
        return {"transform": name, "min": low, "max": low + draw(st.floats(0.1, 5.0))}
    return {"transform": name}


BEAM = st.one_of(st.sampled_from([INF, -INF, NAN, 0.0]), st.floats(0.05, 12.0))
PATHS = ["ranges[0]", "ranges[-2]", "min(ranges[0:3])", "max(ranges[-3:])", "mean(ranges)", "argmin(ranges[1:])"]


def oracle(path: str, msg: LaserScan, signal: dict) -> float:
    """The value by hand: REP 117, the path, then the transform, on the message's own (float32) numbers."""
    high = signal.get("inf_as", msg.range_max)
    beams = [high if r == INF else msg.range_min if r == -INF else float(r) for r in msg.ranges]
    if path.startswith("ranges["):
        value = beams[int(path[7:-1])]
    else:
        aggregate, inside = path[:-1].split("(")
        bounds = inside[7:-1].split(":") if "[" in inside else ("", "")
        start, stop = (int(b) if b else None for b in bounds)
        part = beams[start:stop]
        kept = [b for b in part if b == b]
        if not kept:
            value = NAN
        elif aggregate in ("min", "max"):
            value = min(kept) if aggregate == "min" else max(kept)
        elif aggregate == "mean":
            value = sum(kept) / len(kept)
        else:
            value = float(part.index(min(kept)))
    if not math.isfinite(value):
        return NAN
    name = signal["transform"]
    if name == "abs":
        value = abs(value)
    elif name == "square":
        value = value * value
    elif name == "indicator":
        past = value > signal["threshold"] if signal["direction"] == "above" else value < signal["threshold"]
        value = float(past)
    elif name == "clip":
        value = min(max(value, signal["min"]), signal["max"])
    elif name == "inverse":
        value = 1.0 / value if value else NAN
    return value if math.isfinite(value) else NAN


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_the_horde_and_the_reflex_read_the_same_value_of_every_transform(data):
    beams = data.draw(st.lists(BEAM, min_size=4, max_size=9))
    msg = scan(beams, range_min=data.draw(st.floats(0.01, 0.3)), range_max=data.draw(st.floats(4.0, 30.0)))
    path = data.draw(st.sampled_from(PATHS))
    signal = {**SCAN, "field": path, **_transform(data.draw)}
    if data.draw(st.booleans()):
        signal["inf_as"] = data.draw(st.floats(1.0, 50.0))
    expected = oracle(path, msg, signal)
    # the cumulant of a question: the Horde's row and the reflex's reader of a signal rule on it
    spec = load_questions(doc(cumulant=signal))
    horde = Row(spec).read({"/base/scan": msg})
    rule = {"name": "r", "source": "signal", "question": "q", "above": 0.5, "response": {"event": True}}
    rules = load_rules({"rules": [rule]}, questions=spec, joint_names=[])
    ((_, cumulant, _),) = signal_readers(rules, spec)["/base/scan"]
    reflex = cumulant.read(msg)  # what the reflex node does with each message of the topic
    assert same(horde.cumulants[0], reflex) and same(reflex, expected), (horde.cumulants[0], reflex, expected)
    assert bool(horde.usable[0]) == math.isfinite(expected)
    if not horde.usable[0]:
        assert horde.errors["q"].startswith(f"field {path!r}")  # the one line the node says
    # the same signal as a state input: the same value, and only NaN stops the tick
    state = load_questions(doc(state=[{**signal, "low": -1.0, "high": 1.0}]))
    row = Row(state).read({"/base/scan": msg})
    assert same(row.inputs[0], expected) and row.state_ok == math.isfinite(expected)


def test_a_scan_of_inf_beams_stops_nothing_and_an_unread_infinity_says_how_to_name_it():
    spec = load_questions(
        doc(
            state=[{**SCAN, "field": "ranges[-3]", "low": 0.0, "high": 8.0}],
            cumulant={**SCAN, "field": "ranges[0]", "transform": "indicator", "threshold": 0.35, "direction": "below"},
        )
    )
    reading = Row(spec).read({"/base/scan": scan([INF] * 6)})
    assert reading.state_ok and reading.usable.all() and reading.cumulants[0] == 0.0 and not reading.errors
    battery = load_questions(
        {
            "state": [
                {"topic": "/battery", "type": "sensor_msgs/msg/BatteryState", "field": "voltage", "low": 0, "high": 20}
            ],
            "questions": [
                {"name": "v", "cumulant": {"topic": "/battery", "type": "sensor_msgs/BatteryState", "field": "current"}}
            ],
        }
    )
    reading = Row(battery).read({"/battery": BatteryState(voltage=INF, current=1.0)})
    assert not reading.state_ok
    assert reading.errors["state"] == (
        "field 'voltage' on /battery is inf (no REP 117 range limit beside it: name what it reads as with inf_as)"
    )


def test_the_guides_laserscan_questions_load_check_and_read_open_space_as_range_max():
    import yaml
    from geometry_msgs.msg import Twist
    from guides import guide_text

    from gamma_net_ros.horde.topics import message_class

    text = guide_text("horde").split("<!-- horde laserscan -->", 1)[1]
    spec = load_questions(yaml.safe_load(text.split("```yaml\n", 1)[1].split("```", 1)[0]))
    for signal in spec.signals():
        check_field(message_class(signal.type), signal.field)
    open_space = scan([INF] * 360, range_max=4.0)
    reading = Row(spec).read({"/base/scan": open_space, "/cmd_vel": Twist()})
    assert reading.usable.all() and not reading.errors
    np.testing.assert_allclose(reading.inputs, [4.0, 0.0, 0.0])
    np.testing.assert_allclose(reading.cumulants, [0.0, 4.0, 0.25])
    wall = scan([INF] * 175 + [0.3] + [INF] * 184, range_max=4.0)
    reading = Row(spec).read({"/base/scan": wall, "/cmd_vel": Twist()})
    np.testing.assert_allclose(reading.inputs[:2], [0.3, 5.0], rtol=1e-6)  # beam 175: the slice's 5th
    np.testing.assert_allclose(reading.cumulants[[0, 2]], [1.0, 1 / 0.3], rtol=1e-6)
