"""A node's first seconds: Ctrl-C at any moment ends it cleanly, and a cold numba cache costs no message.

Every way a node starts is a real process: the installed executable (what `ros2 run` and
`ros2 launch` execute), ``python -m gamma_net_ros.entry NAME`` (what the demo, the benchmarks
and the tests start) and ``python -m gamma_net_ros.NAME``. A SIGINT while the node's module
imports torch (seen in the process's memory map), or while its learner's kernels compile on an
empty cache (``NUMBA_CACHE_DIR`` an empty folder), ends it with code 0 and one line, no traceback.
On an empty cache the predictor says it is compiling, then that it is ready, and a bag_player
waiting for it delivers every message of a recording.
"""

from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pytest
from gamma_net_msgs.msg import Prediction
from rclpy.node import Node
from waiting import bound, wait_until

from gamma_net_core.data.bags import JointStateBagWriter
from gamma_net_core.data.joints import NANOSECONDS
from gamma_net_core.signals.arm_recording import RECORDING_EPOCH_NS
from gamma_net_ros.entry import NODES
from gamma_net_ros.paths import config_file
from gamma_net_ros.processes import NodeProcess, node_command

pytestmark = pytest.mark.ros
ARM, ATARI = config_file("arm"), config_file("atari")
#: Compiling the predictor's kernels took 170 s on a 2-core machine with 6 builds beside it: bounds, not waits
#: (each scaled by `bound`).
COLD_START_S = 300.0
STOP_S = 60.0
#: pytest-timeout's limit for a test that waits through a cold start, then stops what it started.
cold_start = pytest.mark.timeout(bound(COLD_START_S + 3 * STOP_S))
STOPPED = "stopped while starting"


def _installed(name: str) -> str:
    from ament_index_python.packages import get_package_prefix

    return str(pathlib.Path(get_package_prefix("gamma_net_ros")) / "lib" / "gamma_net_ros" / name)


def _popen(command: list[str], env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        env=dict(os.environ, PYTHONUNBUFFERED="1", **(env or {})),
    )


def _wait_until(predicate, timeout: float, what: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + bound(timeout)
    while not predicate():
        if process.poll() is not None or time.monotonic() > deadline:
            out = process.communicate()[0] if process.poll() is not None else ""
            raise AssertionError(f"{what} never happened (rc {process.poll()}):\n{out}")
        time.sleep(0.005)


def _mapped(pid: int, library: str) -> bool:
    try:
        return library in pathlib.Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def _interrupt(process: subprocess.Popen, sig=signal.SIGINT) -> tuple[int, str]:
    os.killpg(process.pid, sig)
    try:
        out, _ = process.communicate(timeout=bound(STOP_S))
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        raise
    return process.returncode, out


WAYS = {
    "installed executable": lambda: [_installed("neural_predictor")],
    "python -m gamma_net_ros.entry": lambda: [sys.executable, "-m", "gamma_net_ros.entry", "neural_predictor"],
    "python -m gamma_net_ros.neural_predictor.node": lambda: [
        sys.executable,
        "-m",
        "gamma_net_ros.neural_predictor.node",
    ],
}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("way", WAYS)
def test_a_signal_while_torch_imports_ends_the_node_in_one_line(way, sig):
    process = _popen([*WAYS[way](), "--ros-args", "--params-file", str(ATARI)])
    # torch's shared library is mapped at the start of its import, which then runs for seconds.
    _wait_until(lambda: _mapped(process.pid, "libtorch"), STOP_S, "importing torch", process)
    code, out = _interrupt(process, sig)
    assert code == 0, out
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
    stopped = [line for line in out.splitlines() if STOPPED in line]
    assert len(stopped) == 1 and "neural_predictor" in stopped[0], out


NO_TORCH = sorted(set(NODES) - {"neural_predictor"})
#: Imports the modules named after the library in argv in turn; after each, whether the library is loaded yet.
LOADED_PROBE = """import importlib, sys
for module in sys.argv[2:]:
    importlib.import_module(module)
    print(sys.argv[1] in sys.modules)
"""


def _loaded_after_each(library: str, names: list[str]) -> dict[str, bool]:
    """Each of the nodes ``names``: whether ``library`` is loaded once its module and those before it are."""
    done = subprocess.run(
        [sys.executable, "-c", LOADED_PROBE, library, *(NODES[name] for name in names)],
        capture_output=True,
        text=True,
        timeout=bound(STOP_S),
    )
    assert done.returncode == 0, done.stderr
    return dict(zip(names, (line == "True" for line in done.stdout.split()[-len(names) :]), strict=True))


@pytest.fixture(scope="module")
def imports_torch() -> dict[str, bool]:
    """Each node module: whether importing it imports torch. One process imports them in turn (a start costs
    0.3-0.7 CPU s); past the first that does, each is asked again in a process of its own."""
    found = _loaded_after_each("torch", NO_TORCH)
    first = next((i for i, name in enumerate(NO_TORCH) if found[name]), len(NO_TORCH))
    for name in NO_TORCH[first + 1 :]:
        found.update(_loaded_after_each("torch", [name]))
    return found


@pytest.mark.parametrize("name", NO_TORCH)
def test_nodes_that_need_no_torch_do_not_import_it(name, imports_torch):
    assert not imports_torch[name], f"{NODES[name]} imports torch"


#: Nodes that never learn: no kernel to compile, so no numba to load at their start (about 0.3 CPU s each).
NEVER_LEARN = sorted(set(NODES) - {"horde", "neural_predictor", "predictor"})


def test_nodes_that_never_learn_do_not_load_numba():
    loaded = _loaded_after_each("numba", NEVER_LEARN)
    first = next((name for name in NEVER_LEARN if loaded[name]), None)
    assert first is None, f"{NODES[first]} (or a module it imports) loads numba"
    assert "reflex" in NEVER_LEARN


@cold_start
def test_a_signal_while_the_learner_compiles_ends_the_node_in_one_line(tmp_path):
    command = node_command("gamma_net_ros.predictor", params_file=ARM, params={"checkpoint_path": ""})
    process = _popen(command, env={"NUMBA_CACHE_DIR": str(tmp_path / "numba")})
    lines: list[str] = []
    deadline = time.monotonic() + bound(COLD_START_S)
    while not any("compiling learner kernels" in line for line in lines) and time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
    assert any("compiling learner kernels" in line for line in lines), "".join(lines)
    time.sleep(1.0)  # inside the compilation: an empty cache takes minutes here
    code, rest = _interrupt(process)
    out = "".join(lines) + rest
    assert code == 0, out
    assert "Traceback" not in out, out
    assert "ready: learner kernels" not in out, out  # it was stopped while compiling, not after
    assert len([line for line in out.splitlines() if STOPPED in line]) == 1, out


#: The learning nodes, each with the settings it starts from in its launch file.
LEARNERS = {"horde": None, "predictor": ARM, "neural_predictor": ATARI}
#: Seconds after the process starts: the interpreter's own start-up, the imports, rclpy's start, the build.
SIGNAL_POINTS_S = (0.0, 0.005, 0.02, 0.05, 0.1, 0.3, 1.0, 3.0)


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_sigint_at_any_point_of_a_start_ends_the_node_with_code_0(name, tmp_path):
    """Started as the demo, the benchmarks and the tests start nodes (NodeProcess), stopped anywhere in its start.

    A SIGINT in the interpreter's own start-up, before the node's handlers exist, used to end it
    in a KeyboardInterrupt (code -2): a resumed horde node stopped that early failed a test.
    """
    command = node_command(NODES[name], params_file=LEARNERS[name])
    for point in SIGNAL_POINTS_S:
        log = tmp_path / f"{name}-{point}.log"
        process = NodeProcess(command, log_path=log).start()
        try:
            time.sleep(point)  # the point of the start to interrupt: part of what is checked, not a wait
            os.killpg(process.process.pid, signal.SIGINT)
            code = process.wait(timeout=STOP_S)
        finally:
            process.stop(timeout=STOP_S)
        out = log.read_text()
        assert code == 0, f"SIGINT {point} s after the start: rc {code}\n{out}"
        assert "Traceback" not in out and "KeyboardInterrupt" not in out, out
        assert out.count(STOPPED) <= 1, out
        if point <= 0.02:  # still in the interpreter's start-up or the first imports: that one line only
            assert out.strip() == f"[{name}] {STOPPED}", f"SIGINT {point} s after the start:\n{out}"


def _bag(path: pathlib.Path, n: int) -> None:
    with JointStateBagWriter(path) as writer:
        for i in range(n):
            writer.write(
                stamp_ns=RECORDING_EPOCH_NS + i * NANOSECONDS // 30,
                names=["shoulder", "elbow"],
                position=[-0.75 + 0.001 * i, 1.7],
                velocity=[0.1 * (i % 7), 0.0],
            )


class Predictions(Node):
    def __init__(self) -> None:
        super().__init__("cold_start_rig")
        self.received = 0
        self.create_subscription(
            Prediction, "predictions", lambda _: setattr(self, "received", self.received + 1), 1000
        )


@cold_start
def test_a_cold_predictor_says_it_compiles_then_takes_every_message_of_a_playback(tmp_path, executor, spin):
    n = 150
    _bag(tmp_path / "bag", n)
    rig = Predictions()
    executor.add_node(rig)
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    predictor = NodeProcess(
        node_command(
            "gamma_net_ros.predictor",
            params_file=ARM,
            params={"reliable_input": True, "checkpoint_path": ""},
            node="predictor",
        ),
        log_path=tmp_path / "predictor.log",
        env=env,
    ).start()
    # Started together, as a launch file does: the player waits for the consumer through its warm-up.
    player = NodeProcess(
        node_command(
            "gamma_net_ros.bag_player",
            params={"bag": str(tmp_path / "bag"), "reliable": True, "consumers": 1, "rate": 0.0},
        ),
        log_path=tmp_path / "player.log",
        env=env,
    ).start()
    try:
        assert spin(executor, lambda: not player.running, timeout=COLD_START_S), "the player never finished"
        assert player.wait() == 0, (tmp_path / "player.log").read_text()
        assert spin(executor, lambda: rig.received >= n, timeout=120), rig.received
    finally:
        player.stop(timeout=bound(10.0))
        assert predictor.stop(timeout=bound(10.0)) == 0
    log = (tmp_path / "predictor.log").read_text()
    compiling, ready = log.find("compiling learner kernels"), log.find("ready: learner kernels warm")
    assert 0 <= compiling < ready, log
    assert "Traceback" not in log
    last = (tmp_path / "player.log").read_text().strip().splitlines()[-1]
    assert f"published {n}, acknowledged {n}" in last, last
    assert rig.received == n  # one prediction per reading taken


@cold_start
@pytest.mark.parametrize("when", ["importing", "compiling"])
def test_ctrl_c_on_a_launch_whose_predictor_is_starting_ends_every_process_cleanly(tmp_path, monkeypatch, when):
    from ros2_cli import assert_clean_shutdown, launch

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))  # empty: the predictor compiles for long
    run = launch("gamma_net_ros", "playback.launch.py", cwd=tmp_path, log_path=tmp_path / "launch.log")
    try:
        if when == "importing":
            # Inside the imports: numpy's core is mapped (entry's handlers are in place before it), numba's
            # seconds of import and the kernels' compiling still to come.
            def importing() -> bool:
                found = re.search(r"\[predictor-\d+\]: process started with pid \[(\d+)\]", run.output)
                return found is not None and _mapped(int(found.group(1)), "_multiarray_umath")

            assert wait_until(importing, timeout=STOP_S), run.output
        else:
            assert run.wait_for("compiling learner kernels", timeout=COLD_START_S), run.output
        code = run.interrupt(timeout=STOP_S)
    finally:
        run.close()
    out = run.output
    assert code == 0, out
    assert_clean_shutdown(out, ["predictor"])
    assert out.count(STOPPED) == 1, out
    assert "ready: learner kernels" not in out, out


def test_ctrl_c_on_a_horde_launch_while_it_compiles_ends_it_cleanly_and_leaves_cache_and_checkpoint_usable(
    tmp_path, monkeypatch
):
    """Ctrl-C while the horde node compiles on an empty cache: no SIGTERM from launch, then a start that works."""
    from ros2_cli import assert_clean_shutdown, launch

    cache, checkpoint = tmp_path / "numba", tmp_path / "horde.npz"
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(cache))  # empty: the node compiles for long
    run = launch(
        "gamma_net_ros", "horde.launch.py", f"checkpoint_path:={checkpoint}", cwd=tmp_path, log_path=tmp_path / "l.log"
    )
    try:
        assert run.wait_for("compiling learner kernels", timeout=COLD_START_S), run.output
        code = run.interrupt(timeout=STOP_S)
    finally:
        run.close()
    out = run.output
    assert code == 0, out
    assert_clean_shutdown(out, ["horde"])  # it stopped before launch escalates (SIGTERM after 5 s)
    assert out.count(STOPPED) == 1 and "ready: learner kernels" not in out, out

    # The compilation was cut short, the process ended with the worker inside numba: what it left
    # (whole cache files, a checkpoint of nothing learned, or none) serves the next start.
    log = tmp_path / "again.log"
    command = node_command("gamma_net_ros.horde.node", params={"checkpoint_path": str(checkpoint)})
    again = NodeProcess(command, log_path=log, env={"NUMBA_CACHE_DIR": str(cache)}).start()
    try:
        wait_until(lambda: "ready: learner kernels" in log.read_text() or not again.running, timeout=COLD_START_S)
        assert "ready: learner kernels" in log.read_text(), log.read_text()
    finally:
        assert again.stop(timeout=STOP_S) == 0, log.read_text()
    assert "Traceback" not in log.read_text()


def test_a_middleware_that_does_not_start_is_reported_in_one_line(monkeypatch, capfd):
    """rclpy.init holds back rcl's stderr; should it hang (the middleware stuck), the node still says so.

    A hang of Fast DDS's start cannot be made on demand, so rclpy.init is replaced by a slow one
    here; the line is what a user would see on the real stderr while it waits.
    """
    from gamma_net_ros import node_main

    calls = []

    def slow_init(**kwargs):
        calls.append(kwargs)
        time.sleep(0.5)

    monkeypatch.setattr(node_main.rclpy, "init", slow_init)
    node_main._init(["x"], name="predictor", warn_after=0.05)
    err = capfd.readouterr().err
    assert err.count("\n") == 1 and err.startswith("[predictor] still starting the ROS 2 middleware after 0.05 s")
    assert calls and calls[0]["args"] == ["x"]

    monkeypatch.setattr(node_main.rclpy, "init", lambda **kwargs: None)
    node_main._init(["x"], name="predictor", warn_after=0.5)  # a quick start: no line
    time.sleep(0.6)
    assert capfd.readouterr().err == ""


def test_a_warm_start_does_not_say_it_compiles(tmp_path):
    """The "compiling" line only where numba compiles: not on a start whose kernels load from the cache."""
    command = node_command("gamma_net_ros.horde.node")
    logs = []
    for start in ("first", "second"):  # the first fills the cache should it lack these kernels
        log = tmp_path / f"{start}.log"
        process = NodeProcess(command, log_path=log).start()
        try:
            ready = lambda log=log, process=process: "ready: learner kernels" in log.read_text() or not process.running  # noqa: E731
            wait_until(ready, timeout=COLD_START_S)
        finally:
            assert process.stop(timeout=STOP_S) == 0, log.read_text()
        logs.append(log.read_text())
    warm = logs[1]
    assert "ready: learner kernels warm after" in warm, warm
    assert "compiling learner kernels" not in warm, warm
    assert "Traceback" not in warm, warm


def test_the_readme_td_lambda_setting_starts_a_predictor(tmp_path):
    """The arm guide: `-p predictor:learner.lam:=0.9`; its warm-up must learn as the node will (the forward view, on
    the draws), and so must `lambda_view:=backward`'s (on the fixed ladder)."""
    from guides import guide_text
    from ros2_cli import Background

    assert "-p predictor:learner.lam:=0.9" in guide_text("arm")
    command = ["ros2", "run", "gamma_net_ros", "predictor", "--ros-args", "--params-file", str(ARM)]
    for view in ("forward", "backward"):
        settings = ["-p", "predictor:learner.lam:=0.9", "-p", f"predictor:learner.lambda_view:={view}"]
        run = Background([*command, *settings], cwd=tmp_path, log_path=tmp_path / f"{view}.log")
        try:
            assert run.wait_for("ready: learner kernels warm", timeout=COLD_START_S), run.output
            code = run.interrupt(timeout=STOP_S)
        finally:
            run.close()
        assert code == 0, run.output
        assert "refusing to start" not in run.output and "Traceback" not in run.output, run.output
