"""gamma_net_core imports nothing from ROS, so `pip install .` serves researchers without ROS."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys
import textwrap

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent
ROS_MODULES = (
    "rclpy",
    "rcl_interfaces",
    "builtin_interfaces",
    "std_msgs",
    "sensor_msgs",
    "diagnostic_msgs",
    "gamma_net_msgs",
    "ament_index_python",
    "rosidl_runtime_py",
    "gamma_net_ros",
)

# Imports every gamma_net_core module with ROS made unimportable, then lists any ROS
# module that got loaded anyway.
IMPORT_ALL = textwrap.dedent(
    """
    import importlib, pkgutil, sys
    BLOCKED = {blocked!r}

    class Block:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in BLOCKED:
                raise ImportError("ROS module imported by gamma_net_core: " + name)
            return None

    sys.meta_path.insert(0, Block())
    import gamma_net_core
    assert gamma_net_core.__file__.startswith({root!r}), gamma_net_core.__file__
    names = [m.name for m in pkgutil.walk_packages(gamma_net_core.__path__, "gamma_net_core.")]
    for name in names:
        importlib.import_module(name)
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    print(len(names), "modules;", "loaded ROS modules:", loaded)
    sys.exit(1 if loaded else 0)
    """
)


def _run_import_all(root: pathlib.Path, extra_path: str | None = None) -> subprocess.CompletedProcess:
    code = IMPORT_ALL.format(blocked=ROS_MODULES, root=str(root))
    env = {"PATH": "/usr/bin:/bin", "HOME": str(root)}
    if extra_path:
        env["PYTHONPATH"] = extra_path
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=root)


def test_core_source_has_no_ros_import():
    offenders = []
    for path in (REPO / "gamma_net_core").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            offenders += [
                f"{path.relative_to(REPO)}:{node.lineno} {n}" for n in names if n.split(".")[0] in ROS_MODULES
            ]
    assert not offenders, "gamma_net_core must not import ROS:\n" + "\n".join(offenders)


@pytest.mark.slow
def test_every_core_module_imports_with_ros_blocked():
    result = _run_import_all(REPO, extra_path=str(REPO))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "loaded ROS modules: []" in result.stdout


def _imports(path: pathlib.Path) -> list[tuple[int, str]]:
    """Every absolute module name ``path`` imports, with its line (function-level imports included)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def test_library_imports_nothing_from_the_studies():
    """The library (gamma_net_core, gamma_net_ros) never imports the studies and benchmarks: they import it."""
    offenders = [
        f"{path.relative_to(REPO)}:{line} {name}"
        for package in ("gamma_net_core", "gamma_net_ros")
        for path in (REPO / package).rglob("*.py")
        for line, name in _imports(path)
        if name.split(".")[0] == "gamma_net_studies"
    ]
    assert not offenders, "the library must not import gamma_net_studies:\n" + "\n".join(offenders)


def test_studies_without_ros_import_no_ros():
    """gamma_net_studies outside its ``ros`` package runs where only gamma_net_core is installed."""
    studies = REPO / "gamma_net_studies"
    offenders = [
        f"{path.relative_to(REPO)}:{line} {name}"
        for path in studies.rglob("*.py")
        if "ros" not in path.relative_to(studies).parts[:-1]
        for line, name in _imports(path)
        if name.split(".")[0] in ROS_MODULES
    ]
    assert not offenders, "only gamma_net_studies.ros may import ROS:\n" + "\n".join(offenders)


@pytest.mark.slow
def test_pip_install_gives_core_without_ros(tmp_path):
    """`pip install .` (no ROS on the path) yields an importable gamma_net_core and the CLI."""
    # From a copy of the tracked files: pip writes *.egg-info beside the sources it builds, and
    # one left in the checkout would shadow the colcon install's metadata for every later test.
    source = tmp_path / "src"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True)
    for name in filter(None, tracked.stdout.split("\0")):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_bytes((REPO / name).read_bytes())
    target = tmp_path / "site"
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            target,
            source,
        ],
        capture_output=True,
        text=True,
    )
    assert install.returncode == 0, install.stderr
    assert (target / "gamma_net_core" / "cli.py").is_file()
    result = _run_import_all(target, extra_path=str(target))
    assert result.returncode == 0, result.stdout + result.stderr
    cli = subprocess.run(
        [sys.executable, "-c", "import sys; from gamma_net_core.cli import main; sys.exit(main(['timescales']))"],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(target)},
        cwd=tmp_path,
    )
    assert cli.returncode == 0, cli.stderr
    assert "0.99" in cli.stdout


#: The most lines a node module may have besides its module docstring: about one screen.
NODE_LINES = 200
#: Node modules allowed to be longer, each with its reason. One that fits again must leave the list.
NODE_LINES_EXCEPTIONS: dict[str, str] = {}


def _node_file(module: str) -> pathlib.Path:
    path = REPO.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


def _lines_besides_docstring(path: pathlib.Path) -> int:
    source = path.read_text()
    tree = ast.parse(source)
    docstring = 0
    if ast.get_docstring(tree, clean=False) is not None:
        docstring = tree.body[0].end_lineno - tree.body[0].lineno + 1
    return len(source.splitlines()) - docstring


def test_every_node_module_is_about_one_screen():
    """Each module in entry.NODES keeps its topics, callbacks and main(); rows, settings and health live beside it."""
    from gamma_net_ros.entry import NODES  # the standard library only: no ROS needed

    sizes = {module: _lines_besides_docstring(_node_file(module)) for module in NODES.values()}
    too_long = {m: n for m, n in sizes.items() if n > NODE_LINES and m not in NODE_LINES_EXCEPTIONS}
    assert not too_long, f"node modules over {NODE_LINES} lines besides their docstring: {too_long}"
    fits_now = [m for m in NODE_LINES_EXCEPTIONS if sizes.get(m, 0) <= NODE_LINES]
    assert not fits_now, (
        f"no longer over {NODE_LINES} lines (or no longer a node): remove {fits_now} from the exceptions"
    )


#: The most lines a function may have, its docstring included.
FUNCTION_LINES = 80
#: Functions still longer, to be broken up; one that fits again must leave the list.
FUNCTION_LINES_EXCEPTIONS = {}


def test_no_function_is_longer_than_a_screen_and_a_half():
    """Long functions are broken into named steps (a study's run reads as configure -> run -> report)."""
    sizes = {}
    for package in ("gamma_net_core", "gamma_net_ros", "gamma_net_studies"):
        for path in (REPO / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    sizes[f"{path.relative_to(REPO)}:{node.name}"] = max(
                        sizes.get(f"{path.relative_to(REPO)}:{node.name}", 0), node.end_lineno - node.lineno + 1
                    )
    too_long = {f: n for f, n in sizes.items() if n > FUNCTION_LINES and f not in FUNCTION_LINES_EXCEPTIONS}
    assert not too_long, f"functions over {FUNCTION_LINES} lines: {too_long}"
    fits_now = sorted(f for f in FUNCTION_LINES_EXCEPTIONS if sizes.get(f, 0) <= FUNCTION_LINES)
    assert not fits_now, f"no longer over {FUNCTION_LINES} lines (or gone): remove {fits_now} from the exceptions"
