"""`gamma-net bench horde-node`: the horde node's latency, 100 questions at 100 Hz, JointState -> PredictionArray.

The node runs as its own process (as `ros2 run` starts it) on a questions file of ``--questions``
questions about one JointState topic (speeds, positions, efforts under every transform, some
with a termination), the arm's learner (100 tilings, 2,048 features + bias, |Gamma_t| = 32) and
its 7 published timescales. This process publishes JointState at ``--rate`` Hz, each stamped
with its publishing time, and records, for each PredictionArray, when it arrived. The node runs
twice, once per tick source:

- clock (``tick_topic`` ''): the node samples on its own ``--rate`` Hz clock. Two latencies:
  tick -> PredictionArray, from the node's tick (the array's stamp) to its arrival here: the
  node's work per tick (sampling, learning every question, predicting, publishing) plus one
  hop; and message -> PredictionArray, from the publishing of the newest JointState the tick
  could have sampled to the array's arrival: the above plus the wait for the next tick, up to
  a period, which the clock's phase against the publisher's decides, not the node's speed.
- tick_topic (``tick_topic`` /joint_states): every JointState is a tick and the array carries
  its stamp, so message -> PredictionArray is measured exactly, array by array: the node's
  work plus two hops, no wait.

A compute reference is timed in this process without ROS: the node's per-tick work
(HordeLearner.step, predict at the published taus, OnlineError.observe) on the same questions,
and the scoring alone against its plain reference (PlainOnlineError) on the same predictions.
Goal (the issue's, reported, never asserted): message -> PredictionArray p99 < 5 ms at 100 Hz
with 100 questions, judged on the tick_topic mode (with the clock, the wait for the tick alone
is up to 10 ms at 100 Hz).

Run to run, that p99 varies (slow samples come in bursts), so ``--runs N`` repeats the
tick_topic measurement N times, each with a fresh node, and reports each run's p99. Every
tick_topic node runs with its garbage collections traced (gamma_net_studies.ros.bench.gc_trace): each
run counts its slow samples (over the goal) and how many of them waited on a collection in the
node. ``--compare-gc`` makes each run twice back to back, the node's ``gc_freeze`` off then on,
so the two are compared under the same load. ``--node-prefix CMD`` runs those nodes under a
command that execs them (``chrt -f 10``: real-time priority, ahead of the machine's other work).

``--workers W`` splits the questions by name into W shares (the node's ``share`` parameter, as
``horde.launch.py workers:=W`` does), one node process each, all ticking on the same JointState:
a message's latency is then until the last of the W arrays stamped with it arrives, and an array
counts as received when all W have (issue 27's scale benchmark; docs/horde.md). The clock mode
and the compute reference run one process; ``--skip-clock`` leaves both out (the tick_topic runs only).
"""

from __future__ import annotations

import argparse
import math
import pathlib
import shlex
import shutil
import sys
import tempfile
import threading
import time

import numpy as np
import yaml

from gamma_net_core.report import Report, Table
from gamma_net_studies.bench.linear import loadavg

GOAL_P99_MS = 5.0
JOINTS = "sensor_msgs/msg/JointState"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--questions", type=int, default=100, help="questions learned by the node (default 100)")
    parser.add_argument("--rate", type=float, default=100.0, help="the node's clock and the input rate, Hz")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the measured run (default 10)")
    parser.add_argument("--runs", type=int, default=1, help="tick_topic runs, each with a fresh node (default 1)")
    parser.add_argument(
        "--node-prefix",
        default="",
        help="a command the tick_topic nodes run under, e.g. 'nice -n -5' or 'chrt -f 10' (ahead of other "
        "work on a busy machine; needs the privilege); it must exec the node, keeping its process id",
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="node processes sharing the questions by name (default 1)"
    )
    parser.add_argument(
        "--skip-clock", action="store_true", help="only the tick_topic runs (no clock run, no compute reference)"
    )
    parser.add_argument(
        "--compare-gc",
        action="store_true",
        help="each tick_topic run twice back to back: the node's gc_freeze off, then on",
    )


def questions_doc(n: int, rate_hz: float) -> dict:
    """``n`` questions about /joint_states: every field and transform of both joints, some terminating."""
    kinds = [
        (field, transform)
        for field in ("velocity", "position", "effort")
        for transform in ("identity", "abs", "square", "indicator")
    ]
    questions = []
    for i in range(n):
        field, transform = kinds[i % len(kinds)]
        joint = ("shoulder", "elbow")[(i // len(kinds)) % 2]
        cumulant = {"topic": "/joint_states", "type": JOINTS, "field": f"{field}[{joint}]", "transform": transform}
        if transform == "indicator":
            cumulant["threshold"] = 0.1 * (i % 7)
        question = {"name": f"q{i:03d}_{field}_{joint}_{transform}", "cumulant": cumulant}
        if i % 5 == 4:
            question["termination"] = {
                "topic": "/joint_states",
                "type": JOINTS,
                "field": "position[elbow]",
                "threshold": 1.9,
            }
        questions.append(question)
    state = [
        {"topic": "/joint_states", "type": JOINTS, "field": "position[shoulder]", "low": -1.4, "high": -0.1},
        {"topic": "/joint_states", "type": JOINTS, "field": "position[elbow]", "low": 1.1, "high": 2.3},
    ]
    return {
        "rate_hz": rate_hz,
        "stale_after_s": 0.5,
        "publish_taus": [1, 2, 5, 10, 20, 50, 100],
        "state": state,
        "learner": {
            "tilings": [100],
            "tile_widths": [1.0],
            "memory_size": 2048,
            "hashing": "always",
            "step_size": 0.02,
        },
        "timescales": {"n_gamma": 1, "n_tau": 29, "tau_max": 100},
        "questions": questions,
    }


def reading(i: int, rate_hz: float):
    """A JointState of the arm moving around the maze (~14 s a circuit), with efforts."""
    from sensor_msgs.msg import JointState

    phase = 2 * math.pi * i / (14.0 * rate_hz)
    msg = JointState()
    msg.name = ["shoulder", "elbow"]
    msg.position = [-0.75 + 0.5 * math.cos(phase), 1.7 + 0.4 * math.sin(phase)]
    msg.velocity = [-0.2 * math.sin(phase), 0.2 * math.cos(phase)]
    msg.effort = [0.01 * math.cos(2 * phase), 0.005 * math.sin(phase)]
    return msg


class _Probe:
    """Publishes JointState at a rate from a thread; records each PredictionArray's arrival."""

    def __init__(self, node) -> None:
        from gamma_net_msgs.msg import PredictionArray
        from rclpy.qos import qos_profile_sensor_data
        from sensor_msgs.msg import JointState

        self.publisher = node.create_publisher(JointState, "/joint_states", qos_profile_sensor_data)
        self.sent: list[float] = []  # wall-clock publish times
        self.arrays: list[tuple[float, float]] = []  # (tick stamp, arrival), wall clock
        self.node_pid: int | None = None
        self.waits: list[int] = []  # the node's time waiting for a CPU so far, ns, read at each arrival
        self.lock = threading.Lock()
        node.create_subscription(PredictionArray, "horde/predictions", self.on_array, 100)

    def on_array(self, msg) -> None:
        now = time.time()
        waited = runqueue_wait_ns(self.node_pid)
        with self.lock:
            self.arrays.append((msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9, now))
            self.waits.append(waited)

    def publish(self, rate_hz: float, seconds: float, first: int = 0) -> int:
        n = int(rate_hz * seconds)
        start = time.perf_counter()
        for i in range(n):
            target = start + i / rate_hz
            while (delay := target - time.perf_counter()) > 0:
                time.sleep(min(delay, 0.0005) if delay < 0.002 else delay - 0.001)
            msg = reading(first + i, rate_hz)
            now = time.time_ns()
            msg.header.stamp = _stamp(now)  # the tick_topic mode's arrays carry it back
            with self.lock:
                self.sent.append(now * 1e-9)
            self.publisher.publish(msg)
        return first + n


def runqueue_wait_ns(pid: int | None) -> int:
    """Nanoseconds process ``pid``'s main thread has spent runnable but waiting for a CPU (-1: unknown).

    The second field of /proc/PID/schedstat: time on a run queue, not running, because other
    processes had the cores.
    """
    if pid is None:
        return -1
    try:
        with open(f"/proc/{pid}/schedstat") as stat:
            return int(stat.read().split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def _stamp(nanoseconds: int):
    from builtin_interfaces.msg import Time

    return Time(sec=nanoseconds // 1_000_000_000, nanosec=nanoseconds % 1_000_000_000)


def _latencies(sent: np.ndarray, arrays: list[tuple[float, float]], period: float) -> tuple[np.ndarray, np.ndarray]:
    """(tick -> arrival, newest message before the tick -> arrival) in seconds, one per array.

    Only ticks while messages were flowing count (after the last one the node goes on sampling it
    until it is stale, which is no latency of the node's).
    """
    arrays = [(t, a) for t, a in arrays if sent.size and sent[0] <= t <= sent[-1] + period]
    ticks = np.array([t for t, _ in arrays])
    arrived = np.array([a for _, a in arrays])
    newest = np.searchsorted(sent, ticks, side="right") - 1
    keep = newest >= 0
    return arrived - ticks, (arrived - sent[newest.clip(min=0)])[keep]


def _compute_reference(doc: dict, n: int = 600) -> dict[str, np.ndarray]:
    """Seconds per tick of the node's work without ROS (learn, predict, score), same questions.

    Also the scoring alone: :class:`OnlineError` and its plain reference :class:`PlainOnlineError`
    (every pending return updated each tick) on the same predictions.
    """
    from gamma_net_core.horde.learner import HordeLearner
    from gamma_net_core.horde.online_error import OnlineError, PlainOnlineError
    from gamma_net_core.horde.questions import load_questions
    from gamma_net_ros.horde.node import Row

    spec = load_questions(doc)
    learner = HordeLearner.from_spec(spec)
    row = Row(spec)
    gammas = 1.0 - 1.0 / np.asarray(spec.publish_taus)
    errors = OnlineError(gammas=gammas, n_questions=len(spec.questions))
    plain = PlainOnlineError(gammas=gammas, n_questions=len(spec.questions))
    rate = doc["rate_hz"]
    times = {"work": np.empty(n), "observe": np.empty(n), "plain": np.empty(n)}
    for i in range(n):
        msg = reading(i, rate)
        started = time.perf_counter()
        inputs, cumulants, continuations = row({"/joint_states": msg})
        learner.step(inputs, cumulants, continuations)
        values = learner.predict(inputs, gammas)
        scoring = time.perf_counter()
        errors.observe(cumulants, continuations, values)
        done = time.perf_counter()
        plain.observe(cumulants, continuations, values)
        times["work"][i] = done - started
        times["observe"][i] = done - scoring
        times["plain"][i] = time.perf_counter() - done
    return {name: t[n // 10 :] for name, t in times.items()}


def _complete(arrays: list[tuple[float, float]], workers: int) -> list[tuple[float, float]]:
    """(stamp, arrival of its last array) of each stamp that all ``workers`` published, in order of arrival."""
    by_stamp: dict[float, list[float]] = {}
    for stamp, arrived in arrays:
        by_stamp.setdefault(stamp, []).append(arrived)
    done = [(stamp, max(times)) for stamp, times in by_stamp.items() if len(times) >= workers]
    return sorted(done, key=lambda pair: pair[1])


def _measure(doc: dict, args, tick_topic: str = "", gc_freeze: bool = True) -> dict:
    """Runs the node (ticking on its clock, or on ``tick_topic``) under JointState at the rate; its latencies.

    A tick_topic node's garbage collections are traced: the result's ``pauses`` are
    (start, stop, generation) of each, wall clock.
    """
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.node import Node

    from gamma_net_ros.spin_thread import SpinThread

    folder = pathlib.Path(tempfile.mkdtemp(prefix="bench-horde-"))
    workers = getattr(args, "workers", 1) if tick_topic else 1
    traces = [folder / (f"gc-{i}.txt" if workers > 1 else "gc.txt") for i in range(1, workers + 1)]
    processes = _start_nodes(doc, args, folder, traces, tick_topic=tick_topic, gc_freeze=gc_freeze)
    process = processes[0]
    rclpy.init()
    node = Node("bench_horde_probe")
    probe = _Probe(node)
    # gc_trace runs the node in this same process; with several, whose wait to blame is unclear.
    probe.node_pid = process.process.pid if workers == 1 else None
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    spinner = SpinThread(executor)
    try:
        deadline = time.monotonic() + 120  # the node's first start compiles its numba kernels
        step = 0
        while len(_complete(probe.arrays, workers)) == 0:
            if time.monotonic() > deadline or not all(p.running for p in processes):
                logs = "".join((folder / f"horde-{i}.log").read_text()[-2000:] for i in range(1, workers + 1))
                raise RuntimeError(f"the horde node gave no predictions:\n{logs}")
            step = probe.publish(args.rate, 0.2, step)
        step = probe.publish(args.rate, 2.0, step)  # warm up
        with probe.lock:
            probe.sent.clear()
            probe.arrays.clear()
            probe.waits.clear()
        probe.publish(args.rate, args.seconds, step)
        time.sleep(0.5)
        with probe.lock:
            sent, arrays, waits = np.array(probe.sent), list(probe.arrays), np.array(probe.waits)
    finally:
        spinner.stop()
        for each in processes:  # before this participant goes (spin_thread.py)
            each.stop()
        node.destroy_node()
        rclpy.try_shutdown()
    if tick_topic:
        return _topic_ticked(sent, _complete(arrays, workers) if workers > 1 else arrays, waits, traces, workers)
    tick, message = _latencies(sent, arrays, 1.0 / args.rate)
    # Ticks in the measured window: the node publishes one array per tick with fresh inputs.
    expected = args.rate * args.seconds
    return {"tick": tick, "message": message, "arrays": tick.size, "expected": expected, "sent": sent.size}


def _start_nodes(doc: dict, args, folder: pathlib.Path, traces: list, *, tick_topic: str, gc_freeze: bool) -> list:
    """The horde nodes measured (one, or one per share as horde.launch.py workers:=W starts them), started."""
    from gamma_net_ros.processes import NodeProcess, node_command

    questions = folder / "questions.yaml"
    questions.write_text(yaml.safe_dump(doc))
    workers, processes = len(traces), []
    for i, trace in enumerate(traces, start=1):
        params = {"questions_file": str(questions), "tick_topic": tick_topic, "gc_freeze": gc_freeze}
        name, remaps = None, None
        if workers > 1:
            params["share"] = f"{i}/{workers}"
            name, remaps = f"horde_{i}", {"predict_at": f"horde_{i}/predict_at"}
        command = node_command("gamma_net_ros.horde.node", params=params, name=name, remaps=remaps)
        if tick_topic:  # python -m gamma_net_studies.ros.bench.gc_trace TRACE gamma_net_ros.horde.node --ros-args ...
            command = [*command[:3], "gamma_net_studies.ros.bench.gc_trace", str(trace), *command[3:]]
            if args.node_prefix:  # nice, chrt, taskset exec the node: the same process id
                command = [*shlex.split(args.node_prefix), *command]
        processes.append(NodeProcess(command, log_path=folder / f"horde-{i}.log").start())
    return processes


def _topic_ticked(sent: np.ndarray, arrays: list, waits: np.ndarray, traces: list, workers: int) -> dict:
    """The latencies of a node ticked by each JointState, with its collections' pauses and its waits for a CPU."""
    from gamma_net_studies.ros.bench.gc_trace import read_trace

    # Each array is stamped with the JointState that ticked it: exact, one per message (the
    # stamps of messages sent in the measured window only).
    stamps = np.array([t for t, _ in arrays])
    nearest = np.abs(sent[np.searchsorted(sent, stamps - 1e-6).clip(max=sent.size - 1)] - stamps)
    kept = [(t, a) for (t, a), gap in zip(arrays, nearest) if gap < 1e-6]
    message = np.array([a - t for t, a in kept])
    # The node's wait for a CPU between the previous array's arrival and this one's (s).
    cpu_wait = np.diff(waits, prepend=waits[:1]) * 1e-9 if waits.size and waits.min() >= 0 else None
    cpu_wait = None if cpu_wait is None else np.array([w for w, gap in zip(cpu_wait, nearest) if gap < 1e-6])
    pauses = sorted(p for trace in traces if trace.exists() for p in read_trace(trace))
    return {
        "message": message,
        "sent_at": np.array([t for t, _ in kept]),
        "arrays": message.size,
        "expected": sent.size,
        "sent": sent.size,
        "pauses": pauses,
        "cpu_wait": cpu_wait,
        "workers": workers,
    }


def waited_on_collection(sent_at: np.ndarray, latency: np.ndarray, pauses, *, slow_s: float) -> tuple[int, int]:
    """(samples slower than ``slow_s``, those of them in flight while the node was collecting garbage).

    A sample is in flight from its publishing to its arrival; a collection overlapping that
    interval held the node's only thread for its whole length.
    """
    slow = np.flatnonzero(latency > slow_s)
    if not pauses:
        return int(slow.size), 0
    starts = np.array([p[0] for p in pauses])
    stops = np.array([p[1] for p in pauses])
    during = sum(bool(np.any((starts < sent_at[i] + latency[i]) & (stops > sent_at[i]))) for i in slow)
    return int(slow.size), int(during)


def waited_for_a_cpu(sent_at: np.ndarray, latency: np.ndarray, cpu_wait: np.ndarray, *, slow_s: float) -> int:
    """How many samples slower than ``slow_s`` were in flight while the node waited for a CPU that long.

    ``cpu_wait[j]``: the node's run-queue wait between the arrivals of arrays j - 1 and j. A
    sample in flight from its publishing to its arrival counts the waits of every such interval
    that overlaps it: a node kept off the cores makes every message meanwhile late, in a burst.
    """
    arrived = sent_at + latency
    before = np.concatenate([[-np.inf], arrived[:-1]])  # start of each wait's interval
    count = 0
    for i in np.flatnonzero(latency > slow_s):
        overlapping = (before < arrived[i]) & (arrived > sent_at[i])
        count += bool(cpu_wait[overlapping].sum() >= slow_s)
    return count


def _per_run(runs: list[tuple[int, bool, dict]]) -> Table:
    table = Table(
        f"tick_topic: JointState published -> PredictionArray received, run by run (slow: over {GOAL_P99_MS:g} ms)",
        ["run", "gc_freeze", "p50 (ms)", "p99 (ms)", "max (ms)", "samples", "slow", "slow during a collection",
         "collections >= 1 ms", "longest collection (ms)", "slow while the node waited >= 5 ms for a CPU",
         "CPU wait, % of the run"],
    )  # fmt: skip
    for i, freeze, driven in runs:
        latency = driven["message"]
        slow, during = waited_on_collection(driven["sent_at"], latency, driven["pauses"], slow_s=GOAL_P99_MS / 1e3)
        # Only the measured window's collections: the node's start-up ones are no latency of a tick.
        window = [p for p in driven["pauses"] if driven["sent_at"].size and p[1] >= driven["sent_at"][0]]
        lengths = np.array([stop - start for start, stop, _ in window]) * 1e3
        p50, p99 = np.percentile(latency, [50, 99]) * 1e3
        waited, share = "n/a", "n/a"
        if driven["cpu_wait"] is not None:
            waited = waited_for_a_cpu(driven["sent_at"], latency, driven["cpu_wait"], slow_s=GOAL_P99_MS / 1e3)
            span = driven["sent_at"][-1] - driven["sent_at"][0] if latency.size > 1 else 0.0
            share = float(100.0 * driven["cpu_wait"][1:].sum() / span) if span > 0 else "n/a"
        table.add(
            i, "on" if freeze else "off", float(p50), float(p99), float(latency.max() * 1e3), int(latency.size),
            slow, during, int(np.sum(lengths >= 1.0)), float(lengths.max()) if lengths.size else 0.0, waited, share,
        )  # fmt: skip
    return table


def run(args: argparse.Namespace) -> Report:
    for name, value, low in (
        ("--questions", args.questions, 1),
        ("--rate", args.rate, 1.0),
        ("--seconds", args.seconds, 1.0),
        ("--runs", args.runs, 1),
        ("--workers", args.workers, 1),
    ):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value >= low):
            raise ValueError(f"{name} must be >= {low}; got {value}")
    prefix = shlex.split(args.node_prefix)
    if args.node_prefix and (not prefix or shutil.which(prefix[0]) is None):
        raise ValueError(f"--node-prefix {args.node_prefix!r}: no such command")
    if args.workers > args.questions:
        raise ValueError(f"--workers must be <= --questions ({args.questions}); got {args.workers}")
    doc = questions_doc(args.questions, args.rate)
    compute = None if args.skip_clock else _compute_reference(doc)
    result = None if args.skip_clock else _measure(doc, args)
    runs = []
    for i in range(1, args.runs + 1):
        for freeze in (False, True) if args.compare_gc else (True,):
            runs.append((i, freeze, _measure(doc, args, tick_topic="/joint_states", gc_freeze=freeze)))
            print(f"run {i}, gc_freeze {'on' if freeze else 'off'}: p99 "
                  f"{np.percentile(runs[-1][2]['message'], 99) * 1e3:.2f} ms", file=sys.stderr, flush=True)  # fmt: skip
    driven = runs[-1][2]
    table = Table(
        f"horde node, {args.questions} questions at {args.rate:g} Hz, {args.workers} worker(s) "
        f"({args.seconds:g} s each; goal: JointState -> PredictionArray p99 < {GOAL_P99_MS:g} ms, with tick_topic)",
        ["latency", "p50 (ms)", "p99 (ms)", "max (ms)", "samples"],
    )
    latencies = [("tick_topic: JointState published -> PredictionArray received", driven["message"])]
    if result is not None:
        latencies += [
            ("clock: tick -> PredictionArray received", result["tick"]),
            ("clock: JointState published -> PredictionArray received (+ wait for the tick)", result["message"]),
            ("node's work per tick, no ROS (compute reference)", compute["work"]),
            ("OnlineError.observe (part of the work)", compute["observe"]),
            ("PlainOnlineError.observe (its plain reference)", compute["plain"]),
        ]
    for label, values in latencies:
        p50, p99 = np.percentile(values, [50, 99]) * 1e3
        table.add(label, float(p50), float(p99), float(values.max() * 1e3), int(values.size))
    rates = Table("throughput (same run)", ["quantity", "value"])
    rates.add("tick_topic: JointState sent", int(driven["sent"]))
    rates.add("tick_topic: PredictionArrays received", int(driven["arrays"]))
    if result is not None:
        rates.add("clock: JointState sent", int(result["sent"]))
        rates.add("clock: PredictionArrays received", int(result["arrays"]))
        rates.add("clock: ticks expected at the rate", int(result["expected"]))
        rates.add("node work per tick p50 / period", float(np.median(compute["work"]) * args.rate))
        rates.add("PlainOnlineError / OnlineError, p50",
                  float(np.median(compute["plain"]) / np.median(compute["observe"])))  # fmt: skip
    for freeze in (False, True) if args.compare_gc else (True,):
        p99s = [np.percentile(d["message"], 99) * 1e3 for _, f, d in runs if f == freeze]
        label = f"tick_topic p99 over {len(p99s)} runs, gc_freeze {'on' if freeze else 'off'}: median (min..max), ms"
        rates.add(label, f"{np.median(p99s):.2f} ({min(p99s):.2f}..{max(p99s):.2f})")
        rates.add(f"runs with p99 under the goal, gc_freeze {'on' if freeze else 'off'}",
                  f"{sum(p < GOAL_P99_MS for p in p99s)} of {len(p99s)}")  # fmt: skip
    data = {
        "tick_topic_message_s": driven["message"],
        "tick_s": None if result is None else result["tick"],
        "message_s": None if result is None else result["message"],
        "compute_s": None if compute is None else compute["work"],
        "observe_s": None if compute is None else compute["observe"],
        "plain_observe_s": None if compute is None else compute["plain"],
        "workers": args.workers,
        "runs_arrays": [int(d["arrays"]) for _, _, d in runs],
        "runs_sent": [int(d["sent"]) for _, _, d in runs],
        "loadavg": loadavg(),
        "goal_p99_ms": GOAL_P99_MS,
        "runs_p99_ms": [float(np.percentile(d["message"], 99) * 1e3) for _, _, d in runs],
        "runs_gc_freeze": [f for _, f, _ in runs],
    }
    return Report(tables=[table, rates, _per_run(runs)], data=data)


if __name__ == "__main__":  # pragma: no cover
    import sys

    from gamma_net_core.cli import main

    sys.exit(main(["bench", "horde-node", *sys.argv[1:]]))
