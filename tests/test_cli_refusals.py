"""Every `gamma-net` command refuses bad input the way a user sees it: one line, no traceback, nothing touched.

Each case starts the real entry point (`gamma-net` on the PATH after `source tools/env.sh`) in a
folder holding a few files a user might have there (a checkpoint, a plain file where a folder is
expected, a broken YAML), and checks the exit code, that stderr is exactly one line naming the
bad value, that no "Traceback" is printed, and that no file in the folder was created, changed
or removed. A missing optional package (ROS 2's `rclpy`, the ALE's `ale_py`) is made missing for
one process by a `sitecustomize` that refuses to import it, as on a machine without it.
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shlex
import shutil
import subprocess
import sys

import pytest
from waiting import bound

PRECIOUS = b"a checkpoint the user cares about\n"

#: (id, argv with {placeholders}, exit code, text the one line must contain, module made missing)
CASES = [
    ("timescales-gamma-1", "timescales --gamma 1.0", 2, "--gamma must be in [0, 1); got 1.0", None),
    ("timescales-tau-below-1", "timescales --tau 0.5", 2, "--tau must be >= 1; got 0.5", None),
    ("timescales-rate-0", "timescales --rate-hz 0", 2, "--rate-hz must be > 0; got 0.0", None),
    ("timescales-tau-not-a-number", "timescales --tau abc", 2, "argument --tau: invalid float value: 'abc'", None),
    ("timescales-gamma-and-tau", "timescales --tau 2 --gamma 0.5", 2, "--gamma: not allowed with argument --tau", None),
    ("json-below-a-file", "timescales --json {file}/t.json", 2, "{file} is a file, not a folder", None),
    ("json-is-a-folder", "timescales --json {dir}", 2, "--json {dir} is a folder", None),
    ("square-wave-steps-100", "square-wave --steps 100 --out {new}", 2, "--steps must be >= 300", None),
    (
        "square-wave-last-over-steps",
        "square-wave --steps 1000 --last 2000 --out {new}",
        2,
        "--last must be in [1, --steps 1000]; got 2000",
        None,
    ),
    (
        "square-wave-step-size-nan",
        "square-wave --step-size nan --out {new}",
        2,
        "--step-size must be > 0; got nan",
        None,
    ),
    ("square-wave-out-empty", "square-wave --out ''", 2, "--out must name a folder; got ''", None),
    ("square-wave-out-is-a-file", "square-wave --out {file}", 2, "--out {file} is a file", None),
    ("square-wave-json-unwritable", "square-wave --out {new} --json {file}/x.json", 2, "is a file, not a folder", None),
    ("arm-simulate-circuits-0", "arm simulate --circuits 0 --out {new}", 2, "--circuits must be >= 1; got 0", None),
    ("arm-simulate-rate-0", "arm simulate --rate-hz 0 --out {new}", 2, "--rate-hz must be > 0; got 0.0", None),
    ("arm-simulate-no-config", "arm simulate --config {missing} --out {new}", 2, "no such file or folder", None),
    (
        "arm-simulate-broken-yaml",
        "arm simulate --config {broken} --out {new}",
        1,
        "broken.yaml: not valid YAML at line 3",
        None,
    ),
    (
        "arm-train-broken-yaml",
        "arm train --params {broken} --out {new}",
        1,
        "(while parsing a flow sequence from line 2)",
        None,
    ),
    ("arm-simulate-seed-negative", "arm simulate --seed -1 --out {new}", 2, "--seed must be >= 0; got -1", None),
    (
        "arm-train-misspelled-predictor-key",
        "arm train --params {typo} --bag {missing} --out {new}",
        1,
        "unknown parameter 'max_gapp' in {typo}, section predictor; did you mean 'max_gap'?",
        None,
    ),
    ("arm-train-workers-0", "arm train --workers 0 --out {new}", 2, "--workers must be >= 1; got 0", None),
    ("arm-train-window-0", "arm train --window-s 0 --out {new}", 2, "--window-s must be > 0; got 0.0", None),
    ("arm-train-out-below-a-file", "arm train --out {file}/run", 2, "cannot make the folder", None),
    ("atari-record-steps-0", "atari record --steps 0 --out {new}", 2, "--steps must be >= 1; got 0", None),
    ("atari-record-out-is-a-file", "atari record --steps 5 --out {file}", 2, "--out {file} is a file", None),
    ("atari-record-sticky-1.5", "atari record --steps 5 --sticky 1.5 --out {new}", 2, "--sticky must be", None),
    ("atari-record-unknown-game", "atari record --game centipedx --steps 5 --out {new}", 2, "'centipedx'", None),
    ("atari-record-no-policy", "atari record --policy {missing} --steps 5 --out {new}", 2, "--policy {missing}", None),
    (
        "atari-record-empty-policy",
        "atari record --game minatar-breakout --policy {empty} --steps 5 --out {new}",
        1,
        "{empty} is empty (0 bytes): not a checkpoint",
        None,
    ),
    ("atari-record-without-ale", "atari record --steps 5 --out {new}", 2, "'ale_py', which is not installed", "ale_py"),
    (
        "atari-points-tau-below-1",
        "atari points --episodes 1 --rollouts 1 --taus 0.5 --out {new}",
        2,
        "--taus must be >= 1; got 0.5",
        None,
    ),
    (
        "atari-points-horizon-word",
        "atari points --episodes 1 --rollouts 1 --horizon soon --out {new}",
        2,
        "--horizon must be 'auto', 'episode' or an int >= 1; got 'soon'",
        None,
    ),
    (
        "atari-points-ray-without-ray",
        "atari points --episodes 1 --rollouts 1 --ray-address auto --out {new}",
        2,
        "'ray', which is not installed",
        "ray",
    ),
    ("atari-points-episodes-0", "atari points --episodes 0 --rollouts 1 --out {new}", 2, "--episodes must be", None),
    (
        "atari-train-agent-frames-0",
        "atari train-agent --game centipede --frames 0 --out {new}",
        2,
        "--frames must be >= 4",
        None,
    ),
    (
        "atari-train-agent-learning-rate",
        "atari train-agent --game centipede --frames 400 --learning-rate 2 --out {new}",
        2,
        "--learning-rate must be in [1e-08, 1.0]; got 2.0",
        None,
    ),
    ("atari-train-no-shards", "atari train --shards {missing} --points {dir} --out {new}", 2, "--shards", None),
    (
        "atari-train-unknown-series",
        "atari train --shards {dir} --points {dir} --series direkt --out {new}",
        2,
        "unknown series ['direkt']",
        None,
    ),
    ("atari-train-bad-set", "atari train --shards {dir} --points {dir} --set oops --out {new}", 2, "'oops'", None),
    (
        "atari-train-broken-params",
        "atari train --shards {dir} --points {dir} --params {broken} --out {new}",
        1,
        "broken.yaml: not valid YAML",
        None,
    ),
    ("atari-evaluate-episode-negative", "atari evaluate --run {dir} --points {dir} --episode -1", 2, "--episode", None),
    ("atari-evaluate-no-run", "atari evaluate --run {missing} --points {dir}", 2, "--run {missing}", None),
    ("bench-linear-core", "bench linear --core 100000", 2, "--core 100000 is not one of", None),
    (
        "bench-horde-questions-beyond-memory",
        "bench horde --questions 100000000",
        2,
        "--questions 100000000 needs about 6,330.0 GiB",
        None,
    ),
    ("bench-neural-device", "bench neural --tiny --device toaster", 2, "'toaster' is not a torch device", None),
    ("bench-atari-seconds-0", "bench atari --seconds 0", 2, "--seconds must be > 0; got 0.0", None),
    ("bench-ros-rate-0", "bench ros --rates 0", 2, "--rates must be > 0; got 0.0", None),
    ("bench-ros-without-rclpy", "bench ros --seconds 1", 2, "'rclpy', which is not installed", "rclpy"),
    ("bench-all-without-rclpy", "bench all", 2, "'rclpy', which is not installed", "rclpy"),
    ("bench-bridge-no-recording", "bench bridge --recording {missing}", 2, "--recording {missing}", None),
    ("bench-bridge-nice", "bench bridge --worker-nice 30", 2, "--worker-nice must be >= 0 and <= 19; got 30", None),
    ("demo-seconds-negative", "demo --seconds -1 --out {dir}", 2, "--seconds must be >= 20; got -1.0", None),
    ("demo-pretrain-negative", "demo --pretrain-circuits -1 --out {dir}", 2, "--pretrain-circuits must be >= 0", None),
    ("demo-reflex-seconds-negative", "demo --reflex-seconds -1 --out {dir}", 2, "--reflex-seconds must be >= 0", None),
    (
        "base-realtime-warmup-0",
        "reflex base-realtime --conditions reactive,resumed --warmup-minutes 0 --out {new}",
        2,
        "--warmup-minutes must be > 0; got 0.0",
        None,
    ),
    (
        "base-realtime-unknown-condition",
        "reflex base-realtime --conditions pretrained --out {new}",
        2,
        "--conditions must be of ('reactive', 'shipped', 'resumed'); got pretrained",
        None,
    ),
    ("demo-foreign-checkpoint", "demo --out {dir}", 2, "{dir}/predictor.npz exists and was not written by", None),
    ("demo-without-rclpy", "demo --seconds -1 --out {dir}", 2, "'rclpy', which is not installed", "rclpy"),
]


def _gamma_net() -> str:
    found = shutil.which("gamma-net") or str(pathlib.Path(sys.executable).with_name("gamma-net"))
    assert os.access(found, os.X_OK), "gamma-net is not installed: `source tools/env.sh` first"
    return found


def _snapshot(root: pathlib.Path) -> dict[str, tuple]:
    """Every path below ``root`` with its kind, size, mtime and content digest."""
    state = {}
    for path in sorted(root.rglob("*")):
        stat = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        state[str(path.relative_to(root))] = (path.is_dir(), stat.st_size, stat.st_mtime_ns, digest)
    return state


@pytest.fixture
def workspace(tmp_path) -> dict[str, pathlib.Path]:
    """A folder as a user has it: a checkpoint, a plain file, a broken YAML; and a way to hide a package."""
    root = tmp_path / "work"
    folder = root / "existing"
    folder.mkdir(parents=True)
    (folder / "predictor.npz").write_bytes(PRECIOUS)
    (root / "notes.txt").write_text("not a folder\n")
    (root / "empty.pt").write_bytes(b"")  # a checkpoint a failed copy left empty
    (root / "broken.yaml").write_text("predictor:\n  ros__parameters: [oops\n")
    (root / "typo.yaml").write_text("predictor:\n  ros__parameters:\n    max_gapp: 2.0\n")
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import os, sys\n"
        "_BLOCKED = set(os.environ.get('GAMMA_NET_TEST_MISSING', '').split(','))\n"
        "class _Missing:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in _BLOCKED:\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, _Missing())\n"
    )
    return {
        "root": root,
        "dir": folder,
        "file": root / "notes.txt",
        "empty": root / "empty.pt",
        "broken": root / "broken.yaml",
        "typo": root / "typo.yaml",
        "missing": root / "no-such-thing",
        "new": root / "new-out",
        "blocker": blocker,
    }


@pytest.mark.slow
@pytest.mark.parametrize("argv, code, needle, missing", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_refused_in_one_line_and_changes_nothing(workspace, argv, code, needle, missing):
    names = {k: str(v) for k, v in workspace.items()}
    argv = [part.format(**names) for part in shlex.split(argv)]
    env = dict(os.environ)
    if missing:
        env["GAMMA_NET_TEST_MISSING"] = missing
        env["PYTHONPATH"] = os.pathsep.join([names["blocker"], env.get("PYTHONPATH", "")])
    before = _snapshot(workspace["root"])
    result = subprocess.run(
        [_gamma_net(), *argv], capture_output=True, text=True, timeout=bound(120), cwd=workspace["root"], env=env
    )
    shown = f"exit {result.returncode}\nstdout:\n{result.stdout[-2000:]}\nstderr:\n{result.stderr[-3000:]}"
    assert result.returncode == code, shown
    assert "Traceback" not in result.stdout + result.stderr, shown
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gamma-net "), shown
    assert needle.format(**names) in lines[0], shown
    assert _snapshot(workspace["root"]) == before, "a refused command changed files"
    assert (workspace["dir"] / "predictor.npz").read_bytes() == PRECIOUS


def test_demo_replaces_only_what_an_earlier_demo_wrote(tmp_path):
    from gamma_net_studies.ros.demo import arm as demo

    out = tmp_path / "demo"
    outputs = demo._outputs(out, pretrain=True)
    demo._check_outputs(out, outputs)  # nothing there yet
    (out / "logs").mkdir(parents=True)
    (out / demo.BAG_NAME).mkdir()
    for path in outputs:
        if not path.is_dir():
            path.write_bytes(b"written by the demo")
    (out / demo.BAG_NAME / "joint_states_0.mcap").write_bytes(b"a bag")
    demo._write_manifest(out, outputs)
    demo._check_outputs(out, outputs)  # its own, unchanged: a later run may replace them
    (out / demo.BAG_NAME / "notes.txt").write_text("the user's")  # a file the demo did not write
    with pytest.raises(demo.UsageError, match=r"notes\.txt exists and was not written by"):
        demo._check_outputs(out, outputs)
    (out / demo.BAG_NAME / "notes.txt").unlink()
    (out / demo.CHECKPOINT_NAME).write_bytes(b"trained further by the user's own predictor")
    with pytest.raises(demo.UsageError, match=r"predictor\.npz exists and was not written by"):
        demo._check_outputs(out, outputs)
    demo._check_outputs(out, demo._outputs(out, pretrain=False))  # without pretraining it never touches it


@pytest.mark.parametrize("way", ["gamma-net", "python -m gamma_net_core.cli"])
def test_a_usage_error_exits_2_however_the_command_is_started(tmp_path, way):
    # Run as a module, cli.py was once a second copy of itself whose UsageError the commands did not raise: code 1.
    command = ["gamma-net"] if way == "gamma-net" else [sys.executable, "-m", "gamma_net_core.cli"]
    done = subprocess.run(
        [*command, "atari", "evaluate", "--run", str(tmp_path / "gone"), "--points", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=bound(60),
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"gamma-net atari evaluate: --run {tmp_path / 'gone'}: no such file or folder\n"
