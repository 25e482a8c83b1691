"""docs/reflex.md's examples, run as written: each `ros2 run gamma_net_ros reflex` line starts the
node on its command form (the rules files the guide shows written beside it), then Ctrl-C exits 0."""

from __future__ import annotations

import pathlib
import re

import pytest
from ros2_cli import Background, close_all

GUIDE = pathlib.Path(__file__).resolve().parent.parent / "docs" / "reflex.md"

pytestmark = pytest.mark.ros


def guide_commands() -> list[str]:
    text = GUIDE.read_text()
    return [
        line.strip()
        for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S)
        for line in block.splitlines()
        if line.startswith("ros2 run gamma_net_ros reflex")
    ]


def guide_files() -> dict[str, str]:
    """The guide's YAML blocks that start with a ``# NAME.yaml`` line, by name."""
    blocks = re.findall(r"```yaml\n# (\S+\.yaml)\n(.*?)```", GUIDE.read_text(), flags=re.S)
    return {name: body for name, body in blocks}


def test_the_guide_has_an_example_per_form():
    forms = [re.search(r"command_type:=(\w+)", c).group(1) for c in guide_commands()]
    assert forms == ["float64_multi_array", "joint_trajectory", "twist"]


def test_every_rules_file_the_guide_names_parses_against_its_questions():
    """The guide names the shipped rules files (its base example is the shipped file, kept equal to it by
    tests/test_reflex_axes.py); each parses against the questions file beside it and the joints it commands."""
    from gamma_net_core.horde.questions import load_questions
    from gamma_net_core.paths import config_file
    from gamma_net_core.reflex.commands import TWIST_AXES
    from gamma_net_core.reflex.rules import load_rules

    names = sorted(set(re.findall(r"config/(\w+_rules)\.yaml", GUIDE.read_text())))
    assert names == ["base_reflex_rules", "reflex_rules"], names
    joints = {"base_reflex_rules": TWIST_AXES, "reflex_rules": ("shoulder", "elbow")}
    for name in names:
        questions = load_questions(config_file(name.replace("_rules", "_questions")))
        rule_set = load_rules(config_file(name), questions=questions, joint_names=joints[name])
        assert rule_set.rules, name


@pytest.mark.parametrize("command", guide_commands(), ids=lambda c: re.search(r"command_type:=(\w+)", c).group(1))
def test_each_guide_example_starts_on_its_form_and_stops_cleanly(tmp_path, command):
    for name, body in guide_files().items():
        (tmp_path / name).write_text(body)
    run = Background(command, cwd=tmp_path, log_path=tmp_path / "reflex.log", shell=True)
    try:
        topic = re.search(r"joint_commands:=(\S+)", command).group(1)
        assert run.wait_for(f"commands /{topic} from joint_commands_in", timeout=120), run.output
    finally:
        code = run.interrupt()
        close_all()
    assert code == 0, run.output
