"""launch/reflex.launch.py under the real `ros2 launch`: it ends with the parts the arm cannot run without.

A reflex that cannot start, or dies, must not leave the operator's commands a path to the
servos: the launch stops every process and ends with exit code 1 and one line saying why.
Each launch argument reaches its process, each run gets its own serial link, and Ctrl-C ends
every process with code 0, the driver before the servos it drives (no `servo bus lost`).
"""

from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import tempfile

import pytest
from ros2_cli import (
    assert_clean_shutdown,
    close_all,
    held_stacks,
    launch,
    param_gets,
    stop_daemon,
    wait_for_nodes,
)
from waiting import bound, wait_until

from gamma_net_ros.hardware.emulator import EmulatorClient

REPO = pathlib.Path(__file__).resolve().parent.parent
PROCESSES = ["servo_emulator", "dynamixel_driver", "teleop", "operator", "horde", "reflex"]
NODES = {"/dynamixel_driver", "/teleop", "/operator", "/horde", "/reflex"}

pytestmark = [pytest.mark.ros, pytest.mark.slow]


@pytest.fixture(scope="module", autouse=True)
def _no_daemon_left():
    yield
    close_all()
    stop_daemon()


def ended(run, timeout: float) -> int | None:
    """The launch's exit code once it has ended by itself (within ``bound(timeout)``), else None."""
    try:
        return run.process.wait(timeout=bound(timeout))
    except subprocess.TimeoutExpired:
        return None


def group_gone(run) -> bool:
    """Whether no process of the launch's group is left (launch started its processes in it)."""
    try:
        os.killpg(run.process.pid, 0)
    except ProcessLookupError:
        return True
    return False


def lost_at_shutdown(output: str) -> list[str]:
    """The driver's "servo bus lost" lines of a stop that reached the servos first (the port gone: EIO).

    A loss mid-run (no valid reply for a second: on a loaded machine the emulator's process can
    starve) is the driver doing its job, and not what these tests are about.
    """
    return [line for line in output.splitlines() if "servo bus lost" in line and "no valid reply" not in line]


def started_pid(output: str, process: str) -> int:
    (pid,) = re.findall(rf"\[{process}-\d+\]: process started with pid \[(\d+)\]", output)
    return int(pid)


def test_a_reflex_that_cannot_start_ends_the_launch_in_one_line(tmp_path):
    shipped = (REPO / "config" / "reflex_rules.yaml").read_text()
    broken = shipped.replace("question: shoulder_effort", "question: wrist_speed")
    assert broken != shipped
    rules = tmp_path / "rules.yaml"
    rules.write_text(broken)
    run = launch("gamma_net_ros", "reflex.launch.py", f"rules_file:={rules}", cwd=tmp_path, log_path=tmp_path / "l.log")
    try:
        code = ended(run, timeout=120)  # before: the arm ran on without its reflex, and the launch never ended
        assert code == 1, run.output
        assert wait_until(lambda: group_gone(run), timeout=10), run.output  # every process stopped
    finally:
        run.close()
    output = run.output
    assert "Traceback" not in output, output
    (fatal,) = [line for line in output.splitlines() if "[FATAL]" in line]
    assert fatal.startswith("[reflex-") and "wrist_speed" in fatal, output  # the reflex's reason, in one line
    launch_errors = [line for line in output.splitlines() if "[ERROR] [launch]" in line]
    assert launch_errors == [
        "[ERROR] [launch]: Caught exception in launch (see debug for traceback): "
        "reflex ended with exit code 1 (its line above says why)"
    ], output
    assert "sending signal 'SIGTERM'" not in output, output
    assert not lost_at_shutdown(output), output


@pytest.mark.parametrize("process", ["reflex", "dynamixel_driver"])
def test_a_reflex_or_driver_killed_mid_run_ends_the_launch(tmp_path, process):
    run = launch("gamma_net_ros", "reflex.launch.py", cwd=tmp_path, log_path=tmp_path / "launch.log")
    try:
        assert NODES <= wait_for_nodes(NODES, timeout=120, launched=run), run.output
        os.kill(started_pid(run.output, process), signal.SIGKILL)
        code = ended(run, timeout=60)
        assert code == 1, run.output
        assert wait_until(lambda: group_gone(run), timeout=10), run.output
    finally:
        run.close()
    output = run.output
    assert "Traceback" not in output, output
    launch_errors = [line for line in output.splitlines() if "[ERROR] [launch]" in line]
    assert launch_errors == [
        f"[ERROR] [launch]: Caught exception in launch (see debug for traceback): {process} was killed by SIGKILL"
    ], output
    # The rest were stopped as on Ctrl-C: each ended by itself, the driver before the servos.
    assert output.count("process has finished cleanly") == len(PROCESSES) - 1, f"{output}\n{held_stacks(output)}"
    assert not lost_at_shutdown(output), output


def test_each_argument_reaches_its_process_the_port_is_the_runs_own_and_ctrl_c_stops_the_driver_first(tmp_path):
    fixed = pathlib.Path(tempfile.gettempdir(), "gamma_net_reflex", "ttyDXL")
    run = launch(
        "gamma_net_ros",
        "reflex.launch.py",
        "operator_seed:=7",
        "overshoot_joint:=1",
        "overshoot_direction:=-1",
        "obstacle_servo:=2",
        "obstacle_low:=2.27",
        "obstacle_high:=2.9",
        "driver_rate_hz:=50",
        "tick_topic:=/joint_states",
        cwd=tmp_path,
        log_path=tmp_path / "launch.log",
    )
    try:
        assert NODES <= wait_for_nodes(NODES, timeout=120, launched=run), run.output
        seed, joint, direction, probability, rate, tick, port = param_gets(
            ("/operator", "seed"),
            ("/operator", "operator.overshoot_joint"),
            ("/operator", "operator.overshoot_direction"),
            ("/operator", "operator.overshoot_probability"),
            ("/dynamixel_driver", "rate_hz"),
            ("/horde", "tick_topic"),
            ("/dynamixel_driver", "port"),
        )
        assert (seed, joint, direction) == ("7", "1", "-1")
        assert probability == "0.5"  # config/reflex.yaml's, kept
        assert rate == "50.0"
        assert tick == "/joint_states"
        port = pathlib.Path(port)
        assert port != fixed and port.parent.parent == pathlib.Path(tempfile.gettempdir()), port
        state = EmulatorClient(f"{port}.ctl").wait_ready(timeout=bound(30))
        assert state["servos"][1]["obstacle"] is None
        assert (state["servos"][2]["obstacle"]["low"], state["servos"][2]["obstacle"]["high"]) == (2.27, 2.9)
        assert run.wait_for("scripted operator (seed 7)", timeout=30), run.output
        # The driver drives the servos: the emulator has answered its reads.
        assert wait_until(lambda: EmulatorClient(f"{port}.ctl").state()["counters"].get("replies", 0) > 50, 60)
    finally:
        code = run.interrupt()
    output = run.output
    assert code == 0, output
    assert_clean_shutdown(output, PROCESSES)
    # Before, the emulator went at once and the driver's last cycles found its port gone.
    assert not lost_at_shutdown(output) and "Input/output error" not in output, output
    assert not port.parent.exists()  # the run's own folder, gone with it


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        (["operator_seed:=-1"], "operator_seed:=-1: must be at least 0"),
        (["overshoot_joint:=wrist"], "overshoot_joint:=wrist: must be one of 0, 1"),
        (["obstacle_servo:=3"], "obstacle_servo:=3: must be one of 1, 2"),
        (["obstacle_low:=0.5", "obstacle_high:=0.2"], "the obstacle needs low < high"),
        (["driver_rate_hz:=fast"], "driver_rate_hz:=fast: must be a number"),
    ],
)
def test_a_bad_run_argument_is_refused_in_one_line_before_any_process_starts(tmp_path, arguments, reason):
    from ros2_cli import ros2

    result = ros2("launch", "gamma_net_ros", "reflex.launch.py", *arguments, cwd=tmp_path)
    assert result.returncode == 1, result.stdout
    errors = [line for line in result.stdout.splitlines() if "[ERROR]" in line]
    assert len(errors) == 1 and reason in errors[0], result.stdout
    assert "Traceback" not in result.stdout and "process started" not in result.stdout, result.stdout
