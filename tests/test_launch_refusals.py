"""A launch whose node refuses to start ends `ros2 launch` with exit code 1, under the real `ros2 launch`.

The argument checks refuse what the launch file can see (tests/test_launch.py); what only the
node can judge (a questions file that exists but says something wrong, a parameter out of its
range) is refused by the node in one line, and the launch then ends with exit code 1 and a line
naming the node, every other process stopped: a supervisor or a script sees the failure.
"""

from __future__ import annotations

import pytest
from ros2_cli import close_all, ros2, stop_daemon

pytestmark = pytest.mark.ros


@pytest.fixture(scope="module", autouse=True)
def _no_daemon_left():
    yield
    close_all()
    stop_daemon()


def _launched(tmp_path, *arguments: str) -> tuple[int, str]:
    result = ros2("launch", "gamma_net_ros", *arguments, cwd=tmp_path, timeout=120.0)
    return result.returncode, result.stdout


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_horde_that_refuses_its_questions_file_ends_the_launch_with_code_1(tmp_path, workers):
    questions = tmp_path / "questions.yaml"
    # The file exists (the launch's own check passes); its cumulant names a field JointState lacks.
    questions.write_text(
        "state:\n"
        "  - {topic: /joint_states, type: sensor_msgs/msg/JointState, field: 'position[0]', low: -1.0, high: 1.0}\n"
        "questions:\n"
        "  - name: speed\n"
        "    cumulant: {topic: /joint_states, type: sensor_msgs/msg/JointState, field: 'speeds[0]'}\n"
    )
    code, output = _launched(tmp_path, "horde.launch.py", f"questions_file:={questions}", f"workers:={workers}")
    assert code == 1, output
    assert "ended with exit code 1" in output, output
    assert "Traceback" not in output, output


def test_a_predictor_that_refuses_its_parameters_ends_the_playback_launch_with_code_1(tmp_path):
    params = tmp_path / "predictor.yaml"
    params.write_text("predictor:\n  ros__parameters:\n    seed: -5\n")
    code, output = _launched(tmp_path, "playback.launch.py", f"params_file:={params}")
    assert code == 1, output
    assert "predictor ended with exit code 1" in output, output
    assert "Traceback" not in output, output
