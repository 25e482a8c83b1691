"""The live view: ROS predictions and errors as Foxglove JSON channels, received by a real protocol client.

The conversion is checked as a pure function; the node is started as users start it (through
``gamma_net_ros.entry``), fed real messages by a real rclpy node, and read over the Foxglove
WebSocket protocol by :class:`foxglove_client.FoxgloveClient`.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import re
import shutil
import socket
import subprocess
import time

import pytest
from foxglove_client import FoxgloveClient
from guides import guide_text
from rclpy.node import Node
from waiting import bound, spin_for, spin_until

from gamma_net_core.horde.questions import load_questions
from gamma_net_core.horde.readouts import horizon
from gamma_net_ros.foxglove_layout import horde_layout
from gamma_net_ros.live_view import SCHEMAS, errors_records, predictions_records, returns_records
from gamma_net_ros.paths import config_file
from gamma_net_ros.processes import NodeProcess, node_command

ROOT = pathlib.Path(__file__).resolve().parent.parent


def array_msg(update_count: int = 7):
    from gamma_net_msgs.msg import PredictionArray

    msg = PredictionArray(questions=["speed", "effort"], gammas=[0.0, 0.9, 0.99], readouts=["next_2s"])
    msg.header.stamp.sec, msg.header.stamp.nanosec = 12, 500_000_000
    msg.values = [1.0, 10.0, 100.0, 2.0, 20.0 + update_count, math.nan]
    msg.readout_values = [3.0, 4.0]
    msg.update_count = update_count
    return msg


def errors_msg():
    from gamma_net_msgs.msg import PredictionErrors

    msg = PredictionErrors(questions=["speed", "effort"], gammas=[0.0, 0.9], readouts=["next_2s"])
    msg.rmse = [0.1, 0.2, 0.3, math.nan, 0.5, 0.6]
    msg.mean_rmse = [1.0, 0.4, 0.0, math.nan, 1.0, 1.2]
    msg.samples = [10, 9, 8, 0, 9, 8]
    return msg


def returns_msg(update_count: int = 70):
    from gamma_net_msgs.msg import RealizedReturns

    msg = RealizedReturns(questions=["speed", "effort"], gammas=[0.0, 0.9], readouts=["next_2s"])
    msg.header.stamp.sec, msg.header.stamp.nanosec = 19, 0
    msg.returns = [1.0, 20.0, 30.0, math.nan, 5.0 + update_count, 6.0]
    msg.predictions = [2.0, 10.0, 40.0, math.nan, 4.0, 7.0]
    msg.steps_ago = [1, 66, 135, 0, 3, 3]  # effort terminated 3 ticks ago; its tau 1 return completed before
    msg.update_count = update_count
    return msg


def test_a_prediction_array_is_one_channel_per_question_its_arrays_in_tau_order():
    records = predictions_records(array_msg(), "/horde/predictions")
    assert list(records) == ["/horde/predictions/speed", "/horde/predictions/effort"]
    speed, effort = records.values()
    assert speed["header"] == {"stamp": {"sec": 12, "nsec": 500_000_000}} and speed["update_count"] == 7
    assert speed["taus"] == pytest.approx([1.0, 10.0, 100.0]) and speed["gammas"] == [0.0, 0.9, 0.99]
    assert speed["values"] == [1.0, 10.0, 100.0]
    assert speed["scaled"] == pytest.approx([1.0, 1.0, 1.0])  # (1 - gamma) V
    assert speed["readouts"] == {"next_2s": 3.0} and effort["readouts"] == {"next_2s": 4.0}
    assert effort["values"] == [2.0, 27.0, None] and effort["scaled"][2] is None  # JSON has no NaN
    json.dumps(records, allow_nan=False)


def test_a_prediction_is_one_channel_of_its_topic():
    from gamma_net_msgs.msg import Prediction

    msg = Prediction(question="|shoulder.velocity|", gammas=[0.0, 0.5], values=[0.5, 2.0], update_count=3)
    (record,) = predictions_records(msg, "/predictions").items()
    assert record[0] == "/predictions"
    assert record[1]["question"] == "|shoulder.velocity|" and record[1]["scaled"] == [0.5, 1.0]
    assert record[1]["taus"] == [1.0, 2.0] and record[1]["readouts"] == {}


def test_errors_are_one_channel_per_question_with_the_ratio_to_the_mean_predictor():
    records = errors_records(errors_msg(), "/horde/errors")
    speed, effort = records["/horde/errors/speed"], records["/horde/errors/effort"]
    assert speed["taus"] == pytest.approx([1.0, 10.0])
    assert speed["rmse"] == [0.1, 0.2] and speed["mean_rmse"] == [1.0, 0.4] and speed["samples"] == [10, 9]
    assert speed["ratio"] == pytest.approx([0.1, 0.5])
    assert speed["readouts"] == {"next_2s": {"rmse": 0.3, "mean_rmse": 0.0, "ratio": None, "samples": 8}}
    assert effort["rmse"] == [None, 0.5] and effort["ratio"] == [None, 0.5]  # nothing scored yet: null
    json.dumps(records, allow_nan=False)


def test_returns_are_one_channel_per_question_each_beside_the_prediction_it_scores():
    records = returns_records(returns_msg(), "/horde/returns")
    assert list(records) == ["/horde/returns/speed", "/horde/returns/effort"]
    speed, effort = records.values()
    assert speed["header"] == {"stamp": {"sec": 19, "nsec": 0}} and speed["update_count"] == 70
    assert speed["taus"] == pytest.approx([1.0, 10.0]) and speed["gammas"] == [0.0, 0.9]
    assert speed["returns"] == [1.0, 20.0] and speed["predictions"] == [2.0, 10.0]
    assert speed["scaled_returns"] == pytest.approx([1.0, 2.0]) and speed["scaled_predictions"] == pytest.approx(
        [2.0, 1.0]
    )
    assert speed["steps_ago"] == [1, 66]
    assert speed["readouts"] == {"next_2s": {"return": 30.0, "prediction": 40.0, "steps_ago": 135}}
    assert effort["returns"] == [None, 75.0] and effort["scaled_returns"][0] is None  # none completed: null
    assert effort["predictions"] == [None, 4.0] and effort["steps_ago"] == [0, 3]
    json.dumps(records, allow_nan=False)


@pytest.mark.parametrize(
    "change, needle",
    [
        (
            lambda m: setattr(m, "steps_ago", [1, 2]),
            "malformed RealizedReturns: 2 steps_ago for 2 questions x 3 timescales",
        ),
        (lambda m: setattr(m, "predictions", [1.0]), "malformed RealizedReturns: 1 predictions for 2 questions x 3"),
    ],
)
def test_malformed_returns_are_refused_naming_their_sizes(change, needle):
    msg = returns_msg()
    change(msg)
    with pytest.raises(ValueError, match=needle):
        returns_records(msg, "/horde/returns")


@pytest.mark.parametrize(
    "change, needle",
    [
        (lambda m: setattr(m, "values", [1.0, 2.0]), "malformed PredictionArray: 2 values for 2 questions x 3 gammas"),
        (lambda m: setattr(m, "readout_values", [1.0]), "1 readout_values for 2 questions x 1 readouts"),
    ],
)
def test_a_malformed_array_is_refused_naming_its_sizes(change, needle):
    msg = array_msg()
    change(msg)
    with pytest.raises(ValueError, match=needle):
        predictions_records(msg, "/horde/predictions")


def _types(schema: dict):
    """Every ``type`` in a JSON schema, nested ones included."""
    for key, value in schema.items():
        if key == "type":
            yield value
        elif isinstance(value, dict):
            yield from _types(value)


@pytest.mark.parametrize("kind", sorted(SCHEMAS))
def test_a_channel_schema_names_each_type_once_as_lichtblick_reads_it(kind):
    """Lichtblick's (and Foxglove Studio's) JSON-schema reader takes one type name per field; a list
    (["number", "null"]) makes it refuse the channel, and its plots stay empty (docs/live-view.md)."""
    types = list(_types(SCHEMAS[kind]))
    assert "array" in types and "number" in types
    readable = {"object", "array", "number", "integer", "string", "boolean"}
    assert all(isinstance(t, str) and t in readable for t in types), types


def test_the_shipped_layout_is_that_of_the_shipped_questions_and_reads_the_channels():
    spec = load_questions(config_file("horde"))
    shipped = json.loads((ROOT / "config" / "live_view.json").read_text())
    assert shipped == json.loads(horde_layout(spec).to_json())
    paths = [s["value"] for tab in shipped["content"]["tabs"] for s in _series(tab)]
    assert paths, shipped
    topics = {p.split(".", 1)[0] for p in paths}
    expected = {f"/horde/{kind}/{name}" for kind in ("predictions", "errors", "returns") for name in spec.names}
    assert topics == expected
    assert {p.split(".", 1)[1] for p in paths} >= {f"scaled[{k}]" for k in range(len(spec.publish_taus))}
    # each question's prediction beside its realized return, at one tau (the middle one: 10), both (1 - gamma)-scaled
    for name in spec.names:
        fields = sorted(p.split(".", 1)[1] for p in paths if p.startswith(f"/horde/returns/{name}."))
        assert fields == ["scaled_predictions[3]", "scaled_returns[3]"], fields


def test_the_screenshot_tool_converts_the_shipped_layout_to_lichtblicks_format():
    """tools/live_view_screenshot.py: every tab and series of config/live_view.json, in the fields Lichtblick's
    layout import requires (configById, globalVariables, playbackConfig.speed) and a mosaic of panel ids."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("live_view_screenshot", ROOT / "tools" / "live_view_screenshot.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    shipped = json.loads((ROOT / "config" / "live_view.json").read_text())
    layout = tool.lichtblick_layout(shipped)
    assert isinstance(layout["globalVariables"], dict) and layout["playbackConfig"]["speed"] == 1.0
    tabs = layout["configById"][layout["layout"]]
    assert [t["title"] for t in tabs["tabs"]] == [t["title"] for t in shipped["content"]["tabs"]]

    def ids(node):
        return [node] if isinstance(node, str) else ids(node["first"]) + ids(node["second"])

    for tab, original in zip(tabs["tabs"], shipped["content"]["tabs"]):
        plots = [layout["configById"][i] for i in ids(tab["layout"])]
        assert [p["value"] for plot in plots for p in plot["paths"]] == [s["value"] for s in _series(original)]
        assert all(p["enabled"] and p["timestampMethod"] == "receiveTime" for plot in plots for p in plot["paths"])
    root_split = tabs["tabs"][0]["layout"]
    items = shipped["content"]["tabs"][0]["content"]["items"]
    share = 100 * items[0]["proportion"] / sum(item["proportion"] for item in items)
    assert root_split["direction"] == "column" and root_split["splitPercentage"] == pytest.approx(share)


def _series(node) -> list[dict]:
    """Every Plot series under a layout node."""
    if isinstance(node, dict):
        found = list(node.get("config", {}).get("paths", [])) if node.get("panelType") == "Plot" else []
        return found + [s for v in node.values() for s in _series(v)]
    if isinstance(node, list):
        return [s for v in node for s in _series(v)]
    return []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def field(record: dict, path: str):
    """The value at a layout's message path (``.scaled[3]``, ``.taus[:]``) in a received record."""
    value = record
    for part in path.split("."):
        name, _, index = part.partition("[")
        value = value[name]
        if index and index != ":]":
            value = value[int(index[:-1])]
    return value


@pytest.mark.ros
def test_a_foxglove_client_receives_what_the_horde_topics_carry(executor, tmp_path):
    from gamma_net_msgs.msg import Prediction, PredictionArray, PredictionErrors, RealizedReturns

    node = Node("horde_stand_in")
    arrays = node.create_publisher(PredictionArray, "horde/predictions", 10)
    errors = node.create_publisher(PredictionErrors, "horde/errors", 10)
    returns = node.create_publisher(RealizedReturns, "horde/returns", 10)
    single = node.create_publisher(Prediction, "predictions", 10)
    executor.add_node(node)
    port = free_port()
    log = tmp_path / "live_view.log"
    started_ns = time.time_ns()
    with NodeProcess(node_command("gamma_net_ros.live_view", params={"port": port}), log) as view:
        wait = lambda: "serving ws://" in log.read_text() or not view.running  # noqa: E731
        assert spin_until(executor, wait, timeout=60), log.read_text()
        assert f"serving ws://127.0.0.1:{port}" in log.read_text(), log.read_text()
        client = FoxgloveClient(f"ws://127.0.0.1:{port}")
        try:
            wanted = [
                "/horde/predictions/speed",
                "/horde/predictions/effort",
                "/horde/errors/speed",
                "/horde/returns/effort",
                "/predictions",
            ]
            sent = 0
            deadline = time.monotonic() + bound(30)
            while time.monotonic() < deadline and not all(client.received.get(t) for t in wanted):
                arrays.publish(array_msg(update_count=sent))
                errors.publish(errors_msg())
                returns.publish(returns_msg(update_count=sent))
                single.publish(Prediction(question="x", gammas=[0.5], values=[4.0], update_count=sent))
                sent += 1
                spin_for(executor, 0.02)
                client.poll(0.05)
                for topic in wanted:
                    if topic in client.channels and topic not in client.subscriptions.values():
                        client.subscribe(topic)
            assert client.server_info is not None and client.server_info["name"] == "gamma_net live_view"
            assert all(client.received.get(t) for t in wanted), (sorted(client.channels), log.read_text())
        finally:
            client.close()
        assert view.stop() == 0, log.read_text()  # Ctrl-C: the server stops with the node
    channel = client.channels["/horde/predictions/effort"]
    assert channel["encoding"] == "json" and channel["schemaName"] == "gamma_net/QuestionPredictions"
    log_time, effort = client.received["/horde/predictions/effort"][-1]
    assert started_ns <= log_time <= time.time_ns()  # stamped on receipt, on the node's clock
    n = effort["update_count"]
    assert 0 <= n < sent and effort["values"] == [2.0, 20.0 + n, None] and effort["readouts"] == {"next_2s": 4.0}
    assert effort["header"] == {"stamp": {"sec": 12, "nsec": 500_000_000}}
    _, speed_errors = client.received["/horde/errors/speed"][-1]
    assert speed_errors["ratio"] == pytest.approx([0.1, 0.5]) and speed_errors["samples"] == [10, 9]
    channel = client.channels["/horde/returns/effort"]
    assert channel["encoding"] == "json" and channel["schemaName"] == "gamma_net/QuestionReturns"
    _, effort_returns = client.received["/horde/returns/effort"][-1]
    n = effort_returns["update_count"]
    assert 0 <= n < sent and effort_returns["returns"] == [None, 5.0 + n] and effort_returns["steps_ago"] == [0, 3]
    assert effort_returns["scaled_returns"] == [None, pytest.approx(0.1 * (5.0 + n))]
    assert effort_returns["readouts"] == {"next_2s": {"return": 6.0, "prediction": 7.0, "steps_ago": 3}}
    _, single = client.received["/predictions"][-1]
    assert single["question"] == "x" and single["scaled"] == [2.0] and single["taus"] == [2.0]


@pytest.mark.ros
def test_a_port_in_use_is_refused_in_one_line_naming_it(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        log = tmp_path / "live_view.log"
        with NodeProcess(node_command("gamma_net_ros.live_view", params={"port": port}), log) as view:
            assert view.wait(timeout=bound(60)) == 1
    output = log.read_text()
    assert f"refusing to start: cannot serve on 127.0.0.1:{port}" in output and "-p port:=N" in output, output
    assert "Traceback" not in output and len(output.strip().splitlines()) == 1, output


#: A robot stand-in that is not the arm: one wrist joint swinging with a period of 2 s at 50 Hz and an
#: effort spike at each grip (a tenth of the period, late in it), what the questions predict.
PERIOD_TICKS, RATE_HZ = 100, 50.0
WRIST = {"topic": "/my_robot/joint_states", "type": "sensor_msgs/msg/JointState"}
ROBOT_QUESTIONS = {
    "rate_hz": RATE_HZ,
    "stale_after_s": 0.5,
    "seed": 0,
    "publish_taus": [1, 5, 25],
    "state": [
        {**WRIST, "field": "position[wrist]", "low": -1.0, "high": 1.0},
        {**WRIST, "field": "velocity[wrist]", "low": -3.2, "high": 3.2},
    ],
    "learner": {"tilings": [16], "memory_size": 4096, "step_size": 0.1},
    "timescales": {"n_gamma": 1, "n_tau": 7, "tau_max": 25},
    "questions": [
        {"name": "grip_effort", "cumulant": {**WRIST, "field": "effort[wrist]"}},
        {"name": "wrist_speed", "cumulant": {**WRIST, "field": "velocity[wrist]", "transform": "abs"}},
    ],
}


def wrist(tick: int):
    from sensor_msgs.msg import JointState

    phase = 2 * math.pi * (tick % PERIOD_TICKS) / PERIOD_TICKS
    grip = 80 <= tick % PERIOD_TICKS < 90
    speed = 2 * math.pi * RATE_HZ / PERIOD_TICKS / 2  # d/dt sin(phase) at this rate: pi rad/s
    return JointState(
        name=["wrist"], position=[math.sin(phase)], velocity=[speed * math.cos(phase)], effort=[float(grip)]
    )


@pytest.mark.ros
@pytest.mark.slow
def test_a_foxglove_client_sees_a_real_horde_learn_live(executor, tmp_path):
    """A real horde process learns from a real JointState stream; the client gets its every prediction and error.

    With ``GAMMA_NET_LIVE_VIEW_FIGURE=PATH`` it draws what the client received (docs/live-view.md shows it).
    """
    import yaml
    from gamma_net_msgs.msg import PredictionArray, PredictionErrors, RealizedReturns
    from rclpy.qos import qos_profile_sensor_data
    from sensor_msgs.msg import JointState

    questions = tmp_path / "robot.yaml"
    questions.write_text(yaml.safe_dump(ROBOT_QUESTIONS))
    rig = Node("robot_stand_in")
    joints = rig.create_publisher(JointState, "/my_robot/joint_states", qos_profile_sensor_data)
    published: dict[int, PredictionArray] = {}
    scored: dict[tuple[int, int], PredictionErrors] = {}
    stamp = lambda m: (m.header.stamp.sec, m.header.stamp.nanosec)  # noqa: E731
    # A tick that learns nothing (a late or refused message) publishes again at the same update count, so
    # the client's record is matched with the array of its own stamp.
    by_stamp: dict[tuple[int, int], PredictionArray] = {}

    def on_predictions(m: PredictionArray) -> None:
        published[m.update_count] = m
        by_stamp[stamp(m)] = m

    rig.create_subscription(PredictionArray, "horde/predictions", on_predictions, 100)
    rig.create_subscription(PredictionErrors, "horde/errors", lambda m: scored.update({stamp(m): m}), 10)
    realized: dict[tuple[int, int], RealizedReturns] = {}  # by stamp, as the arrays: an update count can repeat
    rig.create_subscription(RealizedReturns, "horde/returns", lambda m: realized.update({stamp(m): m}), 100)
    ticks = [0]

    def publish():
        msg = wrist(ticks[0])
        msg.header.stamp = rig.get_clock().now().to_msg()
        joints.publish(msg)
        ticks[0] += 1

    rig.create_timer(1.0 / RATE_HZ, publish)
    executor.add_node(rig)
    port = free_port()
    horde_params = {"questions_file": str(questions), "checkpoint_path": str(tmp_path / "horde.npz")}
    horde_log, view_log = tmp_path / "horde.log", tmp_path / "live_view.log"
    with (
        NodeProcess(node_command("gamma_net_ros.horde.node", params=horde_params), horde_log) as horde,
        NodeProcess(node_command("gamma_net_ros.live_view", params={"port": port}), view_log) as view,
    ):
        up = lambda: "serving ws://" in view_log.read_text() or not view.running  # noqa: E731
        assert spin_until(executor, up, timeout=60), view_log.read_text()
        client = FoxgloveClient(f"ws://127.0.0.1:{port}")
        try:
            wanted = [
                f"/horde/{kind}/{q['name']}"
                for kind in ("predictions", "errors", "returns")
                for q in ROBOT_QUESTIONS["questions"]
            ]
            learned = lambda: all(client.received.get(t) for t in wanted) and max(published, default=0) >= 1000  # noqa: E731
            deadline = time.monotonic() + bound(120)
            while time.monotonic() < deadline and not learned() and horde.running:
                spin_for(executor, 0.05)
                client.poll(0.01)
                for topic in set(wanted) & set(client.channels) - set(client.subscriptions.values()):
                    client.subscribe(topic)
            assert learned(), (sorted(client.channels), max(published, default=0), horde_log.read_text())
            spin_for(executor, 0.2)  # what the client received last reaches the rig too
        finally:
            client.close()
        assert view.stop() == 0 and horde.stop() == 0, view_log.read_text() + horde_log.read_text()
    effort = client.received["/horde/predictions/grip_effort"]
    assert len(effort) > 500
    matched = 0
    for _, record in effort:
        msg = by_stamp.get(record_stamp(record))
        if msg is not None:
            matched += 1
            assert record["values"] == pytest.approx(list(msg.values[:3]))  # the array's first row: grip_effort
            assert record["update_count"] == msg.update_count
    assert matched > 0.9 * len(effort)
    errors = [r for _, r in client.received["/horde/errors/grip_effort"]]
    for record in errors:
        key = record_stamp(record)
        if key in scored:
            assert record["samples"] == list(scored[key].samples[:3])
    assert errors[-1]["samples"][0] > 500 and errors[-1]["ratio"][0] < 1.0  # it learned when the grip comes
    check_returns(client.received["/horde/returns/grip_effort"], realized, published)
    # what the layout of these questions plots: each of its series is a number in the records of its channel
    # (a return is null at a tick where none completed, so a returns series is a number in most, not all)
    layout = json.loads(horde_layout(load_questions(questions)).to_json())
    for series in _series(layout):
        topic, path = series["value"].split(".", 1)
        values = [field(record, path) for _, record in client.received[topic][-100:]]
        numbers = [
            all(isinstance(v, float) and math.isfinite(v) for v in (value if isinstance(value, list) else [value]))
            for value in values
        ]
        assert sum(numbers) > len(numbers) / 2, (series, values[-5:])
    if figure := os.environ.get("GAMMA_NET_LIVE_VIEW_FIGURE"):
        draw(client.received, figure)


def record_stamp(record: dict) -> tuple[int, int]:
    """A client record's header stamp as (sec, nanosec), the key the rig's messages are kept by."""
    return record["header"]["stamp"]["sec"], record["header"]["stamp"]["nsec"]


def check_returns(received: list, realized: dict, published: dict) -> None:
    """The client's returns of grip_effort (the first question) are the horde's, each beside its prediction then.

    ``realized``: the horde's RealizedReturns by stamp (a tick that learns nothing publishes again at
    the same update count); ``published``: its PredictionArrays by update count.
    """
    G = 3  # the published taus 1, 5, 25
    H = [horizon(1.0 - 1.0 / tau) for tau in ROBOT_QUESTIONS["publish_taus"]]
    records = [r for _, r in received]
    assert len(records) > 500
    matched = then = 0
    for record in records:
        msg = realized.get(record_stamp(record))
        if msg is None:
            continue
        matched += 1
        assert record["update_count"] == msg.update_count
        P = G + len(msg.readouts)
        assert record["returns"] == [v if math.isfinite(v) else None for v in msg.returns[:G]]  # JSON: NaN is null
        assert record["steps_ago"] == list(msg.steps_ago[:G])
        for k, (ret, ago) in enumerate(zip(record["returns"], record["steps_ago"])):
            if ret is None:
                assert ago == 0
                continue
            assert math.isfinite(ret) and ago == H[k]  # no termination: each return runs its horizon
            before = published.get(record["update_count"] - ago)  # the prediction published ago ticks before
            if before is not None:
                then += 1
                assert record["predictions"][k] == pytest.approx(before.values[k], rel=1e-12), (k, record, before)
                assert record["scaled_predictions"][k] == pytest.approx((1.0 - before.gammas[k]) * before.values[k])
        assert len(msg.returns) == len(msg.questions) * P
    assert matched > 0.9 * len(records) and then > 0.9 * len(records)
    # each tick completes the return of the prediction made H ticks before: once H ticks are past, almost
    # every tick has one (a tick skipped for a late message drops the returns pending across it)
    late = records[len(records) // 2 :]
    assert sum(r["returns"][1] is not None for r in late) > 0.9 * len(late)


def draw(received: dict, path: str) -> None:
    """The grip question as the client received it: (1 - gamma) V per tau over time, one tau's prediction
    beside its realized return, and the error ratios."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    predictions = received["/horde/predictions/grip_effort"]
    returns = received["/horde/returns/grip_effort"]
    errors = received["/horde/errors/grip_effort"]
    t0 = predictions[0][0]
    fig, (top, middle, bottom) = plt.subplots(3, 1, figsize=(8, 7.5), sharex=True)
    for k, tau in enumerate(predictions[-1][1]["taus"]):
        top.plot(
            [(t - t0) * 1e-9 for t, _ in predictions], [r["scaled"][k] for _, r in predictions], label=f"tau {tau:g}"
        )
        rows = [(t, r["ratio"][k]) for t, r in errors if r["ratio"][k] is not None]
        bottom.plot([(t - t0) * 1e-9 for t, _ in rows], [v for _, v in rows], marker=".", label=f"tau {tau:g}")
    k = 1  # the layout's tau: the middle one
    pairs = [(t, r) for t, r in returns if r["returns"][k] is not None]
    seconds = [(t - t0) * 1e-9 for t, _ in pairs]
    ago = pairs[-1][1]["steps_ago"][k]
    middle.plot(
        seconds, [r["scaled_predictions"][k] for _, r in pairs], label=f"(1 - gamma) V, made {ago} ticks before"
    )
    middle.plot(seconds, [r["scaled_returns"][k] for _, r in pairs], label="(1 - gamma) G, the return that came")
    top.set_ylabel("(1 - gamma) V")
    top.set_title("grip_effort, as a Foxglove client received it from live_view")
    top.legend(loc="upper left")
    middle.set_ylabel(f"tau {pairs[-1][1]['taus'][k]:g}")
    middle.legend(loc="upper left")
    bottom.axhline(1.0, color="grey", lw=0.8, ls="--")
    bottom.set_ylabel("RMSE / mean predictor's")
    bottom.set_xlabel("seconds (log time of the WebSocket messages)")
    bottom.legend(loc="upper right")
    fig.tight_layout()
    pathlib.Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def guide_commands() -> list[str]:
    """The commands of docs/live-view.md's bash blocks, in order."""
    text = guide_text("live-view")
    return [line.strip() for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S) for line in block.splitlines()]


@pytest.mark.ros
@pytest.mark.slow
def test_the_guide_runs_as_written(executor, tmp_path, live_view_port):
    """docs/live-view.md: the node on ws://localhost:8765 (a client connects there), the monitor, the layout command."""
    from gamma_net_msgs.msg import PredictionArray, PredictionErrors
    from ros2_cli import Background, close_all

    start, monitor_line, layout_line = guide_commands()
    assert start == "ros2 run gamma_net_ros live_view" and monitor_line.startswith(
        "ros2 run gamma_net_ros prediction_monitor"
    )
    url = re.search(r"`(ws://localhost:\d+)`", guide_text("live-view")).group(1)
    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", 8765)) != 0, "port 8765 is taken: the guide's node could not serve there"
    (tmp_path / "config").mkdir()
    shutil.copy(config_file("horde"), tmp_path / "config" / "horde.yaml")
    node = Node("guide_horde_stand_in")
    arrays = node.create_publisher(PredictionArray, "/horde/predictions", 10)
    errors = node.create_publisher(PredictionErrors, "/horde/errors", 10)
    executor.add_node(node)
    try:
        view = Background(start, cwd=tmp_path, log_path=tmp_path / "live_view.log", shell=True)
        assert view.wait_for("serving ws://127.0.0.1:8765", timeout=60), view.output
        client = FoxgloveClient(url)
        monitor = Background(monitor_line, cwd=tmp_path, log_path=tmp_path / "monitor.log", shell=True)
        sent = 0
        deadline = time.monotonic() + bound(60)
        wanted = {"/horde/predictions/speed", "/horde/errors/effort"}
        while time.monotonic() < deadline and (monitor.process.poll() is None or not set(client.received) >= wanted):
            arrays.publish(array_msg(update_count=sent))
            errors.publish(errors_msg())
            sent += 1
            spin_for(executor, 0.05)
            client.poll(0.01)
            for topic in set(client.channels) - set(client.subscriptions.values()):
                client.subscribe(topic)
        client.close()
        assert monitor.process.wait(timeout=bound(10)) == 0, monitor.output
        lines = [line for line in monitor.output.splitlines() if "(updates" in line]
        assert [line.split()[1] for line in lines] == ["speed", "effort"], monitor.output  # count:=1, one array
        assert set(client.received) >= wanted, sorted(client.channels)
        assert view.interrupt() == 0, view.output
        layout = subprocess.run(
            layout_line, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=bound(60)
        )
        assert layout.returncode == 0, layout.stderr
        shipped = json.loads((ROOT / "config" / "live_view.json").read_text())
        assert json.loads((tmp_path / "horde_layout.json").read_text()) == shipped
    finally:
        close_all()
