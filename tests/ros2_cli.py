"""The real `ros2` command in tests, started the way a user starts it.

`ros2 launch` runs in its own process group and is stopped with SIGINT to the group, as a
terminal's Ctrl-C does (a background job in a non-interactive shell ignores SIGINT, so
anything else would skip the shutdown path). Verbs that can run without the ros2 daemon do
(`--no-daemon`); those the guides show without it start the daemon of the session's domain,
which `stop_daemon` ends at the session's end.
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import signal
import subprocess
import tempfile
import time

from waiting import bound

# launch_ros escalates to SIGTERM when a process outlives SIGINT by this long (its default).
SIGTERM_AFTER_S = 5.0


def require_ros2() -> str:
    """The `ros2` executable; fails the test with the fix when the tools are missing."""
    path = shutil.which("ros2")
    if path is None:
        import pytest

        pytest.fail("no `ros2` command: run `make setup` (it installs the ROS 2 tools), then `source tools/env.sh`")
    return path


def environment(log_dir: str | None = None) -> dict[str, str]:
    """The test's environment (its ROS domain), with ROS logs kept out of ~/.ros."""
    env = dict(os.environ)
    env["ROS_LOG_DIR"] = log_dir or os.path.join(tempfile.gettempdir(), f"gamma_net_ros_logs_{os.getuid()}")
    env["PYTHONUNBUFFERED"] = "1"
    env["RCUTILS_COLORIZED_OUTPUT"] = "0"
    return env


def ros2(*args: str, cwd=None, timeout: float = 60.0, shell_line: str | None = None) -> subprocess.CompletedProcess:
    """Runs `ros2 ARGS` (or a whole shell line, as a guide writes it) to its end; output in .stdout.

    The run may take `bound(timeout)` seconds.
    """
    require_ros2()
    command = shell_line if shell_line is not None else ["ros2", *args]
    return subprocess.run(
        command,
        shell=shell_line is not None,
        executable="/bin/bash" if shell_line is not None else None,
        cwd=cwd,
        env=environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=bound(timeout),
    )


#: Every background command started, so a test that fails half-way leaves nothing running (`close_all`).
_STARTED: list[Background] = []


class Background:
    """A command in its own process group, output to a file; `interrupt()` is Ctrl-C."""

    def __init__(self, command, cwd, log_path, shell: bool = False):
        require_ros2()
        _STARTED.append(self)
        self.log_path = log_path
        self._log = open(log_path, "w")
        self.process = subprocess.Popen(
            command,
            shell=shell,
            executable="/bin/bash" if shell else None,
            cwd=cwd,
            env=environment(),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    @property
    def output(self) -> str:
        if not self._log.closed:
            self._log.flush()
        with open(self.log_path) as handle:
            return handle.read()

    def wait_for(self, text: str, timeout: float = 60.0) -> bool:
        """Waits until `text` appears in the output (or the process ends), within `bound(timeout)`."""
        deadline = time.monotonic() + bound(timeout)
        while time.monotonic() < deadline:
            if text in self.output:
                return True
            if self.process.poll() is not None:
                return text in self.output
            time.sleep(0.2)
        return text in self.output

    def interrupt(self, timeout: float = 30.0) -> int:
        """SIGINT to the whole group, as Ctrl-C; returns the exit code (waited for within `bound(timeout)`)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
        try:
            return self.process.wait(timeout=bound(timeout))
        finally:
            self.close()

    def close(self) -> None:
        """Kills whatever is left of the group (a failed test must leave nothing running)."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=10)
        if not self._log.closed:
            self._log.close()


def close_all() -> None:
    """Kills what is left of every background command (one a failed assertion skipped)."""
    while _STARTED:
        _STARTED.pop().close()


def launch(*args: str, cwd, log_path) -> Background:
    """`ros2 launch ARGS` in the background."""
    return Background(["ros2", "launch", *args], cwd=cwd, log_path=log_path)


def node_names() -> set[str]:
    result = ros2("node", "list", "--no-daemon")
    return set(result.stdout.split())


def wait_for_nodes(expected: set[str], timeout: float = 60.0, launched: Background | None = None) -> set[str]:
    """Waits until every expected node is in the ROS graph (within `bound(timeout)`); returns the last names seen.

    With ``launched``, the wait also ends when that launch has ended: its nodes will not come. The graph
    is read by an rclpy node of this process, in its own context: `ros2 node list --no-daemon` every
    0.5 s cost 0.47 CPU s a call, taken from the launch being waited for on a 2-core machine.
    """
    import rclpy
    from rclpy.signals import SignalHandlerOptions

    context = rclpy.Context()
    rclpy.init(context=context, signal_handler_options=SignalHandlerOptions.NO)  # the test's Ctrl-C stays pytest's
    try:
        node = rclpy.create_node(
            f"wait_for_nodes_{os.getpid()}", context=context, enable_rosout=False, start_parameter_services=False
        )
        own = node.get_fully_qualified_name()

        def graph() -> set[str]:
            named = node.get_node_names_and_namespaces()
            return {f"{namespace.rstrip('/')}/{name}" for name, namespace in named} - {own}

        deadline = time.monotonic() + bound(timeout)
        names = graph()
        while not expected <= names and time.monotonic() < deadline:
            if launched is not None and launched.process.poll() is not None:
                break
            time.sleep(0.1)
            names = graph()
        node.destroy_node()
        return names
    finally:
        rclpy.try_shutdown(context=context)


def param_get(node: str, name: str) -> str:
    """`ros2 param get NODE NAME`'s value, as text.

    Without the daemon the verb's own node discovers the graph anew each time and may not see
    a node that `ros2 node list` just listed: it is asked again for a while.
    """
    deadline = time.monotonic() + bound(60.0)
    while True:
        result = ros2("param", "get", "--no-daemon", "--hide-type", node, name)
        if result.returncode == 0 or "Node not found" not in result.stdout or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert result.returncode == 0, result.stdout
    return result.stdout.strip()


def param_gets(*asked: tuple[str, str]) -> list[str]:
    """`param_get` of each (NODE, NAME), all at once: each verb spends its seconds discovering the graph,
    not computing, so together they take about as long as one."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(asked)) as pool:
        return list(pool.map(lambda pair: param_get(*pair), asked))


def param_set(node: str, name: str, value: str) -> str:
    """`ros2 param set NODE NAME VALUE`'s output, asked again while the verb's node does not see NODE yet
    (or, on a loaded machine, ended without a word: its service call's answer never came)."""
    deadline = time.monotonic() + bound(60.0)
    while True:
        result = ros2("param", "set", "--no-daemon", node, name, value)
        unseen = "Node not found" in result.stdout or not result.stdout.strip()
        if not unseen or time.monotonic() > deadline:
            return result.stdout
        time.sleep(0.5)


def held_stacks(output: str) -> str:
    """Where each node that launch reports dead was held: its LoopWatch file (gamma_net_ros.shutdown_watch)."""
    folder = pathlib.Path(environment()["ROS_LOG_DIR"])
    found = []
    for pid in re.findall(r"process has died \[pid (\d+)", output):
        for path in sorted(folder.glob(f"*_{pid}_held_stacks.txt")):
            found.append(f"--- {path}\n{path.read_text(errors='replace') or '(empty: not held 5 s)'}")
    return "\n".join(found)


def assert_clean_shutdown(output: str, processes: list[str]) -> None:
    """Every process launch started finished cleanly (exit 0) on SIGINT, none needed SIGTERM."""
    assert "Traceback" not in output, output
    for name in processes:
        assert f"[{name}-" in output, f"{name} was not started:\n{output}"
    cleanly = output.count("process has finished cleanly")
    # The messages (and so the held stacks' files) are read only when an assertion fails.
    assert cleanly == len(processes), (
        f"{cleanly} of {len(processes)} processes exited with 0:\n{output}\n{held_stacks(output)}"
    )
    assert "process has died" not in output, f"{output}\n{held_stacks(output)}"
    assert "sending signal 'SIGTERM'" not in output, f"a process outlived SIGINT by {SIGTERM_AFTER_S} s:\n{output}"


def stop_daemon() -> None:
    """Ends the ros2 daemon of this session's domain (the guides' verbs without --no-daemon start it)."""
    if shutil.which("ros2"):
        subprocess.run(["ros2", "daemon", "stop"], env=environment(), capture_output=True, timeout=bound(60))


def simulated_bag(folder) -> str:
    """A short real recording (`gamma-net arm simulate`, one circuit) at FOLDER/runs/arm/joint_states."""
    out = os.path.join(folder, "runs", "arm")
    command = ["gamma-net", "arm", "simulate", "--circuits", "1", "--out", out, "--no-progress"]
    result = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=bound(300))
    assert result.returncode == 0, result.stdout + result.stderr
    bag = os.path.join(out, "joint_states")
    assert os.path.isdir(bag), os.listdir(out)
    return bag
