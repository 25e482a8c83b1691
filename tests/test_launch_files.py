"""Launch files start only what exists: installed executables and shipped parameter files.

ROS 2's `launch` is not installable here, so the files cannot run in tests; this
checks what they name against setup.py and config/, which is what the tests start.
"""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
LAUNCH_FILES = sorted((REPO / "launch").glob("*.launch.py"))


def _entry_points() -> set[str]:
    text = (REPO / "setup.py").read_text()
    block = text[text.index("NODES = {") : text.index("}", text.index("NODES = {"))]
    return set(re.findall(r'"([a-z_]+)":', block))


def _keyword_strings(tree: ast.AST, keyword: str) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg == keyword and isinstance(kw.value, ast.Constant):
                    found.append(kw.value.value)
    return found


def test_there_are_launch_files():
    assert LAUNCH_FILES


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_file_names_real_executables_and_configs(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert "generate_launch_description" in names
    executables = _keyword_strings(tree, "executable")
    assert executables, f"{path.name} starts no node"
    missing = set(executables) - _entry_points()
    assert not missing, f"{path.name} names executables setup.py does not install: {missing}"
    assert set(_keyword_strings(tree, "package")) <= {"gamma_net_ros", "joy"}
    configs = re.findall(r'"([A-Za-z0-9_]+\.yaml)"', path.read_text())
    for config in configs:
        assert (REPO / "config" / config).is_file(), f"{path.name} names missing config/{config}"
