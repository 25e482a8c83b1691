"""The setup a user runs before anything else: `tools/env.sh` under a strict shell, `make demo` without the ROS 2 tools.

The Makefile runs for real in a copy of this checkout whose build is up to date (its stamps
newer than every source, the shared venv's own stamps untouched), so only the rule under test
does anything; what it would run is checked with `make -n` first, so a copy that is somehow out
of date never installs anything into the venv.
"""

from __future__ import annotations

import os
import pathlib
import subprocess

import pytest
from waiting import bound

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _bash(script: str, cwd=ROOT) -> subprocess.CompletedProcess:
    # A shell of its own, as a user's new terminal: nothing of this session's sourced setup.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COLCON", "AMENT", "VIRTUAL_ENV", "PYTHONPATH"))}
    return subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, timeout=bound(60))


def test_env_sh_can_be_sourced_under_set_u_and_leaves_it_on():
    result = _bash(
        "set -euo pipefail; source tools/env.sh; case $- in *u*) echo nounset kept;; esac; "
        "python -c 'import gamma_net_msgs, gamma_net_ros; print(\"imports\")'"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["nounset kept", "imports"], result.stdout + result.stderr
    assert "unbound variable" not in result.stderr, result.stderr
    loose = _bash("source tools/env.sh; case $- in *u*) echo nounset on;; *) echo nounset off;; esac")
    assert loose.stdout.strip() == "nounset off", loose.stdout + loose.stderr  # a caller's shell is left as it was


@pytest.fixture
def checkout(tmp_path) -> pathlib.Path:
    """This checkout's tracked files (as they are now), its venv, and a build that is up to date."""
    copy = tmp_path / "checkout"
    files = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    for name in files:
        source = ROOT / name
        if source.is_file():
            target = copy / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
            os.utime(target, (946684800, 946684800))  # 2000-01-01: older than every stamp
    (copy / ".venv").symlink_to((ROOT / ".venv").resolve())
    (copy / "build").mkdir()
    for stamp in ("build/.colcon-stamp", "build/.numba-warm-stamp"):
        (copy / stamp).touch()
    return copy


def test_demo_sets_up_without_the_ros2_tools_and_says_what_is_skipped(checkout, tmp_path):
    empty = tmp_path / "no-vendor"
    empty.mkdir()
    plan = _bash(f"make -n demo-setup ROS2_VENDOR={empty}", cwd=checkout)
    assert "pip install" not in plan.stdout and "colcon build" not in plan.stdout, plan.stdout  # nothing else to do

    result = _bash(f"make demo-setup ROS2_VENDOR={empty}", cwd=checkout)
    assert result.returncode == 0, result.stdout + result.stderr
    skipped = [line for line in result.stdout.splitlines() if line.startswith("ros2 tools: skipped")]
    assert len(skipped) == 1, result.stdout + result.stderr
    assert f"no sources in ROS2_VENDOR={empty}" in skipped[0] and "the demo needs none" in skipped[0], skipped
    assert "build/ros2_tools/.stamp rule in the Makefile" in skipped[0], skipped  # where to get them
    assert "error" not in result.stdout + result.stderr
    assert not (checkout / "build" / "ros2_tools" / ".stamp").exists()  # `make test` will still ask for them

    # What `make test` and `make setup` need: still refused without them, naming where to get them.
    tools = _bash(f"make build/ros2_tools/.stamp ROS2_VENDOR={empty}", cwd=checkout)
    assert tools.returncode != 0, tools.stdout + tools.stderr
    assert f"error: no ROS 2 tools and no sources in ROS2_VENDOR={empty}: source a ROS 2 install" in tools.stdout
