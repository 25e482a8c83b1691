"""The consumer API (gamma_net_ros/client.py) and the example node of docs/horde.md, against a running horde.

The horde runs as users start it (`ros2 run gamma_net_ros horde`), on its own 10 Hz clock, and
learns from a JointState the test publishes: the shoulder's effort is the cumulant (a level the
test sets), its position a constant state. Predictions read through the client are checked
against the messages they come from; the blocking and awaited ``predict_at`` helpers against the
last published message once the horde has stopped ticking (its input gone stale, so its state
is that message's).
"""

from __future__ import annotations

import itertools
import os
import pathlib
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest
import yaml
from gamma_net_msgs.msg import Prediction, PredictionArray
from guides import guide_text
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import qos_profile_sensor_data
from ros2_cli import Background, close_all
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool
from waiting import bound, wait_until

from gamma_net_ros.client import LatestPredictions, PredictAtClient, PredictionError, PredictionView

pytestmark = [pytest.mark.ros, pytest.mark.slow]

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "prediction_alert.py"
JS = {"topic": "/joint_states", "type": "sensor_msgs/msg/JointState"}
TAUS = [1.0, 4.0, 10.0]
QUESTIONS = {
    "rate_hz": 10.0,
    "stale_after_s": 0.5,
    "publish_taus": TAUS,
    "state": [{**JS, "field": "position[shoulder]", "low": -1.0, "high": 1.0}],
    "learner": {"tilings": [8], "memory_size": 256, "step_size": 0.05},
    "timescales": {"n_gamma": 1, "n_tau": 3, "tau_max": 20},
    "readouts": [
        {"name": "in_half_s", "kind": "forecast", "seconds": 0.5},
        {"name": "next_1s", "kind": "window", "seconds": 1.0},
    ],
    "questions": [
        {"name": "effort", "cumulant": {**JS, "field": "effort[shoulder]"}},
        {"name": "speed", "cumulant": {**JS, "field": "velocity[shoulder]", "transform": "abs"}},
    ],
}


@pytest.fixture(scope="module", autouse=True)
def _nothing_left_running():
    yield
    close_all()


class Arm(Node):
    """Publishes the shoulder's JointState at 20 Hz while ``playing``, with the effort it is told."""

    def __init__(self) -> None:
        super().__init__("client_test_arm")
        self.effort = 1.0
        self.playing = True
        self.joints = self.create_publisher(JointState, "/joint_states", qos_profile_sensor_data)
        self.create_timer(0.05, self.publish)

    def publish(self) -> None:
        if self.playing:
            msg = JointState(name=["shoulder"], position=[0.0], velocity=[0.5], effort=[self.effort])
            msg.header.stamp = self.get_clock().now().to_msg()
            self.joints.publish(msg)


@pytest.fixture
def horde(tmp_path):
    """`ros2 run gamma_net_ros horde` on the test's questions; stopped with Ctrl-C, which must exit 0."""
    path = tmp_path / "questions.yaml"
    path.write_text(yaml.safe_dump(QUESTIONS))
    command = ["ros2", "run", "gamma_net_ros", "horde", "--ros-args", "-p", f"questions_file:={path}"]
    run = Background(command, cwd=tmp_path, log_path=tmp_path / "horde.txt")
    assert run.wait_for("2 questions ['effort', 'speed']", timeout=120), run.output
    yield run
    assert run.interrupt() == 0, run.output
    assert "Traceback" not in run.output, run.output


def test_prediction_view_reads_a_running_horde_by_name_and_interpolates_between_taus(executor, spin, horde):
    arm, reader = Arm(), Node("client_test_reader")
    views = []
    latest = LatestPredictions(reader, on_update=views.append)
    executor.add_node(arm)
    executor.add_node(reader)
    assert latest.view is None and latest.age_s() == float("inf")
    # learned a while: the predictions of the effort level 1 grow with tau
    assert spin(executor, lambda: latest.view is not None and latest.view.update_count >= 30, timeout=120)
    view, msg = latest.view, latest.view.msg
    assert views[-1] is view and latest.received == len(views) and latest.age_s() < 60
    assert view.questions == ["effort", "speed"] and view.readouts == ["in_half_s", "next_1s"]
    np.testing.assert_allclose(view.taus, TAUS)
    table = np.reshape(msg.values, (2, 3))
    for q, question in enumerate(view.questions):
        for k, tau in enumerate(TAUS):
            reading = view.value(question, tau=tau)
            assert (reading.question, reading.tau, reading.value) == (question, tau, table[q, k])
            assert not reading.interpolated and reading.update_count == msg.update_count
        assert view.value(question, gamma=0.75).value == table[q, 1]  # tau 4 given as gamma
        assert view.value(question, tau=10.0 + 1e-12).value == table[q, 2]  # published up to rounding
    # between published taus: linear in tau, and said so
    reading = view.value("effort", tau=6.0)
    assert reading.interpolated and reading.tau == 6.0
    assert reading.value == pytest.approx(table[0, 1] + (6.0 - 4.0) / (10.0 - 4.0) * (table[0, 2] - table[0, 1]))
    assert table[0, 0] < table[0, 1] < table[0, 2]  # learned: a level's return grows with tau
    # the readouts by name, the forecast among them, as published
    readouts = np.reshape(msg.readout_values, (2, 2))
    assert view.readout("speed", "in_half_s") == readouts[1, 0] and view.readout("effort", "next_1s") == readouts[0, 1]
    assert np.all(np.isfinite(readouts))
    # errors name what is missing and what there is
    with pytest.raises(ValueError, match=r"no question 'gripper' in the predictions; questions: \['effort', 'speed'\]"):
        view.value("gripper", tau=4.0)
    with pytest.raises(ValueError, match=r"tau 50 of 'effort' is outside the published timescales \(tau 1, 4, 10\)"):
        view.value("effort", tau=50.0)
    with pytest.raises(
        ValueError, match=r"no readout 'in_2s' in the predictions; readouts: \['in_half_s', 'next_1s'\]"
    ):
        view.readout("effort", "in_2s")
    with pytest.raises(ValueError, match=r"tau must be a finite number >= 1; got 0\.5"):
        view.value("effort", tau=0.5)


def test_predict_at_helpers_answer_at_exact_timescales_blocking_and_awaited(executor, spin, horde):
    arm, reader = Arm(), Node("client_test_reader")
    latest = LatestPredictions(reader)
    client = PredictAtClient(reader)
    executor.add_node(arm)
    executor.add_node(reader)
    assert spin(executor, lambda: latest.view is not None and latest.view.update_count >= 5, timeout=120)
    arm.playing = False  # the input goes stale: the horde stops ticking, its state is the last message's
    assert spin(executor, lambda: latest.age_s() > 2.0, timeout=60)  # nothing published for 2 s
    last = np.reshape(latest.view.msg.values, (2, 3))

    answer = client.call("effort", taus=TAUS)  # blocking: spins the reader's executor until it comes
    np.testing.assert_allclose(answer.taus, TAUS)
    np.testing.assert_array_equal(answer.values, last[0])
    assert answer.question == "effort" and answer.update_count == latest.view.update_count
    assert answer.stamp == latest.view.stamp

    async def ask():
        return await client.call_async("speed", gammas=[0.0, 0.9])

    task = executor.create_task(ask)
    assert spin(executor, task.done, timeout=30)
    awaited = task.result()
    np.testing.assert_allclose(awaited.gammas, [0.0, 0.9])
    assert awaited.values[0] == last[1, 0] and awaited.update_count == answer.update_count

    with pytest.raises(PredictionError, match="predict_at refused 'gripper': no question 'gripper'; questions:"):
        client.call("gripper", taus=[4.0])
    with pytest.raises(PredictionError, match="beyond the largest timescale the learner was trained on, tau 20"):
        client.call("effort", taus=[50.0])


def learned_then_still(executor, spin, reader: Node) -> LatestPredictions:
    """Lets the horde learn a few steps from the arm, then stops the arm: its state is the last message's."""
    arm = Arm()
    latest = LatestPredictions(reader)
    executor.add_node(arm)
    executor.add_node(reader)
    assert spin(executor, lambda: latest.view is not None and latest.view.update_count >= 5, timeout=120)
    arm.playing = False
    assert spin(executor, lambda: latest.age_s() > 2.0, timeout=60)  # nothing published for 2 s: stale
    executor.remove_node(reader)
    return latest


SCRIPT = """
import sys
import time
import rclpy
from rclpy.node import Node
from rclpy.task import Future
from gamma_net_ros.client import PredictAtClient, PredictionError

timeout = float(sys.argv[1])
rclpy.init()
node = Node("client_script")
client = PredictAtClient(node)
for i in range(5):
    answer = client.call("effort", taus=[1.0, 4.0, 10.0], timeout_s=timeout)
    print("answer", i, answer.update_count, *answer.values)
rclpy.spin_once(node, timeout_sec=0.1)
print("after spin_once", client.call("effort", taus=[4.0], timeout_s=timeout).values[0])
rclpy.spin_until_future_complete(node, Future(), timeout_sec=0.1)
print("after spin_until_future_complete", client.call("effort", taus=[4.0], timeout_s=timeout).values[0])
for question, taus in [("gripper", [4.0]), ("effort", [50.0])]:
    asked = time.monotonic()
    try:
        client.call(question, taus=taus, timeout_s=timeout)
    except PredictionError as exc:
        print("refused", exc)
    print("refusal took", time.monotonic() - asked)
try:
    PredictAtClient(node, "/nowhere/predict_at").call("effort", taus=[4.0], timeout_s=1.0)
except PredictionError as exc:
    print("missing", exc)
node.destroy_node()
rclpy.shutdown()
"""


def test_predict_at_call_from_a_plain_script_answers_every_time(executor, spin, horde, tmp_path):
    latest = learned_then_still(executor, spin, Node("client_test_reader"))
    last = np.reshape(latest.view.msg.values, (2, 3))[0]
    script = tmp_path / "ask.py"
    script.write_text(SCRIPT)
    # The refusals must come well within this: a refusal that waited for the timeout would hang the test.
    timeout = bound(60)
    result = subprocess.run(
        [sys.executable, str(script), str(timeout)], capture_output=True, text=True, timeout=bound(120)
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "Traceback" not in output, output
    answers = [line.split()[1:] for line in result.stdout.splitlines() if line.startswith("answer ")]
    assert [a[0] for a in answers] == ["0", "1", "2", "3", "4"], output  # five in a row, all answered
    for answer in answers:
        assert int(answer[1]) == latest.view.update_count, output
        np.testing.assert_array_equal([float(v) for v in answer[2:]], last)
    assert f"after spin_once {float(last[1])!r}" in result.stdout, output
    assert f"after spin_until_future_complete {float(last[1])!r}" in result.stdout, output
    assert "refused predict_at refused 'gripper': no question 'gripper'; questions: ['effort', 'speed']" in output
    assert "beyond the largest timescale the learner was trained on, tau 20" in output
    assert "missing no /nowhere/predict_at service after 1 s" in output
    # Refused as soon as the node answers, not when the timeout runs out.
    took = [float(line.split()[-1]) for line in result.stdout.splitlines() if line.startswith("refusal took")]
    assert len(took) == 2 and max(took) < timeout / 4, output


def test_predict_at_from_another_threads_executor_and_from_callbacks(executor, spin, horde):
    reader = Node("client_test_reader")
    latest = learned_then_still(executor, spin, reader)
    last = np.reshape(latest.view.msg.values, (2, 3))
    client = PredictAtClient(reader)

    # The reader spun by an executor in another thread; asked from this one.
    spinning = SingleThreadedExecutor()
    spinning.add_node(reader)
    thread = threading.Thread(target=spinning.spin, daemon=True)
    thread.start()
    try:
        for _ in range(3):
            assert client.call("effort", taus=[4.0], timeout_s=bound(30)).values[0] == last[0, 1]
        with pytest.raises(PredictionError, match="no question 'gripper'"):
            client.call("gripper", taus=[4.0], timeout_s=bound(30))
    finally:
        spinning.shutdown()
        thread.join(timeout=bound(10))
    assert not thread.is_alive()

    # From callbacks of the reader's executor: a coroutine timer awaiting call_async, holding the
    # node's default (mutually exclusive) group while it waits; a plain timer blocking on call().
    executor.add_node(reader)
    got = {}

    async def awaited():
        if "awaited" in got:
            return
        got["awaited"] = None
        got["awaited"] = (await client.call_async("speed", gammas=[0.0], timeout_s=bound(30))).values[0]
        try:
            await PredictAtClient(reader, "/nowhere/predict_at").call_async("effort", taus=[4.0], timeout_s=1.0)
        except PredictionError as exc:
            got["missing"] = str(exc)

    def blocking():
        if "blocking" not in got:
            got["blocking"] = client.call("effort", taus=[10.0], timeout_s=bound(30)).values[0]

    timers = [reader.create_timer(0.05, awaited), reader.create_timer(0.05, blocking)]
    assert spin(executor, lambda: {"awaited", "missing", "blocking"} <= got.keys(), timeout=60), got
    for timer in timers:
        reader.destroy_timer(timer)
    assert got == {"awaited": last[1, 0], "blocking": last[0, 2], "missing": "no /nowhere/predict_at service after 1 s"}


def test_prediction_view_of_a_predictor_message_and_of_malformed_ones():
    msg = Prediction(question="shoulder/velocity/abs", gammas=[0.0, 0.9], values=[0.5, 4.0], update_count=7)
    view = PredictionView(msg)
    assert view.questions == ["shoulder/velocity/abs"] and view.readouts == []
    assert view.value("shoulder/velocity/abs", gamma=0.9).value == 4.0
    reading = view.value("shoulder/velocity/abs", tau=5.5)  # halfway between tau 1 and 10
    assert reading.interpolated and reading.value == pytest.approx(2.25) and reading.update_count == 7
    with pytest.raises(ValueError, match="exactly one of tau or gamma"):
        view.value("shoulder/velocity/abs")
    bad = PredictionArray(questions=["a", "b"], gammas=[0.5], values=[1.0], readouts=[])
    with pytest.raises(ValueError, match="malformed prediction message: 1 values for 2 questions x 1 gammas"):
        PredictionView(bad)


def test_prediction_view_of_another_message_type_is_a_type_error_naming_it():
    with pytest.raises(
        TypeError,
        match=r"^PredictionView reads a gamma_net_msgs PredictionArray or Prediction; got sensor_msgs/msg/JointState$",
    ):
        PredictionView(JointState())
    with pytest.raises(TypeError, match=r"got builtins\.dict$"):
        PredictionView({"values": [1.0]})


def test_a_malformed_prediction_array_is_dropped_and_the_last_good_view_kept(rclpy_session):
    """Published for real and taken in the user's own ``rclpy.spin_once``, which must not raise."""
    import rclpy

    publisher, reader = Node("client_test_publisher"), Node("client_test_reader")
    views = []
    latest = LatestPredictions(reader, on_update=views.append)
    topic = publisher.create_publisher(PredictionArray, "horde/predictions", 10)
    good = PredictionArray(questions=["effort"], gammas=[0.0, 0.5, 0.9], values=[1.0, 2.0, 10.0], update_count=3)
    bad = PredictionArray(questions=["effort"], gammas=[0.0, 0.5, 0.9], values=[1.0, 2.0], update_count=4)
    try:

        def spin_until(predicate) -> bool:
            return wait_until(lambda: rclpy.spin_once(reader, timeout_sec=0.05) or predicate(), timeout=30)

        assert spin_until(lambda: topic.get_subscription_count() > 0)
        topic.publish(good)
        assert spin_until(lambda: latest.received == 1)
        for _ in range(2):
            topic.publish(bad)
        assert spin_until(lambda: latest.dropped == 2)  # taken in spin_once, which raised nothing
        topic.publish(good)
        assert spin_until(lambda: latest.received == 2)
        assert latest.view.update_count == 3 and len(views) == 2
        assert latest.view.value("effort", tau=10.0).value == 10.0
    finally:
        publisher.destroy_node()
        reader.destroy_node()


def test_importing_the_client_starts_nothing_and_installs_no_signal_handler():
    code = (
        "import signal, threading\n"
        "before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}\n"
        "import gamma_net_ros.client, rclpy\n"
        "assert {s: signal.getsignal(s) for s in before} == before, 'signal handlers changed'\n"
        "assert threading.active_count() == 1, threading.enumerate()\n"
        "assert not rclpy.ok(), 'rclpy was initialised'\n"
        "print('nothing started')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=bound(120))
    assert result.returncode == 0 and result.stdout == "nothing started\n", result.stdout + result.stderr


def guide_example() -> str:
    """The example node as docs/horde.md shows it (between its markers)."""
    text = guide_text("horde")
    block = text.split("<!-- example: examples/prediction_alert.py -->")[1]
    return block.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_readme_example_node_runs_as_written_and_reports_each_crossing(executor, spin, horde, tmp_path):
    assert guide_example() == EXAMPLE.read_text()  # the guide shows the file as it is
    text = guide_text("horde")
    line = next(x for x in text.splitlines() if x.startswith("python examples/prediction_alert.py"))
    line = line.split("  #")[0].replace("question:=elbow_speed", "question:=effort").replace("tau:=5.0", "tau:=6.0")
    # the test's horde: the average of effort 1 over the next steps learns to 1, of effort 0 stays 0
    line = line.replace("threshold:=0.31", "threshold:=0.5")
    arm, watcher = Arm(), Node("client_test_watcher")
    arm.effort = 0.0  # predicted 0 however long it learns: below, whenever the example starts hearing
    alerts = []
    heard = watcher.create_subscription(Bool, "prediction_alert", lambda m: alerts.append(m.data), 10)
    executor.add_node(arm)
    executor.add_node(watcher)
    example = Background(line, cwd=ROOT, log_path=tmp_path / "example.txt", shell=True)
    # Alerts go out at crossings only, so one sent before discovery matched the two is lost: wait for the match.
    matched = spin(executor, lambda: heard.get_publisher_count() > 0 or "Traceback" in example.output, timeout=120)
    assert matched and "Traceback" not in example.output, (
        f"the example's publisher was never discovered\n{example.output}"
    )

    def crossings() -> list[str]:
        return [x for x in example.output.splitlines() if "effort at tau 6 (interpolated)" in x]

    def cross(effort: float) -> None:
        """Set the effort level and wait for the example's next crossing line."""
        seen = len(crossings())
        arm.effort = effort
        assert spin(executor, lambda: len(crossings()) > seen, timeout=180), example.output

    # 0 is below; learning effort 1: above; effort 0 from then on: below again
    assert spin(executor, lambda: len(crossings()) == 1 or "Traceback" in example.output, timeout=120), example.output
    cross(1.0)
    cross(0.0)
    # The example's topic reaches us once discovery has matched it with our subscription, which on
    # a loaded machine can take longer than those crossings: cross on until we have heard some.
    for effort in [1.0, 0.0] * 5:
        if alerts:
            break
        cross(effort)
    last_above = crossings()[-1].endswith("above 0.5")
    assert spin(executor, lambda: alerts and alerts[-1] == last_above, timeout=30), (alerts, example.output)
    code = example.interrupt()  # Ctrl-C
    output = example.output
    assert code == 0, output
    assert "Traceback" not in output, output
    sides = [x.rsplit(" ", 2)[-2] for x in output.splitlines() if "effort at tau 6 (interpolated)" in x]
    assert sides[:3] == ["below", "above", "below"], output
    assert all(a != b for a, b in itertools.pairwise(sides)), output  # a line at each crossing only
    # what it published: the last crossings, as logged (the first ones may precede the matching)
    assert alerts == [side == "above" for side in sides[-len(alerts) :]], (alerts, output)


@pytest.mark.parametrize("how", ["ctrl-c", "ctrl-c with SIGINT ignored by the shell", "SIGTERM"])
def test_the_example_node_ends_cleanly_when_stopped_as_it_publishes(executor, spin, tmp_path, how):
    """Stopped in the middle of a crossing's publish, the example still exits 0 without a traceback.

    rclpy's own SIGINT handler ends the context at once, and a publish then under way fails; the
    example makes a stop a KeyboardInterrupt instead. Here every prediction crosses the threshold,
    so the example publishes at each of 500 messages a second.
    """
    flipping = Node("client_test_flipping_horde")
    arrays = flipping.create_publisher(PredictionArray, "horde/predictions", 10)
    count = itertools.count()

    def publish() -> None:
        n = next(count)
        arrays.publish(
            PredictionArray(questions=["q"], gammas=[0.0, 0.75], values=[0.0, 4.0 * (n % 2)], update_count=n)
        )

    flipping.create_timer(0.002, publish)
    executor.add_node(flipping)
    line = f"python {EXAMPLE} --ros-args -p question:=q -p tau:=4.0 -p threshold:=0.5"
    if how == "ctrl-c with SIGINT ignored by the shell":  # as a background job of a script inherits it
        line = f"trap '' INT; {line}"
    example = Background(line, cwd=ROOT, log_path=tmp_path / "example.txt", shell=True)
    crossed = lambda: example.output.count("q at tau 4 (published)") >= 50 or example.process.poll() is not None  # noqa: E731
    assert spin(executor, crossed, timeout=120), example.output
    if how == "SIGTERM":
        os.killpg(example.process.pid, signal.SIGTERM)
        code = example.process.wait(timeout=bound(30))
        example.close()
    else:
        code = example.interrupt()
    output = example.output
    assert code == 0 and "Traceback" not in output, output
    assert output.count("q at tau 4 (published)") >= 50, output


def test_the_average_is_one_minus_gamma_times_v_and_is_interpolated_as_such():
    msg = Prediction(question="shoulder/velocity/abs", gammas=[0.0, 0.9], values=[0.5, 4.0], update_count=7)
    view = PredictionView(msg)
    reading = view.average("shoulder/velocity/abs", gamma=0.9)  # (1 - 0.9) x 4.0
    assert reading.scaled and not reading.interpolated and reading.value == pytest.approx(0.4)
    assert view.average("shoulder/velocity/abs", tau=1.0).value == 0.5  # tau 1: V is the next signal
    # halfway between tau 1 and 10, on the averages 0.5 and 0.4 (not V / tau of V's interpolation, 2.25 / 5.5)
    reading = view.average("shoulder/velocity/abs", tau=5.5)
    assert reading.interpolated and reading.value == pytest.approx(0.45) and reading.tau == 5.5
    assert view.value("shoulder/velocity/abs", tau=5.5, scaled=True) == reading
    assert not view.value("shoulder/velocity/abs", tau=5.5).scaled
    with pytest.raises(ValueError, match="tau 20 of 'shoulder/velocity/abs' is outside the published timescales"):
        view.average("shoulder/velocity/abs", tau=20.0)
