"""Stop trials: services stopped as supervisors stop them, at every moment of their start, counted.

    source tools/env.sh && ROS_DOMAIN_ID=66 python tools/stop_trials.py --trials 20

Four kinds of trial, each run as users run it, in a session of its own:

- **unit**: each systemd unit of docs/supervisors.md, its ``ExecStart`` as written (this checkout's
  paths, a fresh checkpoint folder), stopped as systemd stops it: ``KillSignal`` to the main process
  (``KillMode=mixed``), then, if anything of the unit is left after ``TimeoutStopSec``, SIGKILL to
  all of it.
- **launch**: ``ros2 launch gamma_net_ros horde.launch.py`` given SIGINT or SIGTERM.
- **reflex**: ``ros2 launch gamma_net_ros reflex.launch.py`` given SIGTERM; the operator and teleop
  must end before or with the reflex (their exits timed to 2 ms), none left behind.
- **docker**: each Dockerfile ``CMD`` of docs/supervisors.md, as written, run as PID 1 of a PID
  namespace of its own (``unshare --pid --fork``, as root), which is what a container's command is
  to the kernel: a signal PID 1 has no handler for is ignored, and when PID 1 ends every process
  left in the namespace is killed at once. Stopped as ``docker stop -t 30`` stops it: the
  ``STOPSIGNAL`` (default SIGTERM) to PID 1, SIGKILL after 30 s. Clean also needs every node that
  ``ros2 launch`` started to have said it finished before PID 1 ended (the kernel kills the rest).
  Not docker itself (no image, no network or file-system namespaces: none takes part in a stop).

Each stop lands in one phase of the start: ``starting`` (from the exec to the node's first line: the
interpreter, the imports, rclpy), ``warming`` (the node built, its kernels loading, before "ready"),
``running`` (after "ready"). A trial is clean when the main process exits 0 (or, for a SIGTERM to
``ros2 launch``, which exits 143 by its own design, when its nodes all exit 0), no process of it is
left once it has exited (none needed SIGKILL), no traceback was printed, and the checkpoint is there
and loads wherever the Horde was built (before that there is nothing to save). It prints a line per
trial and a table of the counts; exit code 1 if any trial was not clean.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "supervisors.md"
PHASES = ("starting", "warming", "running")
#: The Horde's lines that end one phase and begin the next.
BUILT, READY = "[horde]: ", "ready: learner kernels"


@dataclasses.dataclass(frozen=True)
class Unit:
    """A systemd unit of the guide, as much of it as a stop needs."""

    #: The unit's ``ExecStart``.
    exec_start: str
    #: ``KillSignal`` (systemd's default: SIGTERM).
    kill_signal: signal.Signals
    #: ``KillMode`` (systemd's default: control-group, the signal to every process of the unit).
    kill_mode: str
    #: ``TimeoutStopSec``, s (systemd's default: 90).
    timeout_stop_s: float


@dataclasses.dataclass
class Outcome:
    """What one stop did."""

    kind: str
    phase: str
    signal: str
    code: int | None
    left: list[str]
    killed: bool
    traceback: bool
    checkpoint_ok: bool
    order_ok: bool = True
    note: str = ""

    @property
    def clean(self) -> bool:
        return (
            self.code == 0 and not self.left and not self.killed and not self.traceback and self.checkpoint_ok
        ) and self.order_ok


def guide_units(text: str) -> list[Unit]:
    """The ``[Service]`` sections of the guide's ```ini blocks."""
    units = []
    for block in re.findall(r"```ini\n(.*?)```", text, flags=re.S):
        keys = dict(re.findall(r"^(\w+)=(.*)$", block, flags=re.M))
        if "ExecStart" not in keys:
            continue
        units.append(
            Unit(
                exec_start=keys["ExecStart"],
                kill_signal=signal.Signals[keys.get("KillSignal", "SIGTERM")],
                kill_mode=keys.get("KillMode", "control-group"),
                timeout_stop_s=float(keys.get("TimeoutStopSec", "90").rstrip("s")),
            )
        )
    return units


@dataclasses.dataclass(frozen=True)
class Container:
    """A Dockerfile of the guide, as much of it as a stop needs."""

    #: The ``CMD``, exec form.
    cmd: tuple[str, ...]
    #: ``STOPSIGNAL`` (docker's default: SIGTERM).
    stop_signal: signal.Signals
    #: ``docker stop -t``, s: the guide's 30.
    grace_s: float = 30.0


def guide_containers(text: str) -> list[Container]:
    """The ```dockerfile blocks of the guide that have a ``CMD``."""
    containers = []
    for block in re.findall(r"```dockerfile\n(.*?)```", text, flags=re.S):
        cmd = re.search(r"^CMD (\[.*\])$", block, flags=re.M)
        if cmd is None:
            continue
        stop = re.search(r"^STOPSIGNAL (\w+)$", block, flags=re.M)
        containers.append(
            Container(tuple(json.loads(cmd.group(1))), signal.Signals[stop.group(1) if stop else "SIGTERM"])
        )
    return containers


def session_processes(sid: int) -> dict[int, str]:
    """Live (not zombie) processes of session ``sid``: pid -> command line."""
    found = {}
    for proc in pathlib.Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        if stat[0] != "Z" and int(stat[3]) == sid:
            found[int(proc.name)] = command
    return found


def checkpoint_loads(path: pathlib.Path) -> bool:
    """Whether a Horde checkpoint is there and is a whole archive."""
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as archive:
            return len(archive.files) > 0
    except (OSError, ValueError):
        return False


class Run:
    """A command in a session of its own, its output in a file, watched for the Horde's phase lines."""

    def __init__(self, argv: list[str], log: pathlib.Path, env: dict[str, str]) -> None:
        self.log = log
        self.began = time.monotonic()
        with open(log, "w") as out:
            self.process = subprocess.Popen(
                argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def phase(self) -> str:
        text = self.output()
        return "running" if READY in text else "warming" if BUILT in text else "starting"

    def wait_for_phase(self, phase: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.phase() != phase or PHASES.index(self.phase()) < PHASES.index(phase):
            if PHASES.index(self.phase()) > PHASES.index(phase) or self.process.poll() is not None:
                return False
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)
        return True


def stop_like_systemd(run: Run, unit: Unit) -> tuple[int | None, bool]:
    """KillSignal as KillMode says, then SIGKILL to what is left after TimeoutStopSec: (main's code, killed)."""
    sid = run.process.pid
    if unit.kill_mode == "mixed" or unit.kill_mode == "process":
        os.kill(run.process.pid, unit.kill_signal)
    else:
        os.killpg(sid, unit.kill_signal)
    deadline = time.monotonic() + unit.timeout_stop_s
    while time.monotonic() < deadline:
        run.process.poll()
        if run.process.returncode is not None and not session_processes(sid):
            return run.process.returncode, False
        time.sleep(0.01)
    os.killpg(sid, signal.SIGKILL)
    run.process.wait()
    return run.process.returncode, True


def _delay_in(phase: str, rng: random.Random, warm_s: float) -> float:
    """How long after the phase began to stop: anywhere in it (its length as measured once)."""
    if phase == "starting":
        return rng.uniform(0.0, 0.9 * STARTING_S)
    if phase == "warming":
        return rng.uniform(0.0, 0.8 * warm_s)
    return rng.uniform(0.0, 1.0)


STARTING_S = 1.0  # replaced by the measured time to the Horde's first line


def unit_trial(unit: Unit, phase: str, rng: random.Random, work: pathlib.Path, env, warm_s: float) -> Outcome:
    questions, checkpoint = work / "questions.yaml", work / "horde.npz"
    questions.write_text((ROOT / "config" / "horde.yaml").read_text())
    line = unit.exec_start.replace("/home/robot/gamma_net_ros", str(ROOT))
    line = line.replace("/home/robot/my_robot.yaml", str(questions)).replace(
        "/home/robot/.ros/horde.npz", str(checkpoint)
    )
    argv = re.match(r"^/bin/bash -c '(.*)'$", line)
    if argv is None:
        raise SystemExit(f"stop_trials: the guide's ExecStart is not /bin/bash -c '...': {line}")
    run = Run(["/bin/bash", "-c", argv.group(1)], work / "unit.log", env)
    if phase != "starting" and not run.wait_for_phase(phase, 300.0):
        code, killed = stop_like_systemd(run, unit)
        return Outcome("unit", "missed", unit.kill_signal.name, code, [], killed, False, True, note="phase missed")
    time.sleep(_delay_in(phase, rng, warm_s))
    at = run.phase()
    code, killed = stop_like_systemd(run, unit)
    output = run.output()
    built = BUILT in output
    return Outcome(
        "unit " + ("launch" if "ros2 launch" in unit.exec_start else "node"),
        at,
        unit.kill_signal.name,
        code,
        list(session_processes(run.process.pid).values()),
        killed,
        "Traceback" in output,
        checkpoint_loads(checkpoint) if built else True,
        note=_whose_traceback(output),
    )


def launch_trial(sig: signal.Signals, phase: str, rng, work: pathlib.Path, env, warm_s: float) -> Outcome:
    checkpoint = work / "horde.npz"
    argv = ["ros2", "launch", "gamma_net_ros", "horde.launch.py", f"checkpoint_path:={checkpoint}"]
    run = Run(argv, work / "launch.log", env)
    unit = Unit("", sig, "mixed", 60.0)
    if phase != "starting" and not run.wait_for_phase(phase, 300.0):
        code, killed = stop_like_systemd(run, unit)
        return Outcome("launch", "missed", sig.name, code, [], killed, False, True, note="phase missed")
    time.sleep(_delay_in(phase, rng, warm_s))
    at = run.phase()
    code, killed = stop_like_systemd(run, unit)
    output = run.output()
    built = BUILT in output
    if sig == signal.SIGTERM and code == -signal.SIGTERM:
        code = _nodes_code(output)  # ros2 launch ends at once by design; its nodes must still stop cleanly
    return Outcome(
        "launch",
        at,
        sig.name,
        code,
        list(session_processes(run.process.pid).values()),
        killed,
        "Traceback" in output,
        checkpoint_loads(checkpoint) if built else True,
        note=_whose_traceback(output),
    )


def _pid_one(run: Run, timeout: float = 10.0) -> int | None:
    """The host pid of the namespace's PID 1: the one child of ``unshare --fork``."""
    deadline = time.monotonic() + timeout
    children = pathlib.Path(f"/proc/{run.process.pid}/task/{run.process.pid}/children")
    while time.monotonic() < deadline and run.process.poll() is None:
        try:
            found = children.read_text().split()
        except OSError:
            return None
        if found:
            return int(found[0])
        time.sleep(0.001)
    return None


def docker_trial(container: Container, phase: str, rng, work: pathlib.Path, env, warm_s: float) -> Outcome:
    questions, data = work / "my_robot.yaml", work / "data"
    questions.write_text((ROOT / "config" / "horde.yaml").read_text())
    data.mkdir()
    checkpoint = data / "horde.npz"
    cmd = [
        part.replace("/config/my_robot.yaml", str(questions)).replace("/data/", f"{data}/") for part in container.cmd
    ]
    run = Run(["unshare", "--pid", "--fork", "--kill-child", *cmd], work / "docker.log", env)
    pid_one = _pid_one(run)
    launch = any("ros2 launch" in part for part in cmd)
    kind = "docker " + ("launch" if launch else "node")
    if pid_one is None or (phase != "starting" and not run.wait_for_phase(phase, 300.0)):
        os.killpg(run.process.pid, signal.SIGKILL)
        run.process.wait()
        return Outcome(kind, "missed", container.stop_signal.name, None, [], True, False, True, note="phase missed")
    time.sleep(_delay_in(phase, rng, warm_s))
    at = run.phase()
    try:
        os.kill(pid_one, container.stop_signal)  # docker stop: the STOPSIGNAL to PID 1 alone
    except ProcessLookupError:
        pass
    killed = False
    try:
        run.process.wait(timeout=container.grace_s)
    except subprocess.TimeoutExpired:
        killed = True  # docker stop's SIGKILL after the grace: PID 1 goes, and the namespace with it
        os.killpg(run.process.pid, signal.SIGKILL)
        run.process.wait()
    output = run.output()
    built = BUILT in output
    started = len(re.findall(r"process started with pid", output))
    finished = len(re.findall(r"process has finished cleanly", output)) + len(_stopped_before_python(output))
    cut = launch and finished < started
    return Outcome(
        kind,
        at,
        container.stop_signal.name,
        run.process.returncode,
        list(session_processes(run.process.pid).values()),
        killed,
        "Traceback" in output,
        checkpoint_loads(checkpoint) if built else True,
        order_ok=not cut,
        note=_whose_traceback(output) + (f"; {started - finished} node(s) cut by PID 1's end" if cut else ""),
    )


def _stopped_before_python(output: str) -> list[str]:
    """Launched processes that the stop ended before their interpreter ran: dead of SIGINT or SIGTERM, and not
    a line of their own. Launch forwards a stop that comes while it starts a process to that process at once;
    if it lands before ``env --block-signal`` has blocked it (a few instructions after the fork), the process
    dies of it before Python starts: nothing learned, nothing to save, not cut by PID 1's end."""
    died = re.findall(r"\[ERROR\] \[([\w.-]+)\]: process has died \[pid \d+, exit code -(?:2|15),", output)
    return [name for name in died if f"[{name}] " not in output.replace(f"[{name}]: ", "")]


def _whose_traceback(output: str) -> str:
    """Where a traceback came from: "" if none; ros2cli's own start-up (before launch handles signals), or ours."""
    if "Traceback" not in output:
        return ""
    tail = output[output.index("Traceback") :]
    # A frame of the package's own modules; site-packages' editable finder is the interpreter's start-up.
    ours = re.search(r'File "[^"]*/gamma_net_(ros|core)/[^"]*\.py"', tail)
    return "ours" if ours else "ros2cli start-up (before launch's own handlers)"


def _nodes_code(output: str) -> int:
    """0 if no node said it ended otherwise; the launch itself cannot tell once it is gone."""
    bad = re.findall(r"process has died \[pid \d+, exit code (-?\d+)", output)
    return int(bad[0]) if bad else 0


def reflex_trial(rng: random.Random, work: pathlib.Path, env, up_to_s: float) -> Outcome:
    """SIGTERM to `ros2 launch reflex.launch.py` at a random moment: operator and teleop may not outlive the reflex."""
    checkpoint = work / "horde.npz"
    argv = ["ros2", "launch", "gamma_net_ros", "reflex.launch.py", f"checkpoint_path:={checkpoint}"]
    run = Run(argv, work / "reflex.log", env)
    sid = run.process.pid
    stop_at = rng.uniform(0.0, up_to_s)
    names = ("/operator", "/teleop", "/reflex ")
    pids: dict[str, set[int]] = {n: set() for n in names}
    while time.monotonic() - run.began < stop_at and run.process.poll() is None:
        for pid, command in session_processes(sid).items():
            for name in names:
                if f"lib/gamma_net_ros{name}" in command + " ":
                    pids[name].add(pid)
        time.sleep(0.002)
    at = "running" if "[reflex]" in run.output() and READY in run.output() else run.phase()
    os.kill(run.process.pid, signal.SIGTERM)
    gone: dict[int, float] = {}
    deadline = time.monotonic() + 60.0
    everyone = set().union(*pids.values())
    while time.monotonic() < deadline:
        alive = session_processes(sid)
        now = time.monotonic()
        for pid in everyone:
            if pid not in alive and pid not in gone:
                gone[pid] = now
        if not alive:
            break
        time.sleep(0.002)
    left = list(session_processes(sid).values())
    killed = bool(left)
    if left:
        os.killpg(sid, signal.SIGKILL)
    run.process.wait()
    reflex_end = max((gone.get(p, float("inf")) for p in pids["/reflex "]), default=None)
    steering = pids["/operator"] | pids["/teleop"]
    late = [p for p in steering if reflex_end is not None and gone.get(p, float("inf")) > reflex_end + 0.002]
    output = run.output()
    return Outcome(
        "reflex launch",
        at,
        "SIGTERM",
        _nodes_code(output),
        left,
        killed,
        "Traceback" in output,
        True,
        order_ok=not late,
        note=f"stopped at {stop_at:.2f} s" + (f"; outlived the reflex: {late}" if late else ""),
    )


def measure(env, work: pathlib.Path) -> tuple[float, float]:
    """Seconds from the exec to the Horde's first line, and from there to "ready" (a warm cache)."""
    argv = [sys.executable, "-m", "gamma_net_ros.entry", "horde"]
    run = Run(argv, work / "measure.log", env)
    run.wait_for_phase("warming", 300.0)
    built = time.monotonic() - run.began
    run.wait_for_phase("running", 300.0)
    ready = time.monotonic() - run.began - built
    os.kill(run.process.pid, signal.SIGINT)
    run.process.wait(timeout=60)
    return built, ready


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=20, help="stops per phase and way (default 20)")
    parser.add_argument("--kinds", default="unit,launch,reflex,docker", help="which trials (default: all)")
    parser.add_argument("--phases", default=",".join(PHASES), help="which phases of the start (default: all)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    kinds = set(args.kinds.split(","))
    rng = random.Random(args.seed)
    env = dict(os.environ, PYTHONUNBUFFERED="1", RCUTILS_COLORIZED_OUTPUT="0")
    base = pathlib.Path(tempfile.mkdtemp(prefix="stop_trials_"))
    global STARTING_S
    STARTING_S, warm_s = measure(env, base)
    print(f"start-up measured: {STARTING_S:.2f} s to the Horde's first line, {warm_s:.2f} s more to ready")
    outcomes: list[Outcome] = []

    def record(outcome: Outcome) -> None:
        outcomes.append(outcome)
        mark = "clean" if outcome.clean else "NOT CLEAN"
        print(
            f"{outcome.kind:14} {outcome.signal:7} {outcome.phase:8} code {outcome.code} "
            f"left {len(outcome.left)} killed {outcome.killed} traceback {outcome.traceback} "
            f"checkpoint {outcome.checkpoint_ok} {mark} {outcome.note} {outcome.left[:2] if outcome.left else ''}",
            flush=True,
        )

    n = 0
    for phase in [p for p in PHASES if p in args.phases.split(",")]:
        for _ in range(args.trials):
            if "unit" in kinds:
                for unit in guide_units(GUIDE.read_text()):
                    n += 1
                    work = base / f"{n}"
                    work.mkdir()
                    record(unit_trial(unit, phase, rng, work, env, warm_s))
            if "docker" in kinds:
                for container in guide_containers(GUIDE.read_text()):
                    n += 1
                    work = base / f"{n}"
                    work.mkdir()
                    record(docker_trial(container, phase, rng, work, env, warm_s))
            if "launch" in kinds:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    n += 1
                    work = base / f"{n}"
                    work.mkdir()
                    record(launch_trial(sig, phase, rng, work, env, warm_s))
    if "reflex" in kinds:
        for _ in range(args.trials):
            n += 1
            work = base / f"{n}"
            work.mkdir()
            record(reflex_trial(rng, work, env, up_to_s=3 * (STARTING_S + warm_s) + 5.0))
    print("\nkind            signal  phase     clean/trials")
    keys = sorted({(o.kind, o.signal, o.phase) for o in outcomes})
    for key in keys:
        group = [o for o in outcomes if (o.kind, o.signal, o.phase) == key]
        cli = sum(o.note.startswith("ros2cli") for o in group)
        aside = f"  ({cli} a traceback of ros2cli's start-up)" if cli else ""
        print(f"{key[0]:15} {key[1]:7} {key[2]:9} {sum(o.clean for o in group)}/{len(group)}{aside}")
    if all(o.clean for o in outcomes):
        shutil.rmtree(base, ignore_errors=True)
        return 0
    print(f"logs of every trial: {base}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
