"""Shared fixtures. Node tests run real rclpy nodes exchanging real messages."""

from __future__ import annotations

import faulthandler
import fcntl
import json
import os
import signal
import sys
import tempfile
import time
import warnings

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from ros_isolation import claim_domain

try:
    from waiting import SLOWDOWN, bound, spin_until
except ValueError as exc:  # a bad GAMMA_NET_TEST_SLOWDOWN: a usage error (exit 4) naming the value
    raise pytest.UsageError(str(exc)) from None

# Each pytest process claims its own domain: the session, and every pytest-xdist worker (a process
# of its own that imports this file), so tests running side by side never hear each other.
ROS_DOMAIN_ID = claim_domain()
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pytest_report_header(config):
    return (
        f"ROS_DOMAIN_ID={ROS_DOMAIN_ID} (each xdist worker claims its own) ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST; "
        f"GAMMA_NET_TEST_SLOWDOWN={SLOWDOWN:g} (every wait's bound x{SLOWDOWN:g})"
    )


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session):
    """Fast DDS's shared-memory segments of processes that died without closing them are removed first.

    The suite SIGKILLs nodes on purpose, and each leaves segments in /dev/shm; Fast DDS is known
    to stall on such leftovers (eProsima/Fast-DDS#1144, #2051). `fastdds shm clean` removes only
    those no live process holds, so a run beside another is untouched. Once a run (the controller).
    """
    if "PYTEST_XDIST_WORKER" in os.environ:
        return
    import shutil
    import subprocess

    if shutil.which("fastdds"):
        subprocess.run(["fastdds", "shm", "clean"], capture_output=True, timeout=bound(30), check=False)


#: A copy of the terminal's stderr, taken before any test's output is captured (the hang guard writes there).
_REAL_STDERR_FD = 2


def pytest_configure(config):
    global _REAL_STDERR_FD
    # pytest has stopped its start-up capture by now: fd 2 is the terminal's (or CI's log).
    _REAL_STDERR_FD = os.dup(2)
    # pytest-timeout's limit on one test (pyproject's `timeout`, for the development machine) is a
    # bound like any other: scaled, unless given on the command line or in PYTEST_TIMEOUT.
    if config.getoption("timeout", None) is None and "PYTEST_TIMEOUT" not in os.environ:
        config.option.timeout = bound(float(config.getini("timeout")))


#: How far past pytest-timeout's limit the hang guard waits, on the development machine (scaled).
HANG_GUARD_MARGIN_S = 30.0


def hang_guard_seconds(config) -> float:
    """The hang guard's limit on one test (setup, call and teardown): pytest-timeout's, plus as much again, at most
    a scaled :data:`HANG_GUARD_MARGIN_S`.

    pytest-timeout fails a test in place, with its stacks, when the main thread runs Python; the
    guard is for what it cannot end (a thread holding the GIL inside C, a wait no signal breaks).
    0 (no limit) where pytest-timeout has none.
    """
    limit = float(config.getoption("timeout", None) or 0.0)
    return limit + min(limit, bound(HANG_GUARD_MARGIN_S)) if limit > 0 else 0.0


def _hang_file(folder, worker: str):
    return folder / f"hang-guard-{worker}.txt"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """The hang guard: a test still running after :func:`hang_guard_seconds` ends its worker, with every stack.

    faulthandler's watchdog is a C thread that needs no GIL: it writes every thread's Python
    stack, then ends the process. Under pytest-xdist the stacks go to a file of the run that the
    controller adds to the test's failure (``pytest_handlecrashitem`` below), the worker is
    replaced and the run goes on; in one process they go to the terminal's stderr and the run ends.
    """
    limit = hang_guard_seconds(item.config)
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not limit:
        yield
        return
    if worker:
        out = open(_hang_file(item.config._tmp_path_factory.getbasetemp().parent, worker), "w")
    else:
        out = os.fdopen(os.dup(_REAL_STDERR_FD), "w")
    try:
        if worker:  # the terminal gets faulthandler's own first line, "Timeout (H:MM:SS)!", and the test's frame
            out.write(f"{item.nodeid} still running after {limit:g} s (the hang guard, tests/conftest.py): ")
            out.write("every thread's stack\n")
            out.flush()
        faulthandler.dump_traceback_later(limit, exit=True, file=out)
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()
        if worker:
            out.seek(0)
            out.truncate()
        out.close()


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem, report, sched):
    """A worker the hang guard ended: its stacks join the test's failure, and the test is not run again.

    pytest-xdist puts a crashed worker's unfinished file back in the queue, the test it crashed
    in among them; a test that hung once would hang its next worker too. Where the file is still
    queued it is marked done here; where another worker has taken it already, that worker skips
    the test (``pytest_runtest_setup``).
    """
    folder = sched.config._tmp_path_factory.getbasetemp()
    path = _hang_file(folder, report.node.gateway.id)
    held = path.read_text() if path.is_file() else ""
    if held.strip():
        report.longrepr = f"{report.longrepr}\n{held}"
        for unit in getattr(sched, "workqueue", {}).values():  # LoadScopeScheduling's (--dist loadfile)
            if crashitem in unit:
                unit[crashitem] = True


def _cpu_seconds() -> float:
    """CPU seconds of this process and of its children that have ended (a launch's nodes, once it reaped them)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item._cpu_at_start = _cpu_seconds()
    if "PYTEST_XDIST_WORKER" in os.environ and _held_before(item):
        pytest.skip("held past the hang guard's limit on an earlier worker: its failure has every thread's stack")


def _held_before(item) -> bool:
    """Whether a worker the hang guard ended was in this test (pytest-xdist may have handed it on already)."""
    folder = item.config._tmp_path_factory.getbasetemp().parent
    for path in folder.glob("hang-guard-*.txt"):
        text = path.read_text(errors="replace")
        if text.startswith(f"{item.nodeid} still running after ") and "\nTimeout (" in text:
            return True
    return False


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Each test's CPU seconds (setup, call and teardown, its ended processes included) as the ``cpu_s``
    property of a JUnit report: beside its wall time, what a test spends computing and what waiting."""
    yield
    start = getattr(item, "_cpu_at_start", None)
    if start is not None:
        item.user_properties.append(("cpu_s", round(_cpu_seconds() - start, 3)))


#: Each rerun's first failure: (test, its last lines). Collected where reports arrive (the controller under xdist).
_RERUNS: list[tuple[str, str]] = []
#: How many of a rerun failure's last lines the summary shows: the exception, the assertion's message and
#: any held stacks it names (tests/ros2_cli.py's held_stacks).
RERUN_LINES = 60


def pytest_runtest_logreport(report):
    """A test that passes on its rerun (``make test``'s RERUN_ARGS) leaves only an R in the log; CI keeps
    only the log, so its first failure is kept here for the summary, which names the flake and why."""
    if report.outcome == "rerun":
        lines = [line for line in report.longreprtext.splitlines() if line.strip()]
        _RERUNS.append((report.nodeid, "\n".join(lines[-RERUN_LINES:])))


def pytest_terminal_summary(terminalreporter):
    if _RERUNS:
        terminalreporter.section("reruns: the first failure of each test run again")
        for nodeid, tail in _RERUNS:
            terminalreporter.write_line(f"{nodeid}:")
            terminalreporter.write_line(tail)


#: Each test file's measured seconds (`tools/file_durations.py`), which orders the files longest first.
DURATIONS = os.environ.get("GAMMA_NET_TEST_DURATIONS", os.path.join(os.path.dirname(__file__), "durations.json"))


@pytest.hookimpl(trylast=True)  # after pytest's own reordering for module fixtures, which stays within a file
def pytest_collection_modifyitems(config, items):
    """The files run longest first, and those with ``serial`` tests last.

    ``make test`` hands whole files to its workers in collection order (``--dist loadfile
    --no-loadscope-reorder``), each worker taking the next file as it runs out. Longest first, the
    last files handed out are the shortest, so the run never ends with one worker alone in a long
    file. A serial test runs alone wherever it comes, but among other tests it first waits for the
    other workers' tests to end, with its own worker idle; last, it mostly follows another serial
    test or nothing. A file not yet measured counts as the longest (started early rather than
    last). A file's tests keep their order.
    """
    if not os.path.isfile(DURATIONS):
        return
    with open(DURATIONS) as f:
        seconds = json.load(f)["seconds"]
    files = [item.nodeid.split("::", 1)[0] for item in items]
    serial = {name for name, item in zip(files, items) if item.get_closest_marker("serial") is not None}
    unmeasured = max(seconds.values(), default=0.0) + 1.0
    # Ties keep the collection order, so each file's tests stay together and in order.
    rank = {name: (name in serial, -seconds.get(name, unmeasured), i) for i, name in reversed(list(enumerate(files)))}
    order = sorted(range(len(items)), key=lambda i: rank[files[i]])
    items[:] = [items[i] for i in order]


#: The stop signals, whose disposition and mask a process started from a test inherits.
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_DEFAULT_HANDLERS = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}


@pytest.fixture(autouse=True)
def _stop_signals_as_a_terminal_leaves_them(request):
    """Each test starts with SIGINT and SIGTERM handled and unblocked as in a fresh interpreter.

    A process started from the test inherits an ignored signal and the thread's signal mask: one
    that a test left ignored or blocked would start every later node, launch and script of the
    worker deaf to Ctrl-C, and their tests would fail at their stop, far from the cause. A test
    that leaves them changed is named in a warning, and they are restored.
    """
    yield
    changed = [sig.name for sig in _STOP_SIGNALS if signal.getsignal(sig) is not _DEFAULT_HANDLERS[sig]]
    for sig in _STOP_SIGNALS:
        signal.signal(sig, _DEFAULT_HANDLERS[sig])
    blocked = set(signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)) & set(_STOP_SIGNALS)
    changed += [f"{signal.Signals(sig).name} blocked" for sig in blocked]
    if changed:
        warnings.warn(f"{request.node.nodeid} left {', '.join(changed)}: restored", stacklevel=1)


@pytest.fixture(autouse=True)
def _serial_tests_run_alone(request, tmp_path_factory):
    """Under pytest-xdist, a test marked ``serial`` runs while no other test of the run does.

    Such tests check something timed; beside another test they could miss it. A test that only
    reports timings (the compute benchmarks) is not ``serial``: a worker waiting on a serial test is
    idle. Every test holds a shared lock on a file of this run (in the run's temporary folder, which
    the workers share) and a ``serial`` one an exclusive lock. A gate file taken before either lets
    a waiting serial test in ahead of tests that start after it, so it never waits to the end.
    """
    if "PYTEST_XDIST_WORKER" not in os.environ:
        yield
        return
    folder = tmp_path_factory.getbasetemp().parent  # .../pytest-N, shared by this run's workers
    serial = request.node.get_closest_marker("serial") is not None
    with open(folder / "serial-gate.lock", "a") as gate, open(folder / "serial-main.lock", "a") as main:
        waited = time.monotonic()
        fcntl.flock(gate, fcntl.LOCK_EX)
        fcntl.flock(main, fcntl.LOCK_EX if serial else fcntl.LOCK_SH)
        if not serial:
            fcntl.flock(gate, fcntl.LOCK_UN)
        # The wait is in the test's setup time: a JUnit report keeps it apart (tools/file_durations.py).
        request.node.user_properties.append(("serial_lock_wait_s", round(time.monotonic() - waited, 3)))
        yield


@pytest.fixture
def live_view_port():
    """The live view's port, 8765, as the guides write it, held by this test alone.

    Two guide tests serve there (docs/live-view.md's and docs/own-robot.md's): each takes this
    lock on the machine for its run, so they take turns (with each other, and with another run of
    the suite on the machine) while the other worker's tests run beside them.
    """
    with open(os.path.join(tempfile.gettempdir(), "gamma_net_test_port_8765.lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield 8765


@pytest.fixture(scope="session")
def rclpy_session():
    """rclpy initialised once for the session (in this process's own domain)."""
    try:
        import rclpy
        from gamma_net_msgs.msg import Prediction  # noqa: F401
    except ImportError as exc:  # pragma: no cover - environment problem, not a test result
        pytest.fail(f"ROS 2 is not importable ({exc}): run `make test`, or `source tools/env.sh` first")
    rclpy.init()
    yield rclpy
    rclpy.try_shutdown()


@pytest.fixture
def executor(rclpy_session):
    """A single-threaded executor; nodes added to it are destroyed after the test."""
    from rclpy.executors import SingleThreadedExecutor

    ex = SingleThreadedExecutor()
    yield ex
    for node in list(ex.get_nodes()):
        ex.remove_node(node)
        node.destroy_node()
    ex.shutdown()


@pytest.fixture
def spin():
    """``spin(executor, predicate, timeout)``: spin until the predicate holds, within ``bound(timeout)``."""
    return spin_until


@pytest.fixture
def start_emulator():
    """Starts servo emulators (Protocol 2.0 on a pty, each its own process): ``start(positions) -> (port, client)``.

    Request it before ``executor`` so the emulators outlive the nodes that use them.
    """
    import pathlib
    import shutil
    import sys
    import tempfile

    from gamma_net_ros.hardware.emulator import EmulatorClient
    from gamma_net_ros.processes import NodeProcess

    started = []

    def start(positions=(0.0, 0.0), ids=(1, 2)):
        folder = tempfile.mkdtemp(prefix="dxl-", dir="/tmp")  # short: a Unix socket path has ~100 characters
        link = f"{folder}/ttyDXL"
        command = [sys.executable, "-u", "-m", "gamma_net_ros.hardware.emulator", "--link", link]
        command += ["--ids", *map(str, ids), "--positions", *map(str, positions)]
        log = pathlib.Path(folder, "emulator.log")
        process = NodeProcess(command, log_path=log).start()
        started.append((process, folder))
        client = EmulatorClient(f"{link}.ctl")
        try:
            client.wait_ready(timeout=bound(10.0))
        except TimeoutError as exc:
            pytest.fail(f"{exc}; its output: {log.read_text()[-2000:]}")
        return link, client

    yield start
    codes = []
    for process, folder in started:
        codes.append(process.stop(timeout=bound(10.0)))
        shutil.rmtree(folder, ignore_errors=True)
    assert all(code == 0 for code in codes), f"a servo emulator did not stop cleanly on SIGINT: exit codes {codes}"


@pytest.fixture
def one_torch_thread():
    """Torch on one thread for the test, restored after: small matrices on a shared 2-core machine
    run faster (two threads' OpenMP spin-waiting made them up to 10x slower here)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
