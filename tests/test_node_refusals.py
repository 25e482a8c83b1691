"""Every node refuses bad settings the way a user sees it: exit code 1, one fatal line naming the value.

Each case starts the real node process (``python -m gamma_net_ros.NAME --ros-args ...``, what
``ros2 run`` runs) with one bad input and checks its output: no "Traceback", exactly one
``[FATAL]`` line, and that line names the bad value; a file the node was given is unchanged.
Integers where a float is declared are not bad input: they are taken as the float, at start and
when set at run time.
"""

from __future__ import annotations

import os
import pathlib
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pytest
from waiting import bound

from gamma_net_ros.paths import config_file

pytestmark = pytest.mark.ros
ARM, ATARI, DYNAMIXEL = config_file("arm"), config_file("atari"), config_file("dynamixel")
#: A start refused by a node that imports torch takes a few seconds on a busy machine (scaled by `bound`).
START_TIMEOUT = 60.0
#: The neural predictor at toy sizes: starting it must not cost the paper's network.
TINY = ["-p", "learner.hidden_sizes:=[8]", "-p", "learner.replay_capacity:=100", "-p", "learner.feature_size:=4"]


@dataclass
class Case:
    node: str
    args: list[str]
    names: list[str]  # what the fatal line must contain
    files: dict[str, bytes | str | Callable[[], bytes]] = field(default_factory=dict)  # written in its folder first


def _yaml(node: str, body: str) -> str:
    return f"{node}:\n  ros__parameters:\n" + "".join(f"    {line}\n" for line in body.splitlines())


CASES = {
    # parameters of the wrong type or out of range, from -p and from YAML
    "predictor-seed-out-of-range": Case("predictor", ["-p", "seed:=-1"], ["seed", "-1"]),
    "predictor-float-given-a-word": Case("predictor", ["-p", "max_gap:=fast"], ["max_gap", "'fast'"]),
    "predictor-integer-below-float-range": Case("predictor", ["-p", "max_gap:=0"], ["max_gap", "0.0"]),
    "predictor-learner-out-of-range": Case(
        "predictor",
        ["--params-file", str(ARM), "-p", "predictor:learner.step_size:=-0.5"],
        ["learner.step_size", "-0.5"],
    ),
    "predictor-bad-choice": Case("predictor", ["-p", "stamp_source:=sometimes"], ["stamp_source", "'sometimes'"]),
    "predictor-yaml-wrong-type": Case(
        "predictor", ["--params-file", "p.yaml"], ["seed", "'zero'"], {"p.yaml": _yaml("predictor", "seed: zero")}
    ),
    # parameter files
    "predictor-missing-params-file": Case("predictor", ["--params-file", "missing.yaml"], ["missing.yaml"]),
    "predictor-broken-params-file": Case(
        "predictor", ["--params-file", "broken.yaml"], ["broken.yaml", "line"], {"broken.yaml": "predictor: [\n"}
    ),
    "predictor-params-file-not-sections": Case(
        "predictor", ["--params-file", "list.yaml"], ["list.yaml"], {"list.yaml": "- 1\n- 2\n"}
    ),
    "predictor-unparsable-p": Case("predictor", ["-p", "seed:=[1,"], ["seed:=[1,"]),  # refused by rcl itself
    "predictor-params-file-is-a-folder": Case("predictor", ["--params-file", "."], ["parameter file ."]),
    # keys the node does not declare: typos refused, as `gamma-net arm train` refuses them
    "predictor-unknown-learner-key": Case(
        "predictor",
        ["--params-file", str(ARM), "--params-file", "typo.yaml"],
        ["learner.step_sze", "predictor"],
        {"typo.yaml": _yaml("predictor", "learner:\n  step_sze: 0.1")},
    ),
    "predictor-unknown-key-by-p": Case("predictor", ["-p", "max_gapp:=2.0"], ["max_gapp", "predictor"]),
    "predictor-unknown-key-writes-no-checkpoint": Case(
        "predictor", ["-p", "checkpoint_path:=ck.npz", "-p", "lern:=false"], ["lern", "did you mean 'learn'"]
    ),
    "neural_predictor-unknown-key-writes-no-checkpoint": Case(
        "neural_predictor", [*TINY, "-p", "checkpoint_path:=ck.pt", "-p", "publish_rat:=5.0"], ["publish_rat"]
    ),
    "horde-unknown-key-writes-no-checkpoint": Case(
        "horde", ["-p", "checkpoint_path:=ck.npz", "-p", "lern:=false"], ["lern", "did you mean 'learn'"]
    ),
    "horde-forecast-given-k": Case(
        "horde",
        ["-p", "questions_file:=q.yaml"],
        ["q.yaml", "readout 'soon'.k: only a hyperbolic readout has k"],
        {
            "q.yaml": "questions:\n  - {name: e, cumulant: {topic: /j, type: sensor_msgs/msg/JointState, "
            "field: 'effort[0]'}}\nstate:\n  - {topic: /j, type: sensor_msgs/msg/JointState, field: 'position[0]', "
            "low: -1, high: 1}\nreadouts:\n  - {name: soon, kind: forecast, seconds: 0.5, k: 5}\n"
        },
    ),
    "horde-missing-questions-file": Case("horde", ["-p", "questions_file:=nowhere.yaml"], ["nowhere.yaml"]),
    "neural_predictor-unknown-learner-key": Case(
        "neural_predictor",
        [*TINY, "--params-file", "typo.yaml"],
        ["learner.step_sze", "neural_predictor"],
        {"typo.yaml": _yaml("neural_predictor", "learner:\n  step_sze: 0.1")},
    ),
    # checkpoints and recordings that cannot be used
    "predictor-corrupt-checkpoint": Case(
        "predictor", ["-p", "checkpoint_path:=ck.npz"], ["ck.npz"], {"ck.npz": b"not a checkpoint at all"}
    ),
    "predictor-empty-checkpoint": Case(
        "predictor", ["-p", "checkpoint_path:=ck.npz"], ["ck.npz is empty (0 bytes)"], {"ck.npz": b""}
    ),
    "horde-empty-checkpoint": Case(
        "horde", ["-p", "checkpoint_path:=ck.npz"], ["ck.npz is empty (0 bytes)"], {"ck.npz": b""}
    ),
    "neural_predictor-empty-checkpoint": Case(
        "neural_predictor", [*TINY, "-p", "checkpoint_path:=ck.pt"], ["ck.pt is empty (0 bytes)"], {"ck.pt": b""}
    ),
    # a checkpoint of another lambda: every differing setting in the one line
    "predictor-checkpoint-of-another-lambda": Case(
        "predictor",
        ["-p", "checkpoint_path:=ck.npz", "-p", "predictor:learner.lam:=0.9"],
        ["ck.npz was made with another configuration", "lam: file has 0.0, expected 0.9"],
        {"ck.npz": lambda: _predictor_checkpoint()},
    ),
    "neural_predictor-corrupt-checkpoint": Case(
        "neural_predictor", [*TINY, "-p", "checkpoint_path:=ck.pt"], ["ck.pt"], {"ck.pt": b"PK\x03\x04 broken zip"}
    ),
    "neural_predictor-checkpoint-without-config": Case(
        "neural_predictor",
        [*TINY, "-p", "checkpoint_path:=ck.pt"],
        ["ck.pt", "without ['config']"],
        {"ck.pt": lambda: _learner_checkpoint_without("config")},
    ),
    # a checkpoint that could never be written: refused at start, not when the first one is due
    "predictor-checkpoint-under-a-file": Case(
        "predictor",
        ["-p", "checkpoint_path:=notes.txt/ck.npz"],
        ["checkpoint_path", "notes.txt is a file"],
        {"notes.txt": "the user's notes"},
    ),
    "predictor-checkpoint-in-unwritable-folder": Case(
        "predictor", ["-p", "checkpoint_path:=/proc/gamma_net/ck.npz"], ["checkpoint_path", "cannot write in /proc"]
    ),
    "horde-checkpoint-in-unwritable-folder": Case(
        "horde", ["-p", "checkpoint_path:=/proc/gamma_net/ck.npz"], ["checkpoint_path", "cannot write in /proc"]
    ),
    "neural_predictor-checkpoint-in-unwritable-folder": Case(
        "neural_predictor", [*TINY, "-p", "checkpoint_path:=/proc/ck.pt"], ["checkpoint_path", "cannot write in /proc"]
    ),
    "neural_predictor-out-of-range": Case("neural_predictor", [*TINY, "-p", "publish_rate:=-1.0"], ["publish_rate"]),
    "ale_bridge-no-recording": Case("ale_bridge", ["-p", "shard_dir:=nowhere"], ["nowhere"]),
    "ale_bridge-window-over-depth": Case(
        "ale_bridge", ["-p", "shard_dir:=nowhere", "-p", "window:=5000"], ["window", "5000"]
    ),
    "bag_player-missing-bag": Case("bag_player", ["-p", "bag:=gone.mcap"], ["gone.mcap"]),
    "bag_player-corrupt-bag": Case("bag_player", ["-p", "bag:=bad.mcap"], ["bad.mcap"], {"bad.mcap": b"\x89MCAP0\r\n"}),
    "bag_player-rate-word": Case("bag_player", ["-p", "rate:=fast"], ["rate", "'fast'"]),
    "transition_counter-negative-delay": Case("transition_counter", ["-p", "delay:=-1.0"], ["delay", "-1.0"]),
    "dynamixel_driver-bad-mode": Case(
        "dynamixel_driver", ["-p", "port:=/nonexistent/tty", "-p", "command_mode:=torque"], ["command_mode", "'torque'"]
    ),
    "dynamixel_driver-rate-out-of-range": Case("dynamixel_driver", ["-p", "rate_hz:=0"], ["rate_hz", "0.0"]),
    "teleop-unknown-key": Case(
        "teleop", ["--params-file", str(ARM), "-p", "teleop:joystik.deadzone:=0.1"], ["joystik"]
    ),
    "operator-wrong-type": Case("operator", ["-p", "seed:=1.5"], ["seed", "1.5"]),
    # a -p of the wrong type next to a params file that sets the same key: rcl kept the file's value
    "predictor-word-over-params-file": Case(
        "predictor", ["--params-file", str(ARM), "-p", "predictor:max_gap:=fast"], ["max_gap", "'fast'"]
    ),
    "predictor-seed-word-over-params-file": Case(
        "predictor", ["--params-file", str(ARM), "-p", "seed:=abc"], ["seed", "'abc'"]
    ),
    "dynamixel_driver-rate-word-over-params-file": Case(
        "dynamixel_driver",
        ["--params-file", str(DYNAMIXEL), "-p", "dynamixel_driver:rate_hz:=fast"],
        ["rate_hz", "'fast'"],
    ),
    "dynamixel_driver-baud-word-over-params-file": Case(
        "dynamixel_driver",
        ["--params-file", str(DYNAMIXEL), "-p", "dynamixel_driver:baud_rate:=fast"],
        ["baud_rate", "'fast'"],
    ),
    "dynamixel_driver-baud-float-over-params-file": Case(
        "dynamixel_driver",
        ["--params-file", str(DYNAMIXEL), "-p", "dynamixel_driver:baud_rate:=1000000.0"],
        ["baud_rate", "1000000.0"],
    ),
    "dynamixel_driver-ids-words-over-params-file": Case(
        "dynamixel_driver",
        ["--params-file", str(DYNAMIXEL), "-p", "dynamixel_driver:ids:=[a,b]"],
        ["ids", "['a', 'b']"],
    ),
    # a mistyped ROS flag: rcl raised UnknownROSArgsError, a 25-line traceback
    "dynamixel_driver-mistyped-ros-flag": Case(
        "dynamixel_driver", ["--params_file", str(DYNAMIXEL)], ["--params_file", "did you mean '--params-file'"]
    ),
}


def _predictor_checkpoint() -> bytes:
    """A checkpoint of the predictor with its default settings (TD(0)), as it saves one."""
    import tempfile

    from gamma_net_core.data.joints import JointsConfig
    from gamma_net_core.joint_stream import OnlineGammaNet
    from gamma_net_core.linear import GammaNetConfig
    from gamma_net_core.timescales import TimescaleSampling

    online = OnlineGammaNet(
        joints=JointsConfig(), learner=GammaNetConfig(), timescales=TimescaleSampling(), rng=np.random.default_rng(0)
    )
    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder, "ck.npz")
        online.save(path)
        return path.read_bytes()


def _learner_checkpoint_without(key: str) -> bytes:
    """A neural predictor's checkpoint (the TINY learner's) with one entry left out, as torch.save writes it."""
    import io

    import torch

    from gamma_net_core.neural.learner import NeuralConfig, NeuralLearner

    learner = NeuralLearner(NeuralConfig(feature_size=4, hidden_sizes=(8,), replay_capacity=100))
    state = learner.state_dict()
    del state[key]
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def _run(node: str, args: list[str], cwd: pathlib.Path, timeout: float = START_TIMEOUT) -> subprocess.CompletedProcess:
    """The node's run; one still running after the bound is stopped with SIGABRT and its stacks kept.

    ``PYTHONFAULTHANDLER`` makes Python print every thread's stack on SIGABRT, even from inside a
    C call (a DDS participant being created), so a node that hangs says where in its output.
    """
    command = [sys.executable, "-m", f"gamma_net_ros.{node}", "--ros-args", *args]
    env = dict(os.environ, PYTHONUNBUFFERED="1", PYTHONFAULTHANDLER="1")
    with subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as p:
        try:
            out, err = p.communicate(timeout=bound(timeout))
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGABRT)
            try:
                out, err = p.communicate(timeout=bound(10.0))
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
            err += f"[test] still running after {bound(timeout):.0f} s; stopped with SIGABRT (stacks above)"
        return subprocess.CompletedProcess(command, p.returncode, out, err)


@pytest.fixture(scope="module")
def refusals(tmp_path_factory) -> dict[str, tuple[subprocess.CompletedProcess, pathlib.Path, dict]]:
    """Every case run once, a few at a time: each start is mostly imports, which overlap well."""

    def run(key: str):
        case, folder = CASES[key], tmp_path_factory.mktemp(key)
        for name, content in case.files.items():
            content = content() if callable(content) else content
            (folder / name).write_bytes(content if isinstance(content, bytes) else content.encode())
        before = {name: (folder / name).read_bytes() for name in case.files}
        done = _run(case.node, case.args, folder)  # a node that never ends fails its own case, not the module
        return done, folder, before

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(CASES, pool.map(run, CASES)))


@pytest.mark.parametrize("key", CASES)
def test_refused_in_one_fatal_line(key: str, refusals):
    case = CASES[key]
    done, folder, before = refusals[key]
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "Traceback" not in output, output
    fatal = [line for line in output.splitlines() if "[FATAL]" in line]
    assert len(fatal) == 1, output
    assert "[ERROR]" not in output, output  # nothing else said about it
    for name in case.names:
        assert name in fatal[0], fatal[0]
    assert not re.search(r"allow_pickle|unsafe|weights_only", fatal[0]), fatal[0]  # never advice to load unsafely
    assert {name: (folder / name).read_bytes() for name in case.files} == before  # nothing changed
    assert sorted(p.name for p in folder.iterdir()) == sorted(case.files)  # and nothing written


def _start(node: str, args: list[str], cwd: pathlib.Path) -> subprocess.Popen:
    command = [sys.executable, "-m", f"gamma_net_ros.{node}", "--ros-args", *args]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )


def _wait_for_line(process: subprocess.Popen, text: str, timeout: float = START_TIMEOUT) -> list[str]:
    lines, deadline = [], time.monotonic() + bound(timeout)
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        if text in line:
            return lines
    raise AssertionError(f"no {text!r} in:\n{''.join(lines)}")


def _interrupt(process: subprocess.Popen) -> tuple[int, str]:
    os.killpg(process.pid, signal.SIGINT)
    try:
        rest, _ = process.communicate(timeout=bound(START_TIMEOUT))
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        raise
    return process.returncode, rest


def test_integers_are_taken_where_floats_are_declared(tmp_path, executor, spin):
    process = _start("predictor", ["-p", "max_gap:=2", "-p", "publish_timescales:=[1,2,3]"], tmp_path)
    try:
        lines = _wait_for_line(process, "predicting")
        assert "at tau [1.0, 2.0, 3.0]" in lines[-1]
        _set_at_run_time(executor, spin)
    finally:
        code, rest = _interrupt(process)
    assert code == 0, rest
    assert "publishing at gamma [0.75, 0.8]" in rest  # tau [4, 5], set as integers
    assert "Traceback" not in "".join(lines) + rest


def _set_at_run_time(executor, spin) -> None:
    """What `ros2 param set /predictor max_gap 3` sends: an integer, taken as 3.0; then a float list as integers."""
    from rcl_interfaces.msg import ParameterType
    from rclpy.node import Node
    from rclpy.parameter import Parameter
    from rclpy.parameter_client import AsyncParameterClient

    node = Node("param_setter")
    executor.add_node(node)
    client = AsyncParameterClient(node, "predictor")
    assert client.wait_for_services(timeout_sec=bound(START_TIMEOUT))

    def call(future):
        assert spin(executor, future.done, timeout=START_TIMEOUT)
        return future.result()

    for parameter in (Parameter("max_gap", value=3), Parameter("publish_timescales", value=[4, 5])):
        (result,) = call(client.set_parameters([parameter])).results
        assert result.successful, result.reason
    gap, taus = call(client.get_parameters(["max_gap", "publish_timescales"])).values
    assert gap.type == ParameterType.PARAMETER_DOUBLE and gap.double_value == 3.0
    assert list(taus.double_array_value) == [4.0, 5.0]
    (result,) = call(client.set_parameters([Parameter("max_gap", value=0)])).results
    assert not result.successful  # the float range still applies


def test_a_bag_plays_at_an_integer_rate(tmp_path):
    from gamma_net_core.data.bags import write_joint_states

    steps = 30
    bag = write_joint_states(
        tmp_path / "arm.mcap",
        stamp_ns=np.arange(steps) * 10_000_000,
        joint_names=["shoulder", "elbow"],
        position=np.zeros((steps, 2)),
    )
    done = _run("bag_player", ["-p", f"bag:={bag}", "-p", "rate:=6"], tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert f"{steps} messages" in output and "Traceback" not in output
