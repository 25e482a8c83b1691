"""Launch files start only what exists: installed executables, declared packages, shipped parameter files.

A quick check of what they name against setup.py, package.xml and config/; tests/test_launch.py
runs them under the real `ros2 launch`.
"""

from __future__ import annotations

import ast
import pathlib
import re

import pytest

from gamma_net_ros.entry import NODES

REPO = pathlib.Path(__file__).resolve().parent.parent
LAUNCH_FILES = sorted((REPO / "launch").glob("*.launch.py"))


def _entry_points() -> set[str]:
    return set(NODES)  # setup.py installs one executable per entry


def _nodes(tree: ast.AST) -> list[tuple[str, str]]:
    """(package, executable) of every launch_ros Node(...) the file starts."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Node":
            kws = {kw.arg: kw.value.value for kw in node.keywords if isinstance(kw.value, ast.Constant)}
            found.append((kws.get("package"), kws.get("executable")))
    return found


def test_there_are_launch_files():
    assert LAUNCH_FILES


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launch_file_names_real_executables_and_configs(path):
    tree = ast.parse(path.read_text(), filename=str(path))
    names = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert "generate_launch_description" in names
    nodes = _nodes(tree)
    assert nodes, f"{path.name} starts no node"
    ours = {executable for package, executable in nodes if package == "gamma_net_ros"}
    missing = ours - _entry_points()
    assert not missing, f"{path.name} names executables setup.py does not install: {missing}"
    # What a launch file starts is a declared dependency, so rosdep installs it with this package.
    declared = set(re.findall(r"<exec_depend>([^<]+)</exec_depend>", (REPO / "package.xml").read_text()))
    undeclared = {package for package, _ in nodes} - declared - {"gamma_net_ros"}
    assert not undeclared, f"{path.name} starts nodes of packages package.xml does not declare: {undeclared}"
    configs = re.findall(r'"([A-Za-z0-9_]+\.yaml)"', path.read_text())
    for config in configs:
        assert (REPO / "config" / config).is_file(), f"{path.name} names missing config/{config}"
