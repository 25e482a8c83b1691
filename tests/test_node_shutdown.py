"""Ctrl-C while learning: every start of a predictor node ends with code 0, soon, its checkpoint written.

The real node processes (``python -m gamma_net_ros.NAME``, each in its own process group, as
``ros2 launch`` starts them) learn from a stream this test publishes, and keep receiving it while
SIGINT arrives, three times in a row as an impatient user presses Ctrl-C (every third start gets
SIGTERM instead, as `ros2 launch` sends after SIGINT, or systemd). Each must exit with
code 0 within ``SHUTDOWN_S`` (what ``ros2 launch`` waits before it escalates) and leave a
checkpoint that loads whole. ``GAMMA_NET_SIGINT_STARTS`` sets the starts per node (default 3).
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from gamma_net_msgs.msg import Prediction, Transition
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy, qos_profile_sensor_data
from sensor_msgs.msg import JointState
from waiting import bound, spin_for

from gamma_net_core.data.joints import JointsConfig
from gamma_net_core.joint_stream import OnlineGammaNet
from gamma_net_core.linear import GammaNetConfig
from gamma_net_core.neural.learner import NeuralConfig
from gamma_net_core.neural.online import TransitionStream
from gamma_net_core.timescales import TimescaleSampling
from gamma_net_ros.conversions import seconds_to_stamp

pytestmark = [pytest.mark.ros, pytest.mark.serial]  # times each exit
STARTS = int(os.environ.get("GAMMA_NET_SIGINT_STARTS", "3"))
#: Seconds from the first SIGINT to the exit: ros2 launch escalates to SIGTERM after 5 s.
SHUTDOWN_S = 5.0
START_TIMEOUT = 90.0
#: The neural predictor at toy sizes, training from its 20th step on, one update per step.
NEURAL = {
    "learner.feature_size": 4,
    "learner.hidden_sizes": [8],
    "learner.batch_size": 8,
    "learner.replay_capacity": 500,
    "learner.min_replay_history": 20,
    "learner.update_period": 1,
    "learner.target_sync_period": 50,
}


def _literal(value) -> str:
    return "[" + ",".join(map(str, value)) + "]" if isinstance(value, list) else str(value)


def _start(module: str, i: int, params: dict, log) -> subprocess.Popen:
    command = [sys.executable, "-m", f"gamma_net_ros.{module}", "--ros-args", "-r", f"__node:={module}_{i}"]
    command += ["-r", f"predictions:=predictions_{i}"]
    for key, value in params.items():
        command += ["-p", f"{key}:={_literal(value)}"]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _run_and_interrupt(rig: Node, executor, spin, module: str, params_of, publish) -> list[float]:
    """Start STARTS nodes, feed them until each learned, signal each three times while feeding.

    Returns:
      The seconds from each node's first SIGINT to its exit.
    """
    learned = [0] * STARTS  # the latest update_count each node published
    for i in range(STARTS):
        rig.create_subscription(
            Prediction, f"predictions_{i}", lambda msg, i=i: learned.__setitem__(i, msg.update_count), 100
        )
    logs = [rig.tmp_path / f"{i}.log" for i in range(STARTS)]
    processes = [_start(module, i, params_of(i), open(log, "w")) for i, log in enumerate(logs)]
    try:
        deadline = time.monotonic() + bound(START_TIMEOUT)
        while not all(learned):
            assert time.monotonic() < deadline, "\n".join(log.read_text() for log in logs)
            assert all(p.poll() is None for p in processes), "\n".join(log.read_text() for log in logs)
            publish()
            spin_for(executor, 0.002)
        feeding = time.monotonic() + 1.5  # learning under load before the signal
        while time.monotonic() < feeding:
            publish()
            spin_for(executor, 0.001)
        exits: dict[int, float] = {}
        signalled = {}
        for i, process in enumerate(processes):
            signalled[i] = time.monotonic()
            for _ in range(3):
                os.killpg(process.pid, signal.SIGTERM if i % 3 == 2 else signal.SIGINT)
                publish()
                time.sleep(0.05)
        deadline = time.monotonic() + bound(START_TIMEOUT)
        while len(exits) < len(processes) and time.monotonic() < deadline:
            publish()
            spin_for(executor, 0.001)
            for i, process in enumerate(processes):
                if i not in exits and process.poll() is not None:
                    exits[i] = time.monotonic() - signalled[i]
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    outputs = [log.read_text() for log in logs]
    for process, output in zip(processes, outputs):
        assert process.returncode == 0, output
        assert "Traceback" not in output, output
    seconds = [round(exits[i], 2) for i in range(len(processes))]
    print(f"{module}: exited {seconds} s after the first SIGINT")  # shown with -s
    return seconds


def _reading(step: int) -> JointState:
    phase = 2 * math.pi * step / 90
    msg = JointState()
    msg.header.stamp = seconds_to_stamp(step / 30.0)
    msg.name = ["shoulder", "elbow"]
    msg.position = [0.5 * math.cos(phase), 1.7 + 0.4 * math.sin(phase)]
    msg.velocity = [-0.5 * math.sin(phase), 0.4 * math.cos(phase)]
    return msg


def test_predictor_exits_0_with_its_checkpoint_on_sigint(tmp_path, executor, spin):
    rig = Node("sigint_rig")
    rig.tmp_path = tmp_path
    executor.add_node(rig)
    states = rig.create_publisher(JointState, "joint_states", qos_profile_sensor_data)
    step = [0]

    def publish() -> None:
        states.publish(_reading(step[0]))
        step[0] += 1

    def params_of(i: int) -> dict:
        return {"checkpoint_path": str(tmp_path / f"{i}.npz"), "checkpoint_interval": 3600.0, "seed": i}

    seconds = _run_and_interrupt(rig, executor, spin, "predictor", params_of, publish)
    assert max(seconds) < SHUTDOWN_S, seconds
    for i in range(STARTS):
        online = OnlineGammaNet(
            joints=JointsConfig(),
            learner=GammaNetConfig(),
            timescales=TimescaleSampling(),
            rng=np.random.default_rng(i),
        )
        online.resume(tmp_path / f"{i}.npz")  # whole, of this configuration
        assert online.update_count > 0  # written at the shutdown (no timed checkpoint came before)


def test_neural_predictor_exits_0_with_its_checkpoint_on_sigint(tmp_path, executor, spin):
    rig = Node("sigint_rig")
    rig.tmp_path = tmp_path
    executor.add_node(rig)
    transitions = rig.create_publisher(
        Transition, "transitions", QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE)
    )
    step = [0]

    def publish() -> None:
        msg = Transition()
        msg.header.stamp = seconds_to_stamp(float(step[0]))
        msg.features = np.full(4, 0.1 * (step[0] % 7), np.float32)
        msg.cumulant = float(step[0] % 5 == 0)
        msg.episode, msg.step = divmod(step[0], 100)
        msg.terminal = msg.step == 99
        transitions.publish(msg)
        step[0] += 1

    def params_of(i: int) -> dict:
        # Half of the starts bound the training lag: intake then waits behind training.
        lag = {"max_update_lag": 1} if i % 2 else {}
        return {**NEURAL, **lag, "checkpoint_path": str(tmp_path / f"{i}.pt"), "checkpoint_interval": 3600.0}

    seconds = _run_and_interrupt(rig, executor, spin, "neural_predictor", params_of, publish)
    assert max(seconds) < SHUTDOWN_S, seconds
    config = NeuralConfig(**{k.split(".", 1)[1]: tuple(v) if isinstance(v, list) else v for k, v in NEURAL.items()})
    for i in range(STARTS):
        stream = TransitionStream.resume(tmp_path / f"{i}.pt", config=config)  # whole, of this configuration
        assert stream.learner.transitions > 0


def test_every_other_node_exits_0_on_sigint(tmp_path, executor, spin):
    from gamma_net_core.data.bags import write_joint_states
    from gamma_net_ros.paths import config_file

    steps = 400  # 40 s of recording (the player ends 1 s after it): still playing when the signal comes
    bag = write_joint_states(
        tmp_path / "arm.mcap",
        stamp_ns=np.arange(steps) * 100_000_000,
        joint_names=["shoulder", "elbow"],
        position=np.zeros((steps, 2)),
    )
    arm = ["--params-file", str(config_file("arm"))]
    nodes = {
        "teleop": arm,
        "operator": arm,
        "prediction_monitor": [],
        "transition_counter": [],
        "bag_player": ["-p", f"bag:={bag}"],
        # Integers for floats as users type them (rate_hz, rate); the driver keeps trying to open its port.
        "dynamixel_driver": ["-p", f"port:={tmp_path / 'no-such-port'}", "-p", "rate_hz:=30"],
        "ale_bridge": ["-p", "source:=live", "-p", "rate:=100"],  # waits for a consumer to report
        "horde": ["-p", f"checkpoint_path:={tmp_path / 'horde.npz'}"],  # config/horde.yaml's questions
    }
    rig = Node("sigint_rig")
    executor.add_node(rig)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    processes = {}
    for name, args in nodes.items():
        command = [sys.executable, "-m", f"gamma_net_ros.{name}", "--ros-args", *args]
        log = open(tmp_path / f"{name}.log", "w")
        processes[name] = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
    try:
        # Discovered, and the bridge done making its player (it is discovered before).
        bridge_log = tmp_path / "ale_bridge.log"
        up = lambda: set(nodes) <= set(rig.get_node_names()) and "live with policy" in bridge_log.read_text()  # noqa: E731
        assert spin(executor, up, timeout=START_TIMEOUT), sorted(rig.get_node_names())
        seconds = {}
        for name, process in processes.items():
            started = time.monotonic()
            os.killpg(process.pid, signal.SIGINT)
            process.wait(timeout=bound(START_TIMEOUT))
            seconds[name] = round(time.monotonic() - started, 2)
    finally:
        for process in processes.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    print(f"exited {seconds} s after SIGINT")  # shown with -s
    for name, process in processes.items():
        output = (tmp_path / f"{name}.log").read_text()
        assert process.returncode == 0, output
        assert "Traceback" not in output, output
    assert max(seconds.values()) < SHUTDOWN_S, seconds
    assert (tmp_path / "horde.npz").is_file()  # its last checkpoint
