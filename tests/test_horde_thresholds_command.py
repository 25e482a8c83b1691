"""`gamma-net horde thresholds` as a user runs it, on a recording whose answer is planted.

The recording: a gripper's JointState at 50 Hz, repeating a 4 s cycle (100 ticks at the
questions' 25 Hz): its position is the phase (the state), its effort (the question ``load``)
is 0, then 1.0 from tick 60, 2.0 from tick 85, and a spike of 5.0 on ticks 95-99. The event is
the spike (``load above 3``). At tau 1, (1 - gamma) V is the next tick's load, so an alert above
a threshold between two of the load's levels rises one tick before the level it lies under:
0.5 -> tick 59 (lead 36 ticks, 1.44 s), 1.5 -> tick 84 (0.44 s), 3.5 -> tick 94 (0.04 s); above
5 it never rises. Every spike is caught at those, with no false alarm.
"""

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

from gamma_net_core.horde.thresholds_command import best_row, range_warning

RATE = 25.0
CYCLES = 15
JS = {"topic": "/gripper/joint_states", "type": "sensor_msgs/msg/JointState"}


def load_at(message: int) -> float:
    """The planted load of a 50 Hz message; levels change at odd messages, so each tick's latest is unambiguous."""
    m = message % 200
    return 1.0 if 119 <= m < 169 else 2.0 if 169 <= m < 189 else 5.0 if 189 <= m < 199 else 0.0


def write_bag(path: pathlib.Path) -> pathlib.Path:
    store = get_typestore(Stores.ROS2_HUMBLE)
    T = store.types
    writer = Writer(path, version=9, storage_plugin=StoragePlugin.MCAP)
    writer.open()
    connection = writer.add_connection(JS["topic"], JS["type"], typestore=store)
    start = 1_000_000_000
    for n in range(CYCLES * 200):
        ns = start + n * 20_000_000
        header = T["std_msgs/msg/Header"](
            stamp=T["builtin_interfaces/msg/Time"](sec=ns // 10**9, nanosec=ns % 10**9), frame_id=""
        )
        msg = T["sensor_msgs/msg/JointState"](
            header=header,
            name=["grip"],
            position=np.array([(n % 200) / 200]),
            velocity=np.zeros(1),
            effort=np.array([load_at(n)]),
        )
        writer.write(connection, ns, store.serialize_cdr(msg, JS["type"]))
    writer.close()
    return path


def questions_file(folder: pathlib.Path) -> pathlib.Path:
    doc = {
        "rate_hz": RATE,
        "publish_taus": [1, 4],
        "state": [{**JS, "field": "position[grip]", "low": 0.0, "high": 1.0}],
        "learner": {"tilings": [16], "tile_widths": [0.05], "memory_size": 0, "step_size": 0.5},
        "timescales": {"n_gamma": 1, "n_tau": 2, "tau_max": 4},
        "questions": [{"name": "load", "cumulant": {**JS, "field": "effort[grip]"}}],
    }
    path = folder / "questions.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    folder = tmp_path_factory.mktemp("planted")
    return write_bag(folder / "gripper"), questions_file(folder)


def thresholds(*args: str, cwd=None) -> subprocess.CompletedProcess:
    command = ["gamma-net", "horde", "thresholds", "--no-progress", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=bound(300), cwd=cwd)


PLANTED = [(0.5, 36), (1.5, 11), (3.5, 1)]  # threshold, lead in ticks


@pytest.mark.slow
def test_the_planted_leads_and_counts_are_found_then_read_again_from_the_checkpoint(planted, tmp_path):
    bag, questions = planted
    out = tmp_path / "out"
    given = [str(h) for h, _ in PLANTED] + ["6.0"]
    result = thresholds(
        "--bag", str(bag), "--questions", str(questions), "--question", "load", "--tau", "1",
        "--event", "load above 3", "--window-s", "2", "--thresholds", *given, "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    data = json.loads((out / "horde_thresholds.json").read_text())
    assert data["events"] == CYCLES and data["window_steps"] == 50
    np.testing.assert_allclose(data["event_times_s"], 3.8 + 4.0 * np.arange(CYCLES), atol=1e-6)
    rows = {r["threshold"]: r for r in data["rows"]}
    for h, lead in PLANTED:
        row = rows[h]
        assert row["caught"] == CYCLES and row["false_alarms"] == 0, row
        # learned, not given: within a tick of the planted lead (the first cycle's alarm may come late)
        assert row["median_lead_s"] == pytest.approx(lead / RATE, abs=1.01 / RATE), row
        assert row["alarms"] <= CYCLES + 1, row
    assert rows[6.0]["alarms"] == 0 and rows[6.0]["caught"] == 0
    assert (out / "horde_thresholds.png").stat().st_size > 1000
    # the printed table and the closing line say the same
    assert "median lead (s)" in result.stdout and "15/15" in result.stdout
    assert result.stdout.strip().splitlines()[-1].startswith("most events caught: threshold 0.5 catches 15/15")
    assert "warning" not in result.stderr  # 0.5 lies within the load's range

    # The saved learner, given as the checkpoint, predicts the same: the same table, no learning.
    again = tmp_path / "again"
    result = thresholds(
        "--bag", str(bag), "--questions", str(questions), "--checkpoint", str(out / "horde.npz"), "--tau", "1",
        "--event", "/gripper/joint_states effort[grip] above 3", "--question", "load", "--window-s", "2",
        "--thresholds", *given, "--out", str(again),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    second = json.loads((again / "horde_thresholds.json").read_text())
    assert second["rows"] == data["rows"] and second["event_times_s"] == data["event_times_s"]
    assert not (again / "horde.npz").exists()  # it trained nothing


@pytest.mark.slow
def test_chosen_thresholds_span_the_prediction_and_include_one_that_catches_every_spike(planted, tmp_path):
    bag, questions = planted
    out = tmp_path / "out"
    result = thresholds(
        "--bag", str(bag), "--questions", str(questions), "--tau", "4", "--event", "load above 3", "--out", str(out)
    )
    assert result.returncode == 0, result.stderr
    data = json.loads((out / "horde_thresholds.json").read_text())
    assert data["question"] == "load" and data["window_s"] == pytest.approx(3 * 4 / RATE)  # the defaults
    levels = [r["threshold"] for r in data["rows"]]
    assert 2 <= len(levels) <= 12 and levels == sorted(levels)
    assert any(r["caught"] == CYCLES and r["false_alarms"] == 0 for r in data["rows"]), data["rows"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--event", "load above 3", "--question", "grip"], "--question 'grip' is not in"),
        (["--event", "effort above 3"], "--event: no question 'effort' in"),
        (["--event", "load over 3"], "--event 'load over 3': expected 'QUESTION above|below LEVEL'"),
        (["--event", "/gripper/joint_states effort[grip] above 3"], "--question: name the alert's question"),
        (["--event", "load above 3", "--tau", "8"], "--tau 8 is beyond the trained tau_max 4"),
        (["--event", "load above 3", "--window-s", "-1"], "--window-s must be >= 0; got -1.0"),
        (["--event", "load above 3", "--min-gap-s", "-1"], "--min-gap-s must be >= 0; got -1.0"),
    ],
)
def test_bad_arguments_are_refused_in_one_line_before_any_work(planted, tmp_path, args, says):
    bag, questions = planted
    out = tmp_path / "out"
    if "--tau" not in args:
        args = [*args, "--tau", "1"]
    result = thresholds("--bag", str(bag), "--questions", str(questions), "--out", str(out), *args)
    assert result.returncode == 2, result.stderr
    assert says in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not out.exists()


def test_an_event_on_a_topic_the_bag_lacks_is_one_line(planted, tmp_path):
    bag, questions = planted
    result = thresholds(
        "--bag", str(bag), "--questions", str(questions), "--question", "load", "--tau", "1",
        "--event", "/wrist/joint_states effort[wrist] above 3", "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "has no topic '/wrist/joint_states'; its topics: ['/gripper/joint_states']" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_checkpoint_of_other_questions_is_refused_and_nothing_written(planted, tmp_path):
    bag, questions = planted
    other = yaml.safe_load(questions.read_text())
    other["learner"]["tilings"] = [8]
    (tmp_path / "other.yaml").write_text(yaml.safe_dump(other))
    first = tmp_path / "first"
    result = thresholds(
        "--bag", str(bag), "--questions", str(tmp_path / "other.yaml"), "--tau", "1", "--event", "load above 3",
        "--thresholds", "0.5", "--out", str(first),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    out = tmp_path / "out"
    result = thresholds(
        "--bag", str(bag), "--questions", str(questions), "--checkpoint", str(first / "horde.npz"), "--tau", "1",
        "--event", "load above 3", "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert "was made with another configuration" in result.stderr and "learner.tilings" in result.stderr
    assert "Traceback" not in result.stderr and not out.exists()


@pytest.mark.slow
def test_a_debounce_joins_events_closer_than_min_gap(planted, tmp_path):
    bag, questions = planted
    out = tmp_path / "out"
    # The spikes come every 4 s: with a 5 s debounce every other one is the previous one's.
    result = thresholds(
        "--bag", str(bag), "--questions", str(questions), "--tau", "1", "--event", "load above 3",
        "--min-gap-s", "5", "--thresholds", "3.5", "--out", str(out),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    data = json.loads((out / "horde_thresholds.json").read_text())
    assert data["min_gap_steps"] == 125 and data["events"] == (CYCLES + 1) // 2
    np.testing.assert_allclose(data["event_times_s"], 3.8 + 8.0 * np.arange((CYCLES + 1) // 2), atol=1e-6)


def test_the_chosen_threshold_off_the_cumulants_range_is_warned():
    rows = [
        {"threshold": -0.03, "caught": 5, "events": 10, "false_alarms": 12, "false_alarms_per_minute": 12.0,
         "median_lead_s": 0.5},
        {"threshold": 0.2, "caught": 4, "events": 10, "false_alarms": 1, "false_alarms_per_minute": 1.0,
         "median_lead_s": 0.4},
    ]  # fmt: skip
    bumper = np.array([0.0, 0.0, 1.0, 0.0])
    # The most events caught is at -0.03, below every value a 0/1 bumper takes: warned.
    assert range_warning(rows, None, bumper).startswith(
        "the threshold -0.03 lies outside the range the question's cumulant took [0, 1]"
    )
    # Within 2 false alarms a minute the choice is 0.2, inside the range: nothing to say.
    assert range_warning(rows, 2.0, bumper) == ""
    assert best_row(rows, 2.0)["threshold"] == 0.2 and best_row(rows, 0.5) is None
    assert range_warning(rows, 0.5, bumper) == ""  # no threshold chosen
