"""Every launch file under the real `ros2 launch`, with the arguments the guides show.

Each test starts the launch file as a user does, checks that every node is up, that each
launch argument reaches its node (read back with `ros2 param get`), that messages flow, and
that Ctrl-C (SIGINT to the process group) ends every process with code 0 before launch would
escalate to SIGTERM, with the checkpoints written. Bad arguments are refused in one line
before any node starts.
"""

from __future__ import annotations

import pathlib
import subprocess

import pytest
import yaml
from ros2_cli import (
    Background,
    assert_clean_shutdown,
    close_all,
    launch,
    param_gets,
    ros2,
    simulated_bag,
    stop_daemon,
    wait_for_nodes,
)
from waiting import bound

REPO = pathlib.Path(__file__).resolve().parent.parent
CONFIG = REPO / "config"

PREDICTION = "gamma_net_msgs/msg/Prediction"

pytestmark = pytest.mark.ros


@pytest.fixture(scope="module", autouse=True)
def _no_daemon_left():
    yield
    close_all()
    stop_daemon()


def edited_config(source: pathlib.Path, target: pathlib.Path, node: str, **values) -> pathlib.Path:
    """A copy of a shipped YAML with some of NODE's parameters changed (a user's params_file)."""
    document = yaml.safe_load(source.read_text())
    document[node]["ros__parameters"].update(values)
    target.write_text(yaml.safe_dump(document))
    return target


def echo_once(topic: str, message_type: str, cwd) -> Background:
    """`ros2 topic echo --once TOPIC TYPE` in the background, listening from now on (the type
    given, so it need not wait for discovery): a stream that ends early is not missed."""
    name = topic.strip("/").replace("/", "_")
    return Background(["ros2", "topic", "echo", "--once", topic, message_type], cwd=cwd, log_path=cwd / f"{name}.txt")


def received(echo: Background, timeout: float = 120.0) -> str:
    """What the echo printed once its message came (or ``bound(timeout)`` passed)."""
    try:
        code = echo.process.wait(timeout=bound(timeout))
    except subprocess.TimeoutExpired:
        code = None
    output = echo.output
    echo.close()
    assert code == 0, f"no message within {timeout} s (exit {code}):\n{output}"
    return output


@pytest.mark.slow
def test_playback_launch_arguments_win_messages_flow_and_ctrl_c_saves(tmp_path):
    bag = simulated_bag(tmp_path)
    checkpoint = tmp_path / "arm.npz"
    # The user's file sets the predictor's own section; the launch argument must still win.
    params = edited_config(
        CONFIG / "arm.yaml", tmp_path / "mine.yaml", "predictor", publish_timescales=[3.0, 30.0], checkpoint_path=""
    )
    run = launch(
        "gamma_net_ros",
        "playback.launch.py",
        f"params_file:={params}",
        f"checkpoint_path:={checkpoint}",
        cwd=tmp_path,
        log_path=tmp_path / "launch.log",
    )
    try:
        assert "/predictor" in wait_for_nodes({"/predictor"}, launched=run), run.output
        assert param_gets(("/predictor", "checkpoint_path"), ("/predictor", "publish_timescales")) == [
            str(checkpoint),
            "[3.0, 30.0]",
        ]
        echo = echo_once("/predictions", PREDICTION, tmp_path)
        player = subprocess.Popen(
            ["ros2", "run", "gamma_net_ros", "bag_player", "--ros-args", "-p", f"bag:={bag}", "-p", "rate:=4.0"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            prediction = received(echo)
        finally:
            player_output = player.communicate(timeout=bound(120))[0]
        assert player.returncode == 0, player_output
        # publish_timescales from the user's file: tau 3 and 30, published as gamma = 1 - 1/tau
        assert "gammas:\n- 0.6666666666666667\n- 0.9666666666666667\nvalues:" in prediction, prediction
    finally:
        code = run.interrupt()
    assert code == 0, run.output
    assert_clean_shutdown(run.output, ["predictor"])
    assert checkpoint.is_file(), run.output


@pytest.mark.slow
def test_horde_launch_arguments_take_effect_a_bag_makes_predictions_flow_and_ctrl_c_saves(tmp_path):
    bag = simulated_bag(tmp_path)
    checkpoint = tmp_path / "horde.npz"
    # The user's own questions file: the shipped one with another published tau set.
    document = yaml.safe_load((CONFIG / "horde.yaml").read_text())
    document["publish_taus"] = [3, 30]
    questions = tmp_path / "my_questions.yaml"
    questions.write_text(yaml.safe_dump(document))
    run = launch(
        "gamma_net_ros",
        "horde.launch.py",
        f"questions_file:={questions}",
        f"checkpoint_path:={checkpoint}",
        "tick_topic:=/joint_states",  # a tick per played message (the guides' test runs the clock)
        cwd=tmp_path,
        log_path=tmp_path / "launch.log",
    )
    try:
        assert "/horde" in wait_for_nodes({"/horde"}, launched=run), run.output
        asked = [("/horde", "questions_file"), ("/horde", "checkpoint_path"), ("/horde", "tick_topic")]
        assert param_gets(*asked) == [str(questions), str(checkpoint), "/joint_states"]
        echo = echo_once("/horde/predictions", "gamma_net_msgs/msg/PredictionArray", tmp_path)
        player = subprocess.Popen(
            ["ros2", "run", "gamma_net_ros", "bag_player", "--ros-args", "-p", f"bag:={bag}", "-p", "rate:=4.0"],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            prediction = received(echo)
        finally:
            player_output = player.communicate(timeout=bound(120))[0]
        assert player.returncode == 0, player_output
        assert "- shoulder_speed\n" in prediction and "- elbow_speed_until_past_2rad\n" in prediction, prediction
        # publish_taus from the user's questions file: tau 3 and 30, published as gamma = 1 - 1/tau
        assert "gammas:\n- 0.6666666666666667\n- 0.9666666666666667\n" in prediction, prediction
    finally:
        code = run.interrupt()
    assert code == 0, run.output
    assert_clean_shutdown(run.output, ["horde"])
    assert checkpoint.is_file(), run.output


@pytest.mark.slow
def test_arm_launch_drives_the_emulated_servos_and_predicts_and_a_second_on_its_port_is_refused(
    tmp_path, start_emulator
):
    link, client = start_emulator(positions=(-0.7, 1.7))
    checkpoint = tmp_path / "arm.npz"
    params = edited_config(
        CONFIG / "arm.yaml", tmp_path / "mine.yaml", "predictor", checkpoint_path=str(checkpoint), learn=True
    )
    # The user's driver file names another port: port:= must still win over it.
    driver_params = edited_config(
        CONFIG / "dynamixel.yaml", tmp_path / "driver.yaml", "dynamixel_driver", rate_hz=20.0, port="/dev/ttyUSB9"
    )
    run = launch(
        "gamma_net_ros",
        "arm.launch.py",
        f"port:={link}",
        "scripted_operator:=true",
        f"params_file:={params}",
        f"dynamixel_params_file:={driver_params}",
        cwd=tmp_path,
        log_path=tmp_path / "launch.log",
    )
    nodes = {"/dynamixel_driver", "/teleop", "/predictor", "/operator"}
    commands = echo_once("/joint_commands", "sensor_msgs/msg/JointState", tmp_path)
    predictions = echo_once("/predictions", PREDICTION, tmp_path)
    try:
        assert nodes <= wait_for_nodes(nodes, launched=run), run.output
        asked = [("/dynamixel_driver", "port"), ("/dynamixel_driver", "rate_hz"), ("/predictor", "checkpoint_path")]
        assert param_gets(*asked) == [link, "20.0", str(checkpoint)]
        # operator -> joy -> teleop -> joint_commands -> driver -> servos -> joint_states -> predictor
        assert "velocity:" in received(commands)
        assert "gammas:" in received(predictions)

        # A second launch on the same port (in the same run, to start the arm once): its driver finds
        # the port locked; the launch ends, in one line, before its operator could command this arm.
        second = ros2("launch", "gamma_net_ros", "arm.launch.py", f"port:={link}", "scripted_operator:=true",
                      cwd=tmp_path, timeout=180)  # fmt: skip
        assert second.returncode == 1, second.stdout
        (fatal,) = [line for line in second.stdout.splitlines() if "refusing to start" in line]
        assert f"{link} is in use by another program" in fatal, second.stdout
        launch_errors = [line for line in second.stdout.splitlines() if "[ERROR] [launch]" in line]
        assert launch_errors == [
            "[ERROR] [launch]: Caught exception in launch (see debug for traceback): "
            "dynamixel_driver ended with exit code 1 (its line above says why)"
        ], second.stdout
        # The first launch's driver never lost its port (before the lock: 7 reconnects in 15 s).
        states = echo_once("/joint_states", "sensor_msgs/msg/JointState", tmp_path)
        assert "position:" in received(states), run.output
        assert client.state()["servos"][1]["torque"]
    finally:
        code = run.interrupt()
    assert code == 0, run.output
    assert_clean_shutdown(run.output, ["dynamixel_driver", "teleop", "predictor", "operator"])
    assert checkpoint.is_file(), run.output
    assert "servo bus lost" not in run.output and "not ready" not in run.output, run.output


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    """A real Atari recording, tiny: `gamma-net atari record`."""
    out = tmp_path_factory.mktemp("atari") / "centipede"
    command = ["gamma-net", "atari", "record", "--steps", "300", "--out", str(out), "--shard-size", "100"]
    command += ["--max-episode-steps", "120", "--no-progress"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=bound(300))
    assert result.returncode == 0, result.stdout + result.stderr
    return out


@pytest.mark.slow
def test_atari_launch_bridges_a_recording_to_the_neural_predictor(tmp_path, recording):
    checkpoint = tmp_path / "centipede.pt"
    document = yaml.safe_load((CONFIG / "atari.yaml").read_text())
    section = document["neural_predictor"]["ros__parameters"]
    section.update(checkpoint_path="", publish_rate=20.0)  # the launch argument gives it
    # Tiny replay: learning starts within the recording, and the checkpoint stays small.
    section["learner"].update(replay_capacity=500, min_replay_history=64, batch_size=4, target_sync_period=50)
    document["ale_bridge"]["ros__parameters"]["shard_dir"] = "/nowhere"  # the launch argument must win
    # Paced (10 s in all): the predictions are published as transitions arrive, and the echo below
    # hears only those published after DDS has matched it, which may take seconds on a busy machine.
    document["ale_bridge"]["ros__parameters"]["rate"] = 30.0
    params = tmp_path / "mine.yaml"
    params.write_text(yaml.safe_dump(document))
    run = launch(
        "gamma_net_ros",
        "atari.launch.py",
        f"shard_dir:={recording}",
        f"params_file:={params}",
        f"checkpoint_path:={checkpoint}",
        cwd=tmp_path,
        log_path=tmp_path / "launch.log",
    )
    nodes = {"/neural_predictor", "/ale_bridge"}
    predictions = echo_once("/predictions", PREDICTION, tmp_path)
    try:
        assert nodes <= wait_for_nodes(nodes, launched=run), run.output
        asked = [("/ale_bridge", "shard_dir"), ("/neural_predictor", "checkpoint_path")]
        assert param_gets(*asked) == [str(recording), str(checkpoint)]
        assert "gammas:" in received(predictions)
    finally:
        code = run.interrupt()
    assert code == 0, run.output
    assert_clean_shutdown(run.output, ["neural_predictor", "ale_bridge"])
    assert checkpoint.is_file(), run.output


REFUSALS = [
    (["playback.launch.py", "params_file:=/nonexistent/arm.yaml"], "params_file:=/nonexistent/arm.yaml"),
    (["arm.launch.py", "params_file:=/nonexistent/arm.yaml"], "params_file:=/nonexistent/arm.yaml"),
    (["arm.launch.py", "dynamixel_params_file:=/nonexistent/d.yaml"], "dynamixel_params_file:=/nonexistent/d.yaml"),
    (["arm.launch.py", "joy:=true"], "package 'joy' is not installed"),
    (["atari.launch.py", "shard_dir:=runs/x", "params_file:=/nonexistent/a.yaml"], "params_file:=/nonexistent/a.yaml"),
    (["horde.launch.py", "questions_file:=/nonexistent"], "questions_file:=/nonexistent: no such file"),
    (["horde.launch.py", "workers:=zero"], "workers:=zero: must be a whole number >= 1"),
    (["horde.launch.py", "workers:=2", "share:=1/2"], "share:=1/2 with workers:=2: give one"),
    # An argument the file does not declare: ros2 launch itself would take it without a word.
    (
        ["playback.launch.py", "bag:=runs/arm/joint_states"],
        "bag:=runs/arm/joint_states: playback.launch.py has no such argument; it takes params_file, checkpoint_path",
    ),
    (["playback.launch.py", "chekpoint_path:=a.npz"], "has no such argument; did you mean checkpoint_path?"),
    (
        ["arm.launch.py", "prot:=/dev/ttyUSB1"],
        "prot:=/dev/ttyUSB1: arm.launch.py has no such argument; did you mean port?",
    ),
    (["atari.launch.py", "shard_dir:=runs/x", "checkpoint:=c.pt"], "did you mean checkpoint_path?"),
    (
        ["horde.launch.py", "tick_topics:=/joint_states"],
        "horde.launch.py has no such argument; did you mean tick_topic?",
    ),
    (["reflex.launch.py", "rule_file:=r.yaml"], "reflex.launch.py has no such argument; did you mean rules_file?"),
]


@pytest.mark.parametrize(("arguments", "reason"), REFUSALS, ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_a_bad_launch_argument_is_refused_before_any_node_starts(tmp_path, arguments, reason):
    result = ros2("launch", "gamma_net_ros", *arguments, cwd=tmp_path)
    assert result.returncode == 1, result.stdout
    errors = [line for line in result.stdout.splitlines() if "[ERROR]" in line]
    assert len(errors) == 1 and reason in errors[0], result.stdout
    assert "Traceback" not in result.stdout
    assert "process started" not in result.stdout, result.stdout
