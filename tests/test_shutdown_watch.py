"""A node process the middleware holds after a stop ends anyway; its own slow cleanup is never cut.

Each case is a real node process (``run_node`` with a small node class, as every node's ``main``)
stopped with SIGINT. The middleware's hang is injected where it happens in the field: a call of
rclpy's teardown (``rclpy.try_shutdown``) that never returns, its code placed in rclpy's directory,
so the watch sees what it sees on a robot: the main thread held inside rclpy.
"""

from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import sys
import textwrap

import pytest
from waiting import bound, wait_until

from gamma_net_ros import shutdown_watch

pytestmark = pytest.mark.ros

SCRIPT = textwrap.dedent(
    """
    import ctypes, pathlib, signal, sys, threading, time
    import rclpy
    from rclpy.node import Node
    from gamma_net_ros import node_main, shutdown_watch

    MODE, MARK = sys.argv[1], pathlib.Path(sys.argv[2])

    if MODE == "held":  # the middleware never lets go: a call inside rclpy that does not return
        source = "def try_shutdown(*args, **kwargs):\\n    while True:\\n        time.sleep(0.05)\\n"
        code = compile(source, shutdown_watch.RCLPY_DIR + "/utilities.py", "exec")
        scope = {"time": time}
        exec(code, scope)
        node_main.rclpy.try_shutdown = scope["try_shutdown"]
    shutdown_watch.HELD_S = 0.02 if MODE == "busy" else 1.0  # the loop watch's bound, short for the test


    def churn():  # Python running in another thread: frames made and freed all the time
        def deep(n):
            return 0 if n == 0 else 1 + deep(n - 1)
        while True:
            for depth in (1, 50, 200, 5):
                deep(depth)


    def hold_the_gil(seconds):
        # A C call made with the GIL held (ctypes.PyDLL keeps it): no Python thread runs meanwhile.
        ctypes.PyDLL(None).sleep(seconds)


    class Probe(Node):
        def __init__(self):
            super().__init__("probe")
            self.create_timer(0.05, self.tick)
            self.ticks = 0
            print("ready", flush=True)

        def tick(self):
            self.ticks += 1
            if self.ticks == 5 and MODE == "busy":  # the loop held by Python code while three threads run Python
                for _ in range(3):
                    threading.Thread(target=churn, daemon=True).start()
                print("holding", flush=True)
                end = time.monotonic() + 4.0
                while time.monotonic() < end:
                    sum(range(1000))
                print("let go", flush=True)
            if self.ticks == 5 and MODE in ("gil", "gil_forever", "starved_then_gil"):
                if MODE == "starved_then_gil":  # a loop slowed past the bound (the watchdog fires), then held
                    time.sleep(shutdown_watch.HELD_S * 1.6)
                if MODE == "gil_forever":  # as a call that retries on EINTR: a stop signal cannot end the hold
                    signal.pthread_sigmask(signal.SIG_BLOCK, (signal.SIGINT, signal.SIGTERM))
                print("holding", flush=True)
                hold_the_gil(3 if MODE == "gil" else 600)
                print("let go", flush=True)

        def destroy_node(self):
            if MODE == "slow":  # the node's own cleanup, longer than the watch's grace and its report
                time.sleep(shutdown_watch.REPORT_S + 1.0)
            MARK.write_text("cleaned up")
            super().destroy_node()


    sys.argv = [sys.argv[0], "--ros-args", "--log-level", "warn"]
    node_main.run_node(Probe)
    """
)


def _start(tmp_path: pathlib.Path, mode: str) -> tuple[subprocess.Popen, pathlib.Path]:
    script = tmp_path / "probe.py"
    script.write_text(SCRIPT)
    mark = tmp_path / "cleaned.txt"
    env = dict(os.environ, ROS_LOG_DIR=str(tmp_path / "log"))
    return subprocess.Popen(
        [sys.executable, str(script), mode, str(mark)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ), mark


def held_files(tmp_path: pathlib.Path) -> list[pathlib.Path]:
    return sorted((tmp_path / "log").glob("probe_*_held_stacks.txt"))


def _stop(tmp_path: pathlib.Path, mode: str) -> tuple[int, str, pathlib.Path]:
    process, mark = _start(tmp_path, mode)
    try:
        assert process.stdout.readline().strip() == "ready"
        if mode in ("gil", "busy"):
            assert process.stdout.readline().strip() == "holding"
            assert process.stdout.readline().strip() == "let go"
        process.send_signal(signal.SIGINT)
        # Ended by the watch at about GRACE_S, or after the slow cleanup (9 s): before launch's SIGKILL at 10 s
        # on a quiet machine; the bound is generous for a busy one.
        code = process.wait(timeout=bound(30))
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return code, process.stderr.read(), mark


def test_a_node_held_by_the_middleware_after_its_cleanup_ends_with_one_line_and_its_stacks(tmp_path):
    code, stderr, mark = _stop(tmp_path, "held")
    assert code == 0, stderr
    assert mark.read_text() == "cleaned up"  # its own cleanup ran before the hold
    lines = [line for line in stderr.splitlines() if "middleware still held" in line]
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    stacks = pathlib.Path(lines[0].rsplit("every thread's stack: ", 1)[1].rstrip(")"))
    assert stacks.parent == tmp_path / "log"
    assert "try_shutdown" in stacks.read_text()  # the frame that held it


def test_a_node_whose_own_cleanup_is_slow_is_not_cut(tmp_path):
    code, stderr, mark = _stop(tmp_path, "slow")
    assert code == 0, stderr
    assert mark.read_text() == "cleaned up"
    assert "middleware still held" not in stderr
    (line,) = [line for line in stderr.splitlines() if "still stopping" in line]  # where it spent the time, once
    stacks = pathlib.Path(line.rsplit("every thread's stack: ", 1)[1].rstrip(")"))
    assert "destroy_node" in stacks.read_text()
    # 9 s of its own cleanup, past the loop watch's 7 s (launch's SIGTERM comes at 5 s): its record and line too.
    (line,) = [line for line in stderr.splitlines() if "held at least once" in line]
    (path,) = held_files(tmp_path)
    assert line.endswith(str(path)) and "destroy_node" in path.read_text()


def test_a_quick_clean_stop_leaves_no_record_of_a_held_loop(tmp_path):
    code, stderr, mark = _stop(tmp_path, "plain")
    assert code == 0 and mark.read_text() == "cleaned up", stderr
    assert "held at least once" not in stderr and "still stopping" not in stderr and held_files(tmp_path) == []


def test_a_frame_counts_as_rclpys_only_in_rclpys_own_files():
    frame = sys._getframe()
    assert not shutdown_watch.in_rclpy(frame)
    assert not shutdown_watch.in_rclpy(None)
    scope = {"sys": sys}
    exec(compile("def here():\n    return sys._getframe()\n", shutdown_watch.RCLPY_DIR + "/node.py", "exec"), scope)
    assert shutdown_watch.in_rclpy(scope["here"]())


def test_a_loop_held_with_the_gil_leaves_every_threads_stack_and_one_line(tmp_path):
    """The C call held the GIL 3 s (the test's bound: 1 s): the node then stopped cleanly and said where it was held."""
    code, stderr, mark = _stop(tmp_path, "gil")
    assert code == 0 and mark.read_text() == "cleaned up", stderr
    (line,) = [line for line in stderr.splitlines() if "held at least once" in line]
    (path,) = held_files(tmp_path)
    assert line.endswith(f"every thread's stack then is in {path}")
    stacks = path.read_text()
    # written by the C watchdog, 1 s past the bound: no Python thread could run to write them
    assert "Timeout (0:00:02)!" in stacks and "hold_the_gil" in stacks and "tick" in stacks, stacks


def test_a_node_killed_while_a_thread_holds_the_gil_leaves_where_it_was_held(tmp_path):
    """As in the field: deaf to SIGINT and SIGTERM (no Python runs), killed; the stacks were written in C."""
    process, _ = _start(tmp_path, "gil_forever")
    try:
        assert process.stdout.readline().strip() == "ready"
        assert process.stdout.readline().strip() == "holding"
        process.send_signal(signal.SIGINT)
        process.send_signal(signal.SIGTERM)
        # The whole dump, its main thread last (a kill while the C thread writes would cut it short).
        assert wait_until(lambda: "hold_the_gil" in "".join(p.read_text() for p in held_files(tmp_path)), 30)
        assert process.poll() is None  # still held: the signals could not reach Python
    finally:
        process.kill()
        process.wait()
    (path,) = held_files(tmp_path)  # left behind by the killed process
    assert path.read_text().startswith("Timeout (0:00:02)!"), path.read_text()


def test_a_hold_right_after_a_slow_turn_of_the_loop_is_written_too(tmp_path):
    """The loop first stalls past the bound without holding the GIL (a starved machine): the looking thread
    writes the stacks of a loop that is merely slow. The hold that follows before the loop comes round is
    written by the C watchdog."""
    process, _ = _start(tmp_path, "starved_then_gil")
    try:
        assert process.stdout.readline().strip() == "ready"
        assert process.stdout.readline().strip() == "holding"
        assert wait_until(lambda: "hold_the_gil" in "".join(p.read_text() for p in held_files(tmp_path)), 30)
    finally:
        process.kill()
        process.wait()
    (path,) = held_files(tmp_path)
    dumps = re.split(r"Timeout \(\d+:\d\d:\d\d\)!", path.read_text())[1:]
    assert len(dumps) >= 2 and "hold_the_gil" not in dumps[0], path.read_text()  # the slow turn's, then the hold's


def test_a_loop_held_by_python_code_while_threads_run_python_is_written_and_survives_it(tmp_path):
    """Every 0.02 s of a 4 s hold, with three threads making and freeing frames: the stacks are written each time,
    by a thread that holds the GIL. faulthandler's C watchdog, reading the frames without a lock, ended such a
    process with SIGSEGV within seconds at that rate; it now writes only while no Python can run."""
    code, stderr, mark = _stop(tmp_path, "busy")
    assert code == 0 and mark.read_text() == "cleaned up", stderr
    (path,) = held_files(tmp_path)
    dumps = path.read_text().split("Timeout (0:00:00)!")[1:]
    assert len(dumps) >= 20 and any("tick" in d and "churn" in d for d in dumps), path.read_text()[:3000]


def test_the_stacks_are_due_a_bound_after_each_turn_or_dump_and_once_after_the_stop(tmp_path):
    held, stopping = shutdown_watch.HELD_S, shutdown_watch.STOPPING_HELD_S
    watch = shutdown_watch.LoopWatch("probe", log_dir=tmp_path)
    try:
        start = watch.turned_at + 1000.0  # times ahead of the clock: the watch's own thread finds nothing due
        for turn in range(100):  # a loop turning every 0.1 s is never due
            watch.turned_at = start + 0.1 * turn
            assert watch.due(watch.turned_at + 0.099) is None
        last = watch.turned_at
        assert watch.due(last + held - 0.01) is None and watch.due(last + held) == held
        watch.written_at = last + held  # written then: due again a bound later, while the hold lasts
        assert watch.due(last + 2 * held - 0.01) is None and watch.due(last + 2 * held) == held
        watch.stopped_at = last + 3 * held
        assert watch.due(watch.stopped_at + stopping - 0.01) is None
        assert watch.due(watch.stopped_at + stopping) == stopping
        watch.stop_written = True  # once
        assert watch.due(watch.stopped_at + 10 * stopping) is None
    finally:
        assert watch.close() is None  # nothing written: no file left
    assert list(tmp_path.iterdir()) == []
