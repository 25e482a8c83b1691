"""Stopping a node as a supervisor does (docs/supervisors.md): systemd's or docker's signal to its main process.

A supervisor signals the service's main process (docker: PID 1 of the container; systemd with
``KillMode=mixed``: that process first). Each way the guide starts a node is started here as
the guide writes it, in a shell that ``exec``s it, and sent the signal the guide sets: the
process must exit 0, the Horde's checkpoint written, and no process of it must be left running
(found by the test's own folder in their command lines, wherever they were started).
"""

from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import sys

import pytest
from ros2_cli import environment, require_ros2
from waiting import bound, wait_until

pytestmark = [pytest.mark.ros, pytest.mark.slow]

ROOT = pathlib.Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "supervisors.md"


def _left_running(marker: str) -> list[str]:
    """Command lines of the processes that still name ``marker`` (this test's folder)."""
    found = []
    for proc in pathlib.Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in command and state != "Z":
            found.append(f"{proc.name}: {command}")
    return found


def _guide_line(runs: str) -> str:
    """The ExecStart line of the guide's unit whose command ``runs`` (after ExecStart=)."""
    lines = [x for x in GUIDE.read_text().splitlines() if x.startswith("ExecStart=") and runs in x]
    assert lines, f"no ExecStart=... {runs} ... in {GUIDE}"
    return lines[0].removeprefix("ExecStart=")


def _run_stopped_with(command: str, sig: signal.Signals, tmp_path: pathlib.Path) -> tuple[int, str]:
    """Runs the guide's ExecStart (made to use this checkout and the test's files), then stops it as a supervisor."""
    require_ros2()
    questions, checkpoint = tmp_path / "questions.yaml", tmp_path / "horde.npz"
    questions.write_text((ROOT / "config" / "horde.yaml").read_text())
    command = command.replace("/home/robot/gamma_net_ros", str(ROOT))
    command = command.replace("/home/robot/my_robot.yaml", str(questions))
    command = command.replace("/home/robot/.ros/horde.npz", str(checkpoint))
    assert str(tmp_path) in command, command
    argv = re.match(r"^/bin/bash -c '(.*)'$", command)
    assert argv, command
    log = tmp_path / "node.log"
    with open(log, "w") as out:
        process = subprocess.Popen(
            ["/bin/bash", "-c", argv.group(1)],
            cwd=ROOT,
            env=environment(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        ready = wait_until(lambda: "ready: learner kernels" in log.read_text() or process.poll() is not None, 300)
        assert ready and process.poll() is None, log.read_text()
        os.kill(process.pid, sig)  # the main process only, as docker stop and systemd's KillMode=mixed do
        code = process.wait(timeout=bound(60))
        assert wait_until(lambda: not _left_running(str(tmp_path)), 30), _left_running(str(tmp_path))
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    output = log.read_text()
    assert checkpoint.is_file(), output  # the last checkpoint was written on the way out
    return code, output


def test_a_node_started_directly_stops_cleanly_on_sigterm(tmp_path):
    code, output = _run_stopped_with(_guide_line("python -m gamma_net_ros.entry horde"), signal.SIGTERM, tmp_path)
    assert code == 0, output
    assert "Traceback" not in output, output


def test_ros2_launch_stops_cleanly_on_sigint_with_no_node_left(tmp_path):
    code, output = _run_stopped_with(_guide_line("ros2 launch gamma_net_ros horde.launch.py"), signal.SIGINT, tmp_path)
    assert code == 0, output
    assert "Traceback" not in output, output
    assert "process has finished cleanly" in output and "sending signal 'SIGTERM'" not in output, output


def test_sigterm_to_ros2_run_leaves_no_node_and_writes_the_checkpoint(tmp_path):
    """ros2 run exits at once on SIGTERM; its node, tied to it (entry.stop_with_parent), stops cleanly by itself."""
    require_ros2()
    checkpoint = tmp_path / "horde.npz"
    log = tmp_path / "run.log"
    command = ["ros2", "run", "gamma_net_ros", "horde", "--ros-args", "-p", f"checkpoint_path:={checkpoint}"]
    with open(log, "w") as out:
        process = subprocess.Popen(
            command, cwd=ROOT, env=environment(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        ready = wait_until(lambda: "ready: learner kernels" in log.read_text() or process.poll() is not None, 300)
        assert ready and process.poll() is None, log.read_text()
        os.kill(process.pid, signal.SIGTERM)  # ros2 run alone, as a supervisor signals its main process
        process.wait(timeout=bound(60))
        assert wait_until(lambda: not _left_running(str(tmp_path)), 60), _left_running(str(tmp_path))
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    output = log.read_text()
    assert checkpoint.is_file(), output  # written by the node on its way out, after ros2 run had gone
    assert "Traceback" not in output, output


def _pid_namespaces() -> bool:
    """Whether this user may start a PID namespace (as root): the docker trials' stand-in for a container."""
    try:
        return subprocess.run(["unshare", "--pid", "--fork", "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def test_a_few_stop_trials_are_all_clean():
    """tools/stop_trials.py, small: the guide's units and Dockerfiles once per phase, reflex.launch.py once."""
    require_ros2()
    kinds = "unit,reflex,docker" if _pid_namespaces() else "unit,reflex"
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "stop_trials.py"), "--trials", "1", "--kinds", kinds],
        cwd=ROOT,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=bound(900),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    if "docker" in kinds:
        assert done.stdout.count("docker ") >= 6, done.stdout  # two Dockerfiles, three phases


def test_a_node_the_stop_ended_before_its_interpreter_ran_is_not_counted_as_cut():
    """A stop that lands between launch's fork and ``env --block-signal`` ends the node before Python runs (exit
    -2, no line of its own): nothing to save. One that ends a node that had started (its own lines) is still cut."""
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        from stop_trials import _stopped_before_python
    finally:
        sys.path.remove(str(ROOT / "tools"))
    started = "[INFO] [horde-1]: process started with pid [14]\n"
    died = "[ERROR] [horde-1]: process has died [pid 14, exit code -2, cmd 'env --block-signal=INT,TERM horde'].\n"
    own = "[horde-1] [INFO] [1795962103.1] [horde]: no checkpoint: starting a new learner\n"
    assert _stopped_before_python(
        started + "[INFO] [horde-1]: sending signal 'SIGINT' to process[horde-1]\n" + died
    ) == ["horde-1"]
    assert _stopped_before_python(started + own + died) == []
    assert _stopped_before_python(started + died.replace("-2,", "1,")) == []
