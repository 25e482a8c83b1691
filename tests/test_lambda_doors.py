"""lambda (TD(lambda)) through the doors users open: the predictor node's parameter and the YAML of `gamma-net`.

A bad lambda (negative, >= 1, a word) is refused the way every bad setting is: the node exits 1
with one ``[FATAL]`` line naming the parameter and value; ``gamma-net arm train`` and ``gamma-net
horde train`` exit 1 with one line naming the file's value; no traceback, nothing written.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest
from waiting import bound

from gamma_net_ros.paths import config_file

ARM = config_file("arm")
HORDE = config_file("horde")
#: A node or command refusing at start takes a few seconds on a loaded machine; generous (scaled by bound).
TIMEOUT = 120.0


def _node(args: list[str], cwd: pathlib.Path) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "gamma_net_ros.predictor", "--ros-args", *args]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=bound(TIMEOUT))


@pytest.mark.ros
@pytest.mark.parametrize(
    "value, named", [("-0.1", "-0.1"), ("1.0", "1.0"), ("0.9995", "0.9995"), ("high", "'high'")]
)  # fmt: skip
def test_the_predictor_refuses_a_bad_lambda_in_one_fatal_line(tmp_path, value, named):
    result = _node(["-p", f"learner.lam:={value}"], tmp_path)
    output = result.stdout + result.stderr
    fatal = [line for line in output.splitlines() if "[FATAL]" in line]
    assert result.returncode == 1, output
    assert "Traceback" not in output
    assert len(fatal) == 1 and "learner.lam" in fatal[0] and named in fatal[0], output
    assert list(tmp_path.iterdir()) == []


def _yaml_with(source: pathlib.Path, old: str, new: str, out: pathlib.Path) -> pathlib.Path:
    """``source`` with its one line starting ``old`` (after the indent) changed to start ``new`` instead."""
    text = source.read_text()
    assert text.count(old) == 1, old
    out.write_text(text.replace(old, new))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("value", ["-0.5", "1.0", "high"])
def test_arm_train_refuses_a_bad_lambda_from_its_yaml(tmp_path, value):
    params = _yaml_with(ARM, "      lam: 0.0 ", f"      lam: {value} ", tmp_path / "arm.yaml")
    result = subprocess.run(
        ["gamma-net", "arm", "train", "--params", str(params), "--out", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=bound(TIMEOUT),
    )  # fmt: skip
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert "lam" in lines[0] and value in lines[0] and "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()


def test_horde_train_refuses_a_bad_lambda_from_its_questions(tmp_path):
    questions = _yaml_with(HORDE, "  lam: 0.0 ", "  lam: high ", tmp_path / "horde.yaml")
    result = subprocess.run(
        ["gamma-net", "horde", "train", "--bag", str(tmp_path), "--questions", str(questions), "--out",
         str(tmp_path / "run")],
        capture_output=True, text=True, timeout=bound(TIMEOUT),
    )  # fmt: skip
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert "lam must be float; got 'high'" in lines[0] and "Traceback" not in result.stderr
    assert not (tmp_path / "run").exists()
