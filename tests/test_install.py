"""The install paths users take without ROS: a wheel (what `pip install .` builds), in a fresh venv.

The wheel is built from a copy of the tracked sources only (colcon's and setuptools' build/
folders never leak into it), installed with `--no-deps` into a new venv whose only other
packages are the core requirements the wheel declares, and then runs `gamma-net arm train`
and `gamma-net atari train` without `--params`, from a folder that is not the source tree.

A bare `pip install .` must resolve no torch and no nvidia package (an unpinned torch is a CUDA
build, about 2.5 GB): torch is the `neural` extra. The bare venv runs the linear learners and
names the extra when asked for the neural one; a venv with the extra runs the Atari study.

Lean by design: installing the requirements into a new venv takes minutes here, so one venv
holding just the core requirements, and one holding just the neural extra's, is built once per
requirement set under build/test-venvs/ (links to the distributions the dev venv holds where they
meet the requirements and constraints.txt, else installed by pip) and the fresh venvs see them
through .pth files; the package under test is always a new wheel in a new venv.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import zipfile

import pytest
from waiting import bound

from gamma_net_ros.entry import NODES

REPO = pathlib.Path(__file__).resolve().parent.parent
NODE_EXECUTABLES = list(NODES)  # setup.py installs one executable per entry with colcon, none with pip

pytestmark = pytest.mark.slow


def run(command, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(command, capture_output=True, text=True, timeout=bound(900), **kwargs)
    assert result.returncode == 0, f"{command}:\n{result.stdout}\n{result.stderr}"
    return result


def base_python() -> str:
    """The interpreter the dev venv was made from (a venv made from a venv is still plain)."""
    return os.path.join(sys.base_prefix, "bin", f"python{sys.version_info.major}.{sys.version_info.minor}")


def clean_env(venv: pathlib.Path) -> dict[str, str]:
    """A user's shell without ROS: the venv's bin on PATH, no overlay, no PYTHONPATH."""
    keep = {k: v for k, v in os.environ.items() if k in ("HOME", "LANG", "TMPDIR", "USER")}
    return {**keep, "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin", "MPLBACKEND": "Agg"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> pathlib.Path:
    """The project's wheel, built from a copy of the files git tracks (as in a fresh clone)."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "src"
    tracked = run(["git", "ls-files", "-z"], cwd=REPO).stdout.split("\0")
    for name in filter(None, tracked):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            (source / name).write_bytes((REPO / name).read_bytes())
    command = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation"]
    run([*command, "-w", str(root / "dist"), str(source)])
    (found,) = (root / "dist").glob("gamma_net_ros-*.whl")
    return found


def requirements(wheel: pathlib.Path, extra: str | None = None) -> list[str]:
    """The wheel's own requirements (what `pip install .` installs), or only those its ``extra`` adds."""
    with zipfile.ZipFile(wheel) as archive:
        metadata = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        text = archive.read(metadata).decode()
    lines = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]
    if extra is None:
        return sorted(line for line in lines if "extra ==" not in line)
    return sorted(line.split(";")[0].strip() for line in lines if re.search(rf"extra == .{extra}.", line))


def project_name(requirement: str) -> str:
    """The normalized project name a requirement names (PEP 503): ``torch>=2.6`` -> ``torch``."""
    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement).group()).lower()


def is_cuda_package(name: str) -> bool:
    """torch, or one of the CUDA runtime packages a CUDA torch pulls (nvidia-*, cuda-*, triton)."""
    name = project_name(name)
    return name == "torch" or name.startswith(("nvidia-", "cuda-")) or name == "triton"


def core_dependencies(wheel: pathlib.Path, extra: str | None = None) -> pathlib.Path:
    """site-packages of a venv holding only the wheel's requirements, or only its ``extra``'s (pinned by
    constraints.txt)."""
    wanted = requirements(wheel, extra)
    constraints = (REPO / "constraints.txt").read_text()
    key = hashlib.sha256(("\n".join(wanted) + constraints + sys.version).encode()).hexdigest()[:12]
    venv = REPO / "build" / "test-venvs" / f"{extra or 'core'}-{key}"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.parent / f"{extra or 'core'}-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two sessions at once build it once
        if not (venv / ".complete").is_file() and not _linked(wanted if extra else [*wanted, "pip"], venv):
            run([base_python(), "-m", "venv", "--clear", str(venv)])
            run(
                [
                    str(venv / "bin" / "python"),
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--no-compile",  # bytecode is written on first import; compiling all of torch costs more
                    *wanted,
                    "-c",
                    str(REPO / "constraints.txt"),
                ]
            )
        (venv / ".complete").touch()
    (site,) = (venv / "lib").glob("python3*/site-packages")
    return site


def _linked(wanted: list[str], venv: pathlib.Path) -> bool:
    """Fills ``venv``'s site-packages with links to the distributions ``wanted`` needs (their requirements
    followed) as this venv holds them, which `make setup` installed with pip and constraints.txt as well:
    installing them again (torch's wheel unpacked, every file written) cost 33 CPU s of each fresh clone's
    run. False, leaving nothing, where one is missing, or of a version the requirement or constraints.txt
    refuses: then pip installs them."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        if line.split("#", 1)[0].strip():
            pin = Requirement(line.split("#", 1)[0].strip())
            pins[canonicalize_name(pin.name)] = pin
    found: dict[str, metadata.Distribution] = {}
    todo, seen = [(Requirement(line), "") for line in wanted], set()
    while todo:
        requirement, extra = todo.pop()
        if (str(requirement), extra) in seen:
            continue
        seen.add((str(requirement), extra))
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            return False
        pin = pins.get(name)
        allowed = [requirement.specifier] + ([pin.specifier] if pin is not None else [])
        if dist.files is None or not all(spec.contains(dist.version, prereleases=True) for spec in allowed):
            return False
        found[name] = dist
        todo += [(Requirement(line), e) for line in dist.requires or [] for e in ("", *requirement.extras)]
    site = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    shutil.rmtree(venv, ignore_errors=True)
    site.mkdir(parents=True)
    for dist in found.values():
        # Each top-level file and folder the distribution installed, linked whole (so is its __pycache__).
        tops = {f.parts[0] for f in dist.files if f.parts and f.parts[0] != ".."}
        for top in tops - {"__pycache__"}:
            source = pathlib.Path(dist.locate_file(top))
            if source.exists() and not (site / top).exists():
                (site / top).symlink_to(source)
    return True


def install(wheel: pathlib.Path, venv: pathlib.Path, extras: tuple[str, ...] = ()) -> pathlib.Path:
    """A new venv with the wheel installed and the core requirements (and ``extras``') beside it."""
    run([base_python(), "-m", "venv", "--without-pip", str(venv)])
    (site,) = (venv / "lib").glob("python3*/site-packages")
    # The extras' first: torch needs a newer setuptools than the one a new venv starts with (the core's).
    sites = [core_dependencies(wheel, extra) for extra in extras] + [core_dependencies(wheel)]
    (site / "core_dependencies.pth").write_text("".join(f"{path}\n" for path in sites))
    python = str(venv / "bin" / "python")
    named = f"{wheel}[{','.join(extras)}]" if extras else str(wheel)
    run([python, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", named], env=clean_env(venv))
    run([python, "-m", "pip", "check"], env=clean_env(venv))  # every requirement of the wheel is met
    return venv


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> pathlib.Path:
    """`pip install .`: a new venv with the wheel and its core requirements, no torch."""
    return install(wheel, tmp_path_factory.mktemp("installed") / "venv")


@pytest.fixture(scope="module")
def installed_neural(wheel, tmp_path_factory) -> pathlib.Path:
    """`pip install .[neural]`: a new venv with the wheel, its core requirements and torch."""
    return install(wheel, tmp_path_factory.mktemp("installed_neural") / "venv", ("neural",))


def test_the_wheel_holds_the_sources_and_the_ros_package_data_nothing_else(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    packages = ("gamma_net_core", "gamma_net_ros", "gamma_net_studies")
    tracked = set(run(["git", "ls-files", *packages], cwd=REPO).stdout.split())
    modules = {n for n in names if n.startswith(tuple(f"{p}/" for p in packages))}
    assert modules == {n for n in tracked if n.endswith(".py")}  # nothing stale from a build/ folder
    data = {n.split(".data/data/", 1)[1] for n in names if ".data/data/" in n}
    shipped = {f"share/gamma_net_ros/config/{p.name}" for p in (REPO / "config").glob("*.yaml")}
    shipped |= {f"share/gamma_net_ros/config/{p.name}" for p in (REPO / "config").glob("*.json")}  # Foxglove layouts
    shipped |= {f"share/gamma_net_ros/launch/{p.name}" for p in (REPO / "launch").glob("*.launch.py")}
    shipped |= {f"share/gamma_net_ros/config/security/{p.name}" for p in (REPO / "config/security").glob("*.xml")}
    shipped |= {"share/gamma_net_ros/package.xml", "share/ament_index/resource_index/packages/gamma_net_ros"}
    assert data == shipped
    assert all(".dist-info/" in n for n in names - modules - {n for n in names if ".data/data/" in n})


def test_torch_floor_has_no_known_weights_only_bypass(wheel):
    for extra in ("neural", "atari", "minatar"):
        (torch,) = [r for r in requirements(wheel, extra) if project_name(r) == "torch"]
        floor = re.search(r">=\s*(\d+)\.(\d+)", torch)
        assert floor and (int(floor.group(1)), int(floor.group(2))) >= (2, 6), (extra, torch)


def test_a_bare_install_requires_no_torch_and_the_neural_extra_does(wheel):
    """Read off the wheel's metadata, no index needed: a bare `pip install .` asks for no torch (a CUDA build when
    unpinned) and no nvidia package; `.[neural]` asks for torch."""
    core = requirements(wheel)
    assert core and not [r for r in core if is_cuda_package(r)], core
    assert [project_name(r) for r in requirements(wheel, "neural")] == ["torch"]


def test_a_bare_install_resolves_no_cuda_package(wheel, tmp_path):
    """What pip would install for `pip install .` in a fresh venv, dependencies of dependencies included (a dry
    run against the configured package index; skipped, not hung, when no index answers)."""
    report = tmp_path / "report.json"
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
    command += ["--retries", "0", "--timeout", "10", "--report", str(report), str(wheel)]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=bound(240))
    except subprocess.TimeoutExpired:
        pytest.skip("the package index did not answer within the bound")
    if result.returncode != 0:
        reason = (result.stderr.strip().splitlines() or ["no output"])[-1]
        pytest.skip(f"no package index resolved the requirements here: {reason}")
    resolved = sorted(item["metadata"]["name"] for item in json.loads(report.read_text())["install"])
    assert "gamma_net_ros" in resolved and "numba" in resolved, resolved
    assert not [name for name in resolved if is_cuda_package(name)], resolved


def test_pip_install_puts_only_gamma_net_on_the_path(installed):
    executables = {p.name for p in (installed / "bin").iterdir()}
    assert "gamma-net" in executables
    assert not executables & set(NODE_EXECUTABLES), executables & set(NODE_EXECUTABLES)
    assert NODE_EXECUTABLES, "setup.py's NODES not found"
    probe = subprocess.run(
        [str(installed / "bin/python"), "-c", "import rclpy"], env=clean_env(installed), capture_output=True
    )
    assert probe.returncode != 0  # really no ROS in this venv


def test_a_bare_install_trains_the_arm_study_and_names_the_neural_extra(installed, tmp_path):
    env = clean_env(installed)
    python, gamma_net = str(installed / "bin" / "python"), str(installed / "bin" / "gamma-net")
    probe = subprocess.run([python, "-c", "import torch"], env=env, capture_output=True, timeout=bound(120))
    assert probe.returncode != 0  # really no torch in this venv
    # The arm study (the linear Γ-net): simulates its own bag, reads the installed config/arm.yaml.
    arm = subprocess.run(
        [gamma_net, "arm", "train", "--out", "arm", "--circuits", "1", "--seeds", "1", "--tail-steps", "100"]
        + ["--workers", "1", "--no-progress"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=bound(600),
    )  # fmt: skip
    assert arm.returncode == 0, arm.stdout + arm.stderr
    assert (tmp_path / "arm" / "gamma_net.npz").is_file()
    # The neural learner: one line naming the extra, from the command and from the library.
    neural = subprocess.run(
        [gamma_net, "bench", "neural"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=bound(120)
    )
    lines = (neural.stdout + neural.stderr).strip().splitlines()
    assert neural.returncode == 2 and len(lines) == 1 and "gamma_net_ros[neural]" in lines[0], lines
    library = subprocess.run(
        [python, "-c", "import gamma_net_core.neural.learner"], env=env, capture_output=True, text=True
    )
    last = library.stderr.strip().splitlines()[-1]
    assert library.returncode != 0 and last.startswith("ModuleNotFoundError: ") and "[neural]" in last, last


def test_installed_gamma_net_trains_the_atari_study_without_params(installed_neural, tmp_path):
    installed = installed_neural
    env = clean_env(installed)
    gamma_net = str(installed / "bin" / "gamma-net")
    # The Atari study on a tiny real recording (made here with the dev venv's ALE: an extra).
    tiny = ["--max-episode-steps", "80", "--no-progress"]
    run(["gamma-net", "atari", "record", "--steps", "240", "--out", str(tmp_path / "rec"), *tiny])
    taus = ["1", "1.5", "2", "3.5", "5", "7.5", "10", "15", "20", "30", "40", "50", "60", "70", "80", "90", "100"]
    points = ["atari", "points", "--episodes", "1", "--rollouts", "2", "--horizon", "40", "--workers", "0"]
    run(["gamma-net", *points, "--out", str(tmp_path / "pts"), "--taus", *taus, *tiny])
    sets = ["--set", "hidden_sizes=[16, 8]", "--set", "min_replay_history=60", "--set", "target_sync_period=5"]
    atari = subprocess.run(
        [gamma_net, "atari", "train", "--shards", "rec", "--points", "pts", "--out", "run", "--series", "reference"]
        + ["--seeds", "1", "--eval-every", "40", "--workers", "0", "--no-progress", *sets],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=bound(600),
    )  # fmt: skip
    assert atari.returncode == 0, atari.stdout + atari.stderr
    assert (tmp_path / "run" / "study.json").is_file()


def test_a_hostile_torch_file_is_refused_without_advice_to_load_it_unsafely(tmp_path):
    """A Q-network file that would run code when unpickled: one line, nothing written, no unsafe hint."""
    hostile = tmp_path / "policy.pt"
    make = (
        "import os, sys, torch\n"
        "class Payload:\n"
        "    def __reduce__(self):\n"
        "        return (os.getcwd, ())\n"
        "torch.save({'network': Payload()}, sys.argv[1])\n"
    )
    run([sys.executable, "-c", make, str(hostile)])
    command = [
        "gamma-net",
        "atari",
        "record",
        "--policy",
        str(hostile),
        "--steps",
        "10",
        "--out",
        str(tmp_path / "rec"),
    ]
    result = subprocess.run(command + ["--no-progress"], capture_output=True, text=True, timeout=bound(300))
    output = result.stdout + result.stderr
    assert result.returncode != 0 and "Traceback" not in output, output
    lines = output.strip().splitlines()
    assert len(lines) == 1 and str(hostile) in lines[0] and "is not a readable checkpoint" in lines[0], output
    assert "weights_only" not in output and "trusted" not in output, output
    assert not (tmp_path / "rec").exists()


def test_no_message_in_the_sources_advises_weights_only_false():
    hits = []
    for folder in ("gamma_net_core", "gamma_net_ros"):
        for path in (REPO / folder).rglob("*.py"):
            if re.search(r"weights_only\s*=\s*False", path.read_text()):
                hits.append(str(path.relative_to(REPO)))
    assert not hits
