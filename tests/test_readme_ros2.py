"""The guides' `ros2` lines, run as written (taken from docs/arm.md and docs/horde.md, so a change there is tested).

From a folder holding `runs/arm/joint_states` (the arm guide's recording path): the playback launch
line, `ros2 topic echo /predictions`, the bag_player `ros2 run` line (the guide's stand-in for
`ros2 bag play`), `ros2 service call /predict_at ...` and `ros2 param set /predictor
publish_timescales ...`; and the Horde guide's lines that name no template file, on the shipped
questions (config/horde.yaml): its launch line, both echo lines and its `predict_at` call.
"""

from __future__ import annotations

import pathlib
import re
import shlex
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from guides import guide_text
from ros2_cli import (
    Background,
    assert_clean_shutdown,
    close_all,
    param_get,
    ros2,
    simulated_bag,
    stop_daemon,
    wait_for_nodes,
)
from waiting import bound, wait_until

#: The guides whose `ros2` lines this module runs, in this order (a prefix is looked up in the first that has it).
GUIDES = ("arm", "horde")

pytestmark = [pytest.mark.ros, pytest.mark.slow]


@pytest.fixture(scope="module", autouse=True)
def _no_daemon_left():
    yield
    close_all()
    stop_daemon()


def guide_commands() -> list[str]:
    """Every `ros2 ...` command in the GUIDES: code-block lines and inline code, comments dropped."""
    text = guide_text(*GUIDES)
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line.startswith("ros2 "):
                commands.append(line)
    for span in re.findall(r"`(ros2 [^`]+)`", text):
        commands.append(" ".join(span.split()))
    return commands


def guide_command(prefix: str) -> str:
    """The guides' first command that starts with PREFIX."""
    for command in guide_commands():
        if command.startswith(prefix):
            return command
    raise AssertionError(f"no guide of {GUIDES} has a command starting with {prefix!r}")


def test_readme_names_the_commands_this_module_runs():
    for prefix in ("ros2 launch gamma_net_ros playback.launch.py", "ros2 topic echo /predictions"):
        assert guide_command(prefix)
    assert guide_command("ros2 run gamma_net_ros bag_player").endswith("bag:=runs/arm/joint_states")


#: How ros2cli ends `ros2 topic echo` stopped by Ctrl-C (ros2cli/cli.py): SIGINT's number when the
#: KeyboardInterrupt reaches the verb, SIGTERM's when rclpy's own signal handler shut the context down
#: first (ExternalShutdownException). Which one comes first is a race inside rclpy; both are clean stops.
ECHO_STOPPED = (signal.SIGINT, signal.SIGTERM)


def start_echoes(lines: dict[str, str], cwd: pathlib.Path) -> dict[str, Background]:
    """The guide's echo lines (log file name: line), together, once the daemon lists their topics; each
    started again while it has not yet seen its topic."""
    topics = {shlex.split(line)[3] for line in lines.values()}
    listed = wait_until(lambda: topics <= set(ros2("topic", "list").stdout.split()), timeout=60.0, step=0.5)
    assert listed, f"{sorted(topics)} were never all listed by `ros2 topic list`"
    deadline = time.monotonic() + bound(60.0)
    echoes: dict[str, Background] = {}
    while True:
        for log, line in lines.items():
            if log not in echoes:
                echoes[log] = Background(line, cwd=cwd, log_path=cwd / log, shell=True)
        time.sleep(3.0)
        for log, echo in list(echoes.items()):
            if echo.process.poll() is not None and time.monotonic() <= deadline:
                assert "does not appear to be published yet" in echo.output, echo.output
                echo.close()
                del echoes[log]
        if len(echoes) == len(lines):
            return echoes


def test_readme_ros2_lines_on_the_playback_pipeline(tmp_path):
    simulated_bag(tmp_path)  # runs/arm/joint_states, where the guide's lines look
    # "ros2 launch gamma_net_ros playback.launch.py &  ros2 bag play runs/arm/joint_states":
    # no `ros2 bag` here (rosbag2 has no wheels); the guide's bag_player line stands in for it.
    launch_line = guide_command("ros2 launch gamma_net_ros playback.launch.py").split("&")[0]
    run = Background(shlex.split(launch_line), cwd=tmp_path, log_path=tmp_path / "launch.log")
    echo = None
    try:
        # In the guide's order, without waiting: the echo starts before the predictor exists (it
        # failed with "Could not determine the type" when the predictor was slower to start than it).
        echo = Background(
            guide_command("ros2 topic echo /predictions"), cwd=tmp_path, log_path=tmp_path / "echo.txt", shell=True
        )
        assert "/predictor" in wait_for_nodes({"/predictor"}, launched=run), run.output

        player = ros2(shell_line=guide_command("ros2 run gamma_net_ros bag_player"), cwd=tmp_path, timeout=180)
        assert player.returncode == 0, player.stdout
        assert "Traceback" not in player.stdout

        # The guide's call, and two it does not show: beyond the trained timescales, and too many at
        # once, refused by the running node, which names the value on the scale it was given and keeps
        # serving. At once: each call spends its seconds finding the service, not in the node.
        service = "ros2 service call /predict_at gamma_net_msgs/srv/PredictAt"
        many = ", ".join(["10"] * 1001)
        lines = [
            guide_command("ros2 service call /predict_at"),
            f'{service} "{{timescales: [10, 1.0e+20], scale: 1}}"',
            f'{service} "{{timescales: [{many}], scale: 1}}"',
        ]
        with ThreadPoolExecutor(len(lines)) as pool:
            call, huge, flood = pool.map(lambda line: ros2(shell_line=line, cwd=tmp_path, timeout=120), lines)
        assert call.returncode == 0, call.stdout
        response = call.stdout.split("response:", 1)[-1]
        values = re.search(r"values=\[([^\]]*)\]", response)
        assert values and len(values.group(1).split(",")) == 3, call.stdout  # timescales: [10, 30, 100]
        assert huge.returncode == 0 and "success=False" in huge.stdout, huge.stdout
        assert re.search(r"tau 1(\.0)?e\+20 at index 1 is beyond", huge.stdout), huge.stdout
        assert flood.returncode == 0 and "success=False" in flood.stdout, flood.stdout
        assert "max_request_timescales" in flood.stdout, flood.stdout

        set_line = guide_command("ros2 param set /predictor publish_timescales")
        result = ros2(shell_line=set_line, cwd=tmp_path, timeout=120)
        assert result.returncode == 0 and "Set parameter successful" in result.stdout, result.stdout
        assert param_get("/predictor", "publish_timescales") == "[5.0, 50.0]"
    finally:
        if echo is not None:
            echo_code = echo.interrupt()
        code = run.interrupt()
    printed = echo.output
    assert "gammas:" in printed and "values:" in printed, printed
    # ros2cli ends a verb stopped by Ctrl-C with a signal's number (ros2cli/cli.py), not a traceback.
    assert "Traceback" not in printed, printed
    assert echo_code in ECHO_STOPPED, (echo_code, printed)
    assert code == 0, run.output
    assert_clean_shutdown(run.output, ["predictor"])


def horde_guide_commands() -> list[str]:
    """The Horde guide's lines that run as written: no template file (my_questions.yaml) named."""
    return [c for c in guide_commands() if ("horde" in c or "question:" in c) and "my_questions" not in c]


def test_readme_horde_lines_on_the_shipped_questions(tmp_path):
    simulated_bag(tmp_path)  # runs/arm/joint_states: the arm's /joint_states the shipped questions read
    commands = horde_guide_commands()
    launch_line = guide_command("ros2 launch gamma_net_ros horde.launch.py")
    assert launch_line in commands, commands
    (call_line,) = [c for c in commands if c.startswith("ros2 service call /predict_at")]
    run = Background(shlex.split(launch_line), cwd=tmp_path, log_path=tmp_path / "launch.log")
    echo = errors = None
    try:
        assert "/horde" in wait_for_nodes({"/horde"}, launched=run), run.output
        echoes = start_echoes(
            {
                "echo.txt": guide_command("ros2 topic echo /horde/predictions"),
                "errors.txt": guide_command("ros2 topic echo /horde/errors"),
            },
            tmp_path,
        )
        echo, errors = echoes["echo.txt"], echoes["errors.txt"]
        # The arm guide's bag_player line, faster than real time (the line itself runs as written above).
        play = guide_command("ros2 run gamma_net_ros bag_player") + " -p rate:=4.0"
        player = ros2(shell_line=play, cwd=tmp_path, timeout=180)
        assert player.returncode == 0, player.stdout

        call = ros2(shell_line=call_line, cwd=tmp_path, timeout=120)
        assert call.returncode == 0, call.stdout
        response = call.stdout.split("response:", 1)[-1]
        assert "success=True" in response and "question='shoulder_speed'" in response, call.stdout
        values = re.search(r"values=\[([^\]]*)\]", response)
        assert values and len(values.group(1).split(",")) == 2, call.stdout  # timescales: [10, 100]
    finally:
        codes = [listener.interrupt() for listener in (echo, errors) if listener is not None]
        code = run.interrupt()
    printed = echo.output
    assert "questions:" in printed and "- shoulder_speed" in printed and "readout_values:" in printed, printed
    assert "rmse:" in errors.output and "mean_rmse:" in errors.output, errors.output
    assert "Traceback" not in printed + errors.output, printed + errors.output
    assert all(code in ECHO_STOPPED for code in codes), codes
    assert code == 0, run.output
    assert_clean_shutdown(run.output, ["horde"])
