"""docs/own-robot.md, every command run as written and in its order, on a robot that is not the arm.

The guide's first command starts the robot stand-in (tests/own_robot_standin.py: six joints of
other names at 50 Hz with effort, a 1 Hz BatteryState, a grip spike every 3 s), which runs until
the end. The long-running commands (the launches, the recorders, the live view, the alert) run in
the background as the guide's "another terminal" and are stopped with Ctrl-C (SIGINT to their
group); the others run to their end. What the guide says is seen is checked at each step: live
predictions of the joint questions, a bag of both topics, the trained learner, the resumed node's
first predictions counting on from the checkpoint's updates, a Foxglove client receiving them, the
chosen threshold's row, and the alert rising before the grip spikes.
"""

from __future__ import annotations

import json
import math
import re
import subprocess

import pytest
from foxglove_client import FoxgloveClient
from guides import ROOT, guide_text
from ros2_cli import Background, assert_clean_shutdown, close_all, ros2
from waiting import bound, wait_until

pytestmark = [pytest.mark.ros, pytest.mark.slow]

#: The guide's commands, by how they start, in order.
EXPECTED = [
    "python tests/own_robot_standin.py",
    "ros2 launch gamma_net_ros horde.launch.py",
    "ros2 run gamma_net_ros prediction_monitor",
    "ros2 run gamma_net_ros bag_recorder",
    "gamma-net horde train",
    "cp runs/my_robot/horde/horde.npz runs/my_robot/live.npz",
    "ros2 launch gamma_net_ros horde.launch.py",
    "ros2 run gamma_net_ros live_view",
    "python -m gamma_net_ros.foxglove_layout",
    "ros2 run gamma_net_ros bag_recorder",
    "gamma-net horde thresholds",
    "python examples/prediction_alert.py",
]
#: Grip cycles recorded for training and for choosing the threshold, and watched with the alert on.
TRAIN_GRIPS, TEST_GRIPS, ALERT_GRIPS = 13, 8, 5
ROS_LOG_TIME = re.compile(r"\[INFO\] \[(\d+\.\d+)\] \[prediction_alert\]: (.*)")


def guide_commands() -> list[str]:
    """The guide's bash lines, continuations joined, comments dropped."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", guide_text("own-robot"), flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line:
                commands.append(" ".join(line.split()))
    return commands


def questions_file() -> str:
    (text,) = re.findall(r"```yaml\n(.*?)```", guide_text("own-robot"), flags=re.S)
    return text


def thresholds_table() -> list[dict]:
    """The thresholds table the guide shows, after its marker."""
    block = guide_text("own-robot").split("<!-- own-robot thresholds -->", 1)[1].strip().split("\n\n", 1)[0]
    rows = []
    for line in block.splitlines()[2:]:
        h, lead, caught, per_min = (c.strip() for c in line.strip("|").split("|"))
        rows.append({"threshold": float(h), "lead": float(lead), "caught": caught, "per_min": float(per_min)})
    return rows


def monitor_lines(output: str) -> dict[str, tuple[int, list[float]]]:
    """prediction_monitor's lines: {question: (update count, values)}."""
    lines = {}
    for line in output.splitlines():
        found = re.match(r"\[[\d.]+\] (\S+) \(updates (\d+)\) (.*)", line)
        if found:
            values = [float(v) for v in re.findall(r"tau=[^:]+:(\S+)", found.group(3))]
            lines[found.group(1)] = (int(found.group(2)), values)
    return lines


def grips(robot: Background) -> list[float]:
    """The wall-clock times of the stand-in's grip spikes so far."""
    return [float(t) for t in re.findall(r"grip at (\d+\.\d+)", robot.output)]


def record(line: str, folder, robot: Background, cycles: int, name: str) -> str:
    """A recorder line in the background while the stand-in grips ``cycles`` times; Ctrl-C; its output."""
    recorder = Background(line, cwd=folder, log_path=folder / f"{name}.log", shell=True)
    assert recorder.wait_for("recording /my_robot/battery", timeout=60), recorder.output
    start = len(grips(robot))
    assert wait_until(lambda: len(grips(robot)) >= start + cycles + 1, timeout=3 * (cycles + 2)), robot.output
    assert recorder.interrupt() == 0, recorder.output
    return recorder.output


def run(line: str, folder) -> str:
    done = subprocess.run(line, shell=True, cwd=folder, capture_output=True, text=True, timeout=bound(120))
    assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout


def test_the_guide_shows_the_commands_its_test_runs():
    commands = guide_commands()
    assert [c for c, prefix in zip(commands, EXPECTED) if c.startswith(prefix)] == commands, commands
    assert len(commands) == len(EXPECTED)
    live, resume, thresholds, alert = commands[1], commands[6], commands[10], commands[11]
    for launch in (live, resume):
        assert "questions_file:=my_robot.yaml tick_topic:=/my_robot/joint_states" in launch
    # the alert reads what the thresholds were measured on: the same question, tau and a threshold scored
    assert "--question grip_effort --tau 25 " in thresholds and "-p question:=grip_effort -p tau:=25.0" in alert
    threshold = re.search(r"threshold:=(\S+)", alert).group(1)
    assert threshold in thresholds.split("--thresholds ")[1].split(" --")[0].split()
    assert "topics:\n  /my_robot/battery: {rate_hz: 1.0}" in questions_file()


def test_every_command_runs_as_written_on_a_robot_standin(tmp_path, live_view_port):
    folder = tmp_path
    for shipped in ("examples", "tests"):  # the guide runs from a clone's root
        (folder / shipped).symlink_to(ROOT / shipped)
    (folder / "my_robot.yaml").write_text(questions_file())
    (
        standin,
        live,
        monitor,
        record_train,
        train,
        copy,
        resume,
        view_line,
        layout,
        record_test,
        thresholds,
        alert_line,
    ) = guide_commands()
    robot = Background(standin, cwd=folder, log_path=folder / "robot.log", shell=True)
    try:
        assert robot.wait_for("grip at", timeout=30), robot.output

        # 2. live predictions, then Ctrl-C
        horde = Background(live, cwd=folder, log_path=folder / "horde_live.log", shell=True)
        shown = ros2(shell_line=monitor, cwd=folder, timeout=120)
        assert shown.returncode == 0, shown.stdout + horde.output
        lines = monitor_lines(shown.stdout)
        assert set(lines) == {"grip_effort", "base_speed", "battery_current"}, shown.stdout
        for question in ("grip_effort", "base_speed"):  # the fast topic's questions publish at once
            assert all(math.isfinite(v) for v in lines[question][1]) and lines[question][1], shown.stdout
        assert horde.interrupt() == 0, horde.output
        assert_clean_shutdown(horde.output, ["horde"])

        # 3. record, 4. train
        out = record(record_train, folder, robot, TRAIN_GRIPS, "record")
        written = re.search(
            r"wrote runs/my_robot/bag: \d+ messages \(/my_robot/joint_states (\d+), /my_robot/battery (\d+)\)", out
        )
        assert written and int(written.group(1)) > 40 * int(written.group(2)) > 0, out
        trained = run(train, folder)
        assert "runs/my_robot/horde/horde.npz" in trained, trained
        report = json.loads((folder / "runs" / "my_robot" / "horde" / "horde_train.json").read_text())
        assert set(report["questions"]) == {"grip_effort", "base_speed", "battery_current"}

        # 5. resume: the first predictions count on from the checkpoint's updates
        run(copy, folder)
        horde = Background(resume, cwd=folder, log_path=folder / "horde.log", shell=True)
        assert horde.wait_for("resumed from runs/my_robot/live.npz after", timeout=120), horde.output
        resumed = int(re.search(r"resumed from runs/my_robot/live.npz after (\d+) updates", horde.output).group(1))
        assert resumed > 0
        shown = ros2(shell_line=monitor, cwd=folder, timeout=120)
        assert shown.returncode == 0, shown.stdout
        first = monitor_lines(shown.stdout)["grip_effort"][0]
        # on from the checkpoint's count, not from 0 (the first may come before the resumed node's first update)
        assert first >= resumed, (first, resumed)

        # 6. the live view, as a Foxglove client sees it
        view = Background(view_line, cwd=folder, log_path=folder / "live_view.log", shell=True)
        assert view.wait_for("serving ws://127.0.0.1:8765", timeout=60), view.output
        client = FoxgloveClient("ws://localhost:8765")
        channel = "/horde/predictions/grip_effort"

        def received() -> bool:
            client.poll(0.05)
            if channel in client.channels and channel not in client.subscriptions.values():
                client.subscribe(channel)
            return bool(client.received.get(channel))

        assert wait_until(received, timeout=60), sorted(client.channels)
        client.close()
        assert client.received[channel][0][1]["update_count"] > resumed
        run(layout, folder)
        assert "grip_effort" in (folder / "my_robot_layout.json").read_text()

        # 7. a held-out stretch, the thresholds, the alert
        record(record_test, folder, robot, TEST_GRIPS, "record_test")
        print(run(thresholds, folder))
        table = json.loads((folder / "runs" / "my_robot" / "thresholds" / "horde_thresholds.json").read_text())
        chosen = float(re.search(r"threshold:=(\S+)", alert_line).group(1))
        (row,) = [r for r in table["rows"] if r["threshold"] == chosen]
        assert table["events"] >= TEST_GRIPS - 1, table
        assert row["caught"] >= 0.8 * table["events"] and row["false_alarms_per_minute"] <= 2, row
        shown = thresholds_table()
        assert [r["threshold"] for r in table["rows"]] == [r["threshold"] for r in shown]
        for got, line in zip(table["rows"], shown):  # as the guide's run printed them, up to the stand-in's jitter
            caught, events = (int(x) for x in line["caught"].split("/"))
            assert got["caught_percent"] == pytest.approx(100 * caught / events, abs=15), (got, line)
            assert got["median_lead_s"] == pytest.approx(line["lead"], abs=0.1), (got, line)
            # counted in alarms: on a held-out stretch of half a minute, one alarm more is 2 a minute more
            assert abs(got["false_alarms"] - line["per_min"] * table["minutes"]) <= 1, (got, line, table["minutes"])
        alert = Background(alert_line, cwd=folder, log_path=folder / "alert.log", shell=True)
        assert alert.wait_for("grip_effort at tau 25 (published):", timeout=60), alert.output
        start = len(grips(robot))
        assert wait_until(lambda: len(grips(robot)) >= start + ALERT_GRIPS, timeout=3 * (ALERT_GRIPS + 2))
        watched = grips(robot)[start:]
        assert wait_until(lambda: f"is below {chosen:g}" in alert.output.split("is above")[-1], timeout=10)
        codes = [p.interrupt() for p in (alert, view, horde)]
        assert codes == [0, 0, 0], (codes, alert.output, view.output, horde.output)
        assert_clean_shutdown(horde.output, ["horde"])
        assert "Traceback" not in alert.output + view.output, alert.output + view.output
        logged = ROS_LOG_TIME.findall(alert.output)[1:]  # the first line is the state it found, not a crossing
        rises = [float(t) for t, text in logged if " is above " in text]
        leads = [max((g - r for r in rises if 0 <= g - r <= 1.0), default=None) for g in watched]
        caught = [lead for lead in leads if lead is not None]
        false = [r for r in rises if not any(0 <= g - r <= 1.0 for g in grips(robot))]
        print(
            f"alert at {chosen:g}: {len(caught)}/{len(watched)} grips caught, leads {[round(x, 3) for x in caught]} s,"
        )
        print(f"{len(false)} rises without a grip within 1 s; thresholds row {row}")
        assert len(caught) >= len(watched) - 1, (leads, alert.output)
    finally:
        code = robot.interrupt()
        close_all()
    assert code == 0, robot.output
    assert re.search(r"published \d+ joint_states, \d+ battery", robot.output), robot.output
