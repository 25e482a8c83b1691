"""A Horde split across processes (``horde.launch.py workers:=2``) against one process on the same stream.

The split is started as a user starts it (``ros2 launch``), the whole Horde with ``ros2 run`` in
its own namespace; all three tick on the same reliable JointState stream published here. They
start predict-only (``learn`` false: nothing learned while they come up, whenever each starts
taking input), then all learn from the same first message on, so every question's predictions
must be equal, bit for bit, stamp by stamp (the readouts, a matrix product
whose rounding depends on the rows beside each, to 1e-12).
"""

from __future__ import annotations

import math
import time

import pytest
import yaml
from gamma_net_msgs.msg import PredictionArray
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from ros2_cli import Background, close_all, launch, param_set
from sensor_msgs.msg import JointState
from waiting import spin_for, spin_until, wait_until

from gamma_net_ros.client import LatestPredictions, PredictAtClient

pytestmark = pytest.mark.ros
JOINTS = "sensor_msgs/msg/JointState"
STEPS = 40


@pytest.fixture(scope="module", autouse=True)
def _nothing_left_running():
    yield
    close_all()


def questions() -> dict:
    js = {"topic": "/joint_states", "type": JOINTS}
    doc = {
        "rate_hz": 20.0,
        "stale_after_s": 60.0,  # a busy machine's pause is no gap in this stream
        "seed": 5,
        "publish_taus": [1, 4, 10],
        "state": [
            {**js, "field": "position[0]", "low": -1.0, "high": 1.0},
            {**js, "field": "position[1]", "low": -1.0, "high": 1.0},
        ],
        "learner": {"tilings": [16], "memory_size": 512, "step_size": 0.2},
        "timescales": {"n_gamma": 1, "n_tau": 5, "tau_max": 10},
        "readouts": [{"name": "next_04s", "kind": "window", "seconds": 0.4}],
        "questions": [],
    }
    for i in range(7):
        q = {
            "name": f"q{i}",
            "cumulant": {**js, "field": f"velocity[{i % 2}]", "transform": ("abs", "identity")[i % 2]},
        }
        if i % 3 == 2:
            q["termination"] = {**js, "field": "position[1]", "threshold": 0.5}
        doc["questions"].append(q)
    return doc


def joints(step: int) -> JointState:
    phase = 2 * math.pi * step / 17
    msg = JointState(name=["a", "b"], position=[0.8 * math.cos(phase), 0.8 * math.sin(phase)])
    msg.velocity = [-math.sin(phase), math.cos(2 * phase)]
    msg.header.stamp.sec = 1000 + step  # each tick's array carries its message's stamp
    return msg


class Collector:
    """Every PredictionArray on a topic: {stamp seconds: {question: (values, readout values)}}."""

    def __init__(self, node: Node, topic: str) -> None:
        self.rows: dict[int, dict[str, tuple[list, list]]] = {}
        node.create_subscription(PredictionArray, topic, self.take, 100)

    def take(self, msg: PredictionArray) -> None:
        G, R = len(msg.gammas), len(msg.readouts)
        rows = self.rows.setdefault(msg.header.stamp.sec, {})
        for r, q in enumerate(msg.questions):
            assert q not in rows, f"question {q} published twice for stamp {msg.header.stamp.sec}"
            rows[q] = (list(msg.values[r * G : (r + 1) * G]), list(msg.readout_values[r * R : (r + 1) * R]))


def test_two_workers_predict_each_question_exactly_as_one_process_and_a_client_sees_every_question(executor, tmp_path):
    path = tmp_path / "questions.yaml"
    path.write_text(yaml.safe_dump(questions()))
    names = {f"q{i}" for i in range(7)}
    common = [f"questions_file:={path}", "tick_topic:=/joint_states", "reliable_input:=true", "learn:=false"]
    split = launch(
        "gamma_net_ros", "horde.launch.py", "workers:=2", *common, cwd=tmp_path, log_path=tmp_path / "split.txt"
    )
    whole = Background(
        ["ros2", "run", "gamma_net_ros", "horde", "--ros-args", "-r", "__ns:=/whole"]
        + [arg for c in common for arg in ("-p", c)],
        cwd=tmp_path,
        log_path=tmp_path / "whole.txt",
    )
    node = Node("split_test")
    publisher = node.create_publisher(
        JointState, "/joint_states", QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
    )
    split_arrays, whole_arrays = Collector(node, "/horde/predictions"), Collector(node, "/whole/horde/predictions")
    latest = LatestPredictions(node)
    executor.add_node(node)
    try:
        # Predict-only until every process publishes: all are taking input, none has learned.
        primed = {"at": 0.0, "step": 0}

        def every_process_publishes() -> bool:
            if time.monotonic() - primed["at"] >= 0.05:  # at the questions' 20 Hz
                primed["at"] = time.monotonic()
                primed["step"] += 1
                publisher.publish(joints(-900 + primed["step"] % 800))  # stamps 100 s to 899 s: priming
            if split.process.poll() is not None or whole.process.poll() is not None:
                raise AssertionError(split.output + whole.output)
            seen = set().union(*(rows for stamp, rows in split_arrays.rows.items() if stamp < 1000))
            return seen == names and any(s < 1000 for s in whole_arrays.rows)

        assert spin_until(executor, every_process_publishes, timeout=180, step=0.1), split.output + whole.output
        for target in ("/horde_1", "/horde_2", "/whole/horde"):
            assert "Set parameter successful" in param_set(target, "learn", "true")
        split_arrays.rows.clear()
        whole_arrays.rows.clear()
        for i in range(STEPS):
            publisher.publish(joints(i))
            spin_for(executor, 0.05)  # paced at the questions' rate

        def complete() -> bool:
            want = set(range(1001, 1000 + STEPS))  # the first learning tick only records its state
            return all(
                set(c.rows) >= want and all(set(c.rows[s]) == names for s in want) for c in (split_arrays, whole_arrays)
            )

        assert spin_until(executor, complete, timeout=60), (sorted(split_arrays.rows), sorted(whole_arrays.rows))
        for stamp in range(1001, 1000 + STEPS):
            split_rows, whole_rows = split_arrays.rows[stamp], whole_arrays.rows[stamp]
            for q in names:  # predictions bit for bit; readouts (a matrix product over the share's rows) to rounding
                assert split_rows[q][0] == whole_rows[q][0], (stamp, q)
                assert split_rows[q][1] == pytest.approx(whole_rows[q][1], rel=1e-12, abs=1e-12), (stamp, q)
        last = whole_arrays.rows[1000 + STEPS - 1]
        assert max(abs(v) for values, _ in last.values() for v in values) > 0.05  # they did learn

        # The client reads the two workers' latest arrays as one set of questions, by name.
        assert spin_until(executor, lambda: latest.view is not None and set(latest.view.questions) == names, timeout=10)
        for q in names:
            assert [latest.view.value(q, tau=t).value for t in (1, 4, 10)] == pytest.approx(last[q][0], abs=0, rel=0)
        assert not latest.conflicts
        # Each worker answers its own questions on its own service.
        share_1 = [q for q in sorted(names)[0::2]]
        answer = PredictAtClient(node, "horde_1/predict_at").call(share_1[0], taus=[4.0], timeout_s=30)
        assert answer.values.tolist() == [last[share_1[0]][0][1]]
    finally:
        executor.remove_node(node)
        node.destroy_node()
        for run in (split, whole):
            assert run.interrupt() == 0, run.output
            assert "Traceback" not in run.output, run.output


def test_latest_predictions_merge_publishers_by_name_and_say_a_question_answered_twice_once(rclpy_session):
    """Two real publishers of PredictionArray, as two workers; then the second also answers q1."""
    import rclpy

    first, second, reader = Node("merge_test_first"), Node("merge_test_second"), Node("merge_test_reader")
    latest = LatestPredictions(reader)
    topics = [node.create_publisher(PredictionArray, "horde/predictions", 10) for node in (first, second)]

    def array(questions, base, stamp):
        msg = PredictionArray(questions=questions, gammas=[0.0, 0.5], readouts=["r"], update_count=stamp)
        msg.values = [base + 10 * q + g for q in range(len(questions)) for g in range(2)]
        msg.readout_values = [base + 10 * q for q in range(len(questions))]
        msg.header.stamp.sec = stamp
        return msg

    def spin_until(predicate) -> bool:
        return wait_until(lambda: rclpy.spin_once(reader, timeout_sec=0.05) or predicate(), timeout=30)

    try:
        assert spin_until(lambda: all(t.get_subscription_count() > 0 for t in topics))
        topics[0].publish(array(["q0", "q1"], 100.0, 7))
        assert spin_until(lambda: latest.received == 1)
        topics[1].publish(array(["q2"], 200.0, 5))
        assert spin_until(lambda: latest.received == 2)
        view = latest.view
        assert sorted(view.questions) == ["q0", "q1", "q2"] and not latest.conflicts
        assert view.value("q1", gamma=0.5).value == 111.0 and view.value("q2", gamma=0.0).value == 200.0
        assert view.readout("q0", "r") == 100.0 and view.readout("q2", "r") == 200.0
        assert view.stamp.sec == 5 and view.update_count == 5  # the oldest of the parts
        for _ in range(2):
            topics[1].publish(array(["q2", "q1"], 300.0, 9))
        assert spin_until(lambda: latest.received == 4)
        assert latest.conflicts == {"q1"}  # said once, however often it comes
        assert latest.view.value("q1", gamma=0.0).value == 310.0  # the newest array's answer
        assert sorted(latest.view.questions) == ["q0", "q1", "q2"]
    finally:
        for node in (first, second, reader):
            node.destroy_node()


def test_a_share_that_names_no_question_of_the_file_is_refused_at_start_in_one_line(tmp_path):
    import subprocess

    from waiting import bound

    from gamma_net_ros.processes import node_command

    path = tmp_path / "questions.yaml"
    path.write_text(yaml.safe_dump(questions()))
    cmd = node_command("gamma_net_ros.horde.node", params={"questions_file": str(path), "share": "q1,q9"})
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=bound(60))
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    lines = [line for line in out.splitlines() if "refusing to start" in line]
    assert len(lines) == 1 and "share 'q1,q9': no question 'q9' in the questions file" in lines[0], out
    assert "Traceback" not in out
