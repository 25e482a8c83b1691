"""The servo emulator as users start it (`python -m ...`, `servo_emulator`): paths, control socket, leftovers."""

from __future__ import annotations

import os
import pathlib
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time

import pytest
from waiting import bound

from gamma_net_ros.hardware.bus import DynamixelBus
from gamma_net_ros.hardware.control_table import OperatingMode
from gamma_net_ros.hardware.emulator import EmulatorClient
from gamma_net_ros.hardware.emulator.control import MAX_REQUEST_BYTES

REPO = pathlib.Path(__file__).resolve().parents[1]
INSTALLED = REPO / "install" / "gamma_net_ros" / "lib" / "gamma_net_ros" / "servo_emulator"
COMMANDS = {
    "module": [sys.executable, "-u", "-m", "gamma_net_ros.hardware.emulator"],
    "installed": [str(INSTALLED)],
}


@pytest.fixture
def folder():
    path = pathlib.Path(tempfile.mkdtemp(prefix="dxl-", dir="/tmp"))  # short: a Unix socket path is length-limited
    yield path
    for child in sorted(path.rglob("*"), reverse=True):
        child.unlink() if not child.is_dir() or child.is_symlink() else child.rmdir()
    path.rmdir()


def start(command: list[str], *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [*command, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


def stop(process: subprocess.Popen, sig=signal.SIGINT) -> tuple[int, str]:
    process.send_signal(sig)
    out, err = process.communicate(timeout=bound(10))
    return process.returncode, out + err


@pytest.mark.parametrize("how", ["module", "installed"])
@pytest.mark.parametrize("which", ["link", "control"])
def test_a_path_that_is_not_its_own_is_refused_and_left_untouched(folder, how, which):
    if how == "installed" and not INSTALLED.exists():
        pytest.skip("no colcon install here")
    link = folder / "ttyDXL"
    taken = link if which == "link" else folder / "ctl"
    taken.write_text("a user's file\n")
    args = ["--link", str(link)] + (["--control", str(taken)] if which == "control" else [])
    result = subprocess.run([*COMMANDS[how], *args], capture_output=True, text=True, timeout=bound(30))
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert f"--{which} {taken} already exists" in line
    assert taken.read_text() == "a user's file\n" and stat.S_ISREG(taken.lstat().st_mode)
    assert sorted(p.name for p in folder.iterdir()) == [taken.name]  # nothing made either


def test_control_folder_is_private_and_a_stuck_client_does_not_stall_the_servos(folder):
    link = folder / "ttyDXL"
    process = start(COMMANDS["module"], "--link", str(link))
    try:
        client = EmulatorClient(f"{link}.ctl")
        client.wait_ready(timeout=bound(10.0))
        control = pathlib.Path(f"{link}.ctl")
        assert stat.S_IMODE(control.stat().st_mode) == 0o700 and control.stat().st_uid == os.getuid()
        bus = DynamixelBus(str(link), ids=[1, 2])
        bus.connect(OperatingMode.VELOCITY)
        try:
            # A client that connects and says nothing holds the control thread for its 2 s limit:
            # the serial thread keeps answering the servos' traffic meanwhile.
            stuck = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            stuck.connect(str(control / "socket"))
            reads = 0
            deadline = time.monotonic() + 1.0  # within the stuck client's 2 s limit: a window, not a wait
            while time.monotonic() < deadline:
                bus.read()  # raises ReadFailed if the servos go unanswered for three attempts
                reads += 1
            assert reads >= 10 and bus.stats.failed_reads == 0
            stuck.close()
        finally:
            bus.close()
        # An endless request is cut off at the limit and answered; the emulator goes on.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as big:
            big.settimeout(5.0)
            big.connect(str(control / "socket"))
            big.sendall(b"x" * (MAX_REQUEST_BYTES + 70_000))
            reply = big.recv(4096).decode()
        assert '"ok": false' in reply and "longer than" in reply
        with pytest.raises(RuntimeError, match="unknown command"):
            client.request("explode")
        assert client.state()["connected"]
    finally:
        code, output = stop(process)
    assert code == 0 and "Traceback" not in output
    assert list(folder.iterdir()) == []  # its link and control folder gone, nothing else touched


def test_leftovers_of_a_killed_emulator_are_reused(folder):
    link = folder / "ttyDXL"
    killed = start(COMMANDS["module"], "--link", str(link))
    EmulatorClient(f"{link}.ctl").wait_ready(timeout=bound(10.0))
    stop(killed, signal.SIGKILL)
    assert link.is_symlink() and pathlib.Path(f"{link}.ctl", "socket").exists()  # left behind
    if os.path.exists(os.readlink(link)):  # another process got the pty number meanwhile: not ours to take
        result = subprocess.run(
            [*COMMANDS["module"], "--link", str(link)], capture_output=True, text=True, timeout=bound(30)
        )
        assert result.returncode == 2 and "already exists" in result.stderr
        return
    again = start(COMMANDS["module"], "--link", str(link))
    try:
        client, state, deadline = EmulatorClient(f"{link}.ctl"), None, time.monotonic() + bound(10.0)
        while state is None and again.poll() is None and time.monotonic() < deadline:
            try:
                state = client.wait_ready(timeout=0.2)
            except TimeoutError:
                pass
        if state is not None:  # its link is checked while it runs: it goes at the stop
            assert state["connected"] and os.readlink(link) == state["device"], state
    finally:
        code, output = stop(again)  # no signal is sent to a process that has ended
    if state is None:
        # Another process (another test's) got the pty number between the look above and this start.
        assert code == 2 and "already exists" in output, output
        return
    assert code == 0, output
    assert list(folder.iterdir()) == []


def test_in_process_emulator_refuses_a_taken_control_path_to_its_caller(folder):
    import numpy as np

    from gamma_net_ros.hardware.emulator import ServoBank, ServoEmulator

    taken = folder / "ctl"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine\n")
    emulator = ServoEmulator(ServoBank([1]), link=folder / "tty", rng=np.random.default_rng(0), control=taken)
    with pytest.raises(FileExistsError, match="--control"):
        emulator.start()
    assert (taken / "notes.txt").read_text() == "mine\n"
    assert sorted(p.name for p in folder.iterdir()) == ["ctl"]  # the link it made is gone again
    with ServoEmulator(ServoBank([1]), link=folder / "tty", rng=np.random.default_rng(0), control=folder / "c2") as emu:
        assert EmulatorClient(folder / "c2").state()["port"] == emu.port
    assert sorted(p.name for p in folder.iterdir()) == ["ctl"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--drop", "1.5"], "drop=1.5"),
        (["--drop", "0.6", "--delay", "0.6"], "exceed 1"),
        (["--latency-s", "-0.01"], "latency_s=-0.01"),
        (["--ids", "1", "1"], "[1, 1]"),
        (["--positions", "0.1"], "1 initial positions for 2 servos"),
    ],
)
def test_bad_settings_are_refused_in_one_line_and_make_nothing(folder, args, named):
    result = subprocess.run(
        [*COMMANDS["module"], "--link", str(folder / "ttyDXL"), *args],
        capture_output=True,
        text=True,
        timeout=bound(30),
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert named in line, line
    assert list(folder.iterdir()) == []


def test_on_ctrl_c_the_servos_answer_until_the_driver_lets_go_of_the_port(folder):
    # One Ctrl-C reaches a whole launch at once: the emulator must not vanish under the driver.
    link = folder / "ttyDXL"
    process = start(COMMANDS["module"], "--link", str(link))
    client = EmulatorClient(f"{link}.ctl")
    client.wait_ready(timeout=bound(10.0))
    bus = DynamixelBus(str(link), ids=[1, 2])
    bus.connect(OperatingMode.VELOCITY)
    try:
        process.send_signal(signal.SIGINT)
        for _ in range(50):  # the emulator's loop sees a stop within 5 ms: 50 reads outlast it
            bus.read()  # raises PortLost or ReadFailed if the servos are gone
        assert process.poll() is None and bus.stats.failed_reads == 0
    finally:
        bus.close()  # torque off, answered; then the port is let go and the emulator ends
    out, err = process.communicate(timeout=bound(10))
    assert process.returncode == 0 and "Traceback" not in out + err, out + err
    assert list(folder.iterdir()) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_port_never_let_go_ends_the_emulator_after_its_grace_and_sigterm_at_once(folder, sig):
    link = folder / "ttyDXL"
    process = start(COMMANDS["module"], "--link", str(link), "--grace-s", "0.5")
    EmulatorClient(f"{link}.ctl").wait_ready(timeout=bound(10.0))
    held = os.open(link, os.O_RDWR | os.O_NOCTTY)  # a host that never closes the port
    try:
        code, output = stop(process, sig)
    finally:
        os.close(held)
    assert code == 0 and "Traceback" not in output, output
    assert list(folder.iterdir()) == []


def test_a_bad_grace_is_refused_in_one_line(folder):
    result = subprocess.run(
        [*COMMANDS["module"], "--link", str(folder / "ttyDXL"), "--grace-s", "nan"],
        capture_output=True,
        text=True,
        timeout=bound(30),
    )
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        "servo_emulator: error: --grace-s must be within 0..60 s; got nan"
    ], result.stderr
    assert list(folder.iterdir()) == []
