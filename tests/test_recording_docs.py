"""docs/recording.md's commands, run as written (taken from the file, so a change there is tested).

From a folder of the test's own: the robot stand-in (tests/robot_standin.py) publishes while
each record line runs; the `ros2 run` line is stopped with Ctrl-C (SIGINT to its group), the
`python -m` line with SIGTERM; then the bag_player line plays the recording, and the
`horde train` line (on the page's questions file) and the `arm train` line learn from it.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import signal
import subprocess
import sys

import pytest
import yaml
from ros2_cli import Background, close_all, ros2
from test_bag_recorder import STANDIN, check_metadata, read_bag
from waiting import bound

DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "recording.md"

pytestmark = [pytest.mark.ros, pytest.mark.slow]


@pytest.fixture(scope="module", autouse=True)
def _nothing_left():
    yield
    close_all()


def doc_commands() -> list[str]:
    """Every command line of the page's bash blocks."""
    text = DOC.read_text()
    return [line.strip() for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S) for line in block.splitlines()]


def doc_command(prefix: str) -> str:
    found = [c for c in doc_commands() if c.startswith(prefix)]
    assert found, f"docs/recording.md has no command starting with {prefix!r}"
    return found[0]


def record(line: str, cwd: pathlib.Path, *, count: int, sig: int, name: str) -> tuple[int, str]:
    """Run a record line while the stand-in publishes ``count`` JointStates; stop it with ``sig``."""
    run = Background(line, cwd=cwd, log_path=cwd / f"{name}.log", shell=True)
    try:
        standin = subprocess.run(
            [sys.executable, str(STANDIN), "--count", str(count), "--topics", "/joint_states", "/battery"]
            + ["--wait", str(bound(60))],
            capture_output=True,
            text=True,
            env=dict(os.environ, PYTHONUNBUFFERED="1"),
            timeout=bound(120),
        )
        assert standin.returncode == 0, standin.stdout + standin.stderr + run.output
        os.killpg(run.process.pid, sig)
        code = run.process.wait(timeout=bound(30))
    finally:
        run.close()
    return code, run.output


def test_the_pages_commands_record_play_and_train(tmp_path):
    count = 300  # 6 s at 50 Hz: 60 steps of the questions' 10 Hz clock
    code, out = record(
        doc_command("ros2 run gamma_net_ros bag_recorder"), tmp_path, count=count, sig=signal.SIGINT, name="mcap"
    )
    assert code == 0 and "Traceback" not in out, out
    bag = tmp_path / "runs" / "my_robot" / "bag"
    expected = {"/joint_states": count, "/battery": count // 10}
    assert f"wrote runs/my_robot/bag: {sum(expected.values())} messages" in out, out
    check_metadata(bag, expected, "mcap")
    assert {t: len(m) for t, m in read_bag(bag).items()} == expected

    code, out = record(
        doc_command("python -m gamma_net_ros.entry bag_recorder"), tmp_path, count=60, sig=signal.SIGTERM, name="db3"
    )
    assert code == 0 and "Traceback" not in out, out
    check_metadata(tmp_path / "runs" / "my_robot" / "bag_sqlite", {"/joint_states": 60, "/battery": 6}, "sqlite3")

    played = ros2(shell_line=doc_command("ros2 run gamma_net_ros bag_player"), cwd=tmp_path, timeout=120)
    assert played.returncode == 0 and "Traceback" not in played.stdout, played.stdout
    assert f"published {count}" in played.stdout.strip().splitlines()[-1], played.stdout

    (questions,) = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), flags=re.S)
    (tmp_path / "my_questions.yaml").write_text(questions)
    for line in (doc_command("gamma-net horde train"), doc_command("gamma-net arm train")):
        done = subprocess.run(line, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=bound(300))
        assert done.returncode == 0, f"{line}\n{done.stdout}\n{done.stderr}"
    horde = json.loads((tmp_path / "runs" / "my_robot" / "horde" / "horde_train.json").read_text())
    assert set(horde["questions"]) == {"shoulder_speed", "voltage"} and horde["transitions"] > 0
    arm = json.loads((tmp_path / "runs" / "my_robot" / "arm" / "arm_train.json").read_text())
    assert arm["recording"]["usable samples"] == count
    assert yaml.safe_load(questions)["rate_hz"] == 10.0
