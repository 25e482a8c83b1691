"""The `gamma-net` command: one entry point, one subcommand per study, tool or benchmark.

A subcommand lives in its own module exposing ``add_arguments(parser)`` and
``run(args) -> Report``. Modules are imported only when their subcommand runs, so
`gamma-net --help` is instant and a missing optional dependency (ROS, ALE, Ray)
only affects the subcommands that need it.

Errors a user can make are refused in one line, ``gamma-net <command>: <message>``, never
with a traceback: ``run`` checks its arguments and output paths first, with the helpers
below, and raises :class:`UsageError` (exit 2) before any work; a bad option for argparse
and a missing optional package (``rclpy``, ``ale_py``) are exit 2 as well. A ``ValueError``
or ``OSError`` found while working on the input (a bad bag, a broken YAML, a foreign
checkpoint, a full disk) is one line too (exit 1); Ctrl-C is exit 130. Anything else is a
bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import pathlib
import sys
import time

from gamma_net_core.report import Report, write_json

#: (words, module, one-line help). Modules under gamma_net_ros need ROS 2 at run time.
COMMANDS: list[tuple[tuple[str, ...], str, str]] = [
    (("demo",), "gamma_net_studies.ros.demo.arm", "the main job: the arm pipeline on real ROS 2 nodes, no hardware"),
    (("warmup",), "gamma_net_core.warmup_command", "compile the numba kernels ahead, so nodes start ready"),
    (("timescales",), "gamma_net_studies.timescale_table", "gamma <-> tau table (the paper's Table 1)"),
    (("square-wave",), "gamma_net_studies.square_wave", "the paper's square-wave study (linear Γ-net)"),
    (("arm", "simulate"), "gamma_net_studies.arm_simulate", "simulated operator drives the arm: rosbag2"),
    (("arm", "train"), "gamma_net_studies.arm_train", "the robot-arm study (Table 2) on a JointState bag"),
    (("horde", "train"), "gamma_net_core.horde.train_command", "learn a questions file from a bag, score each"),
    (
        ("horde", "thresholds"),
        "gamma_net_core.horde.thresholds_command",
        "an alert's threshold from a bag: lead time, events caught, false alarms",
    ),
    (("reflex", "study"), "gamma_net_studies.reflex_study", "predictive vs reactive reflex at an obstacle"),
    (("reflex", "base-study"), "gamma_net_studies.base_study", "predictive vs range rule on a simulated mobile base"),
    (
        ("reflex", "base-realtime"),
        "gamma_net_studies.ros.base_realtime",
        "the base's rules through ros2 launch, minutes",
    ),
    (
        ("reflex", "realtime-study"),
        "gamma_net_studies.ros.reflex_realtime",
        "the reflex study through ros2 launch in real time, resumable",
    ),
    (("lambda-study",), "gamma_net_studies.lambda_study", "TD(lambda) and TD(Delta) learning curves"),
    (("off-policy", "arm"), "gamma_net_studies.off_policy_arm", "the paper's 'current if I move the shoulder up'"),
    (("zoo",), "gamma_net_core.zoo.command", "learners at their defaults on problems with exact values, by tau"),
    (("atari", "record"), "gamma_net_core.atari.record", "play a policy in ALE or MinAtar, record φ/cumulant shards"),
    (("atari", "points"), "gamma_net_core.atari.points_command", "evaluation points + Monte-Carlo returns per probe τ"),
    (("atari", "train-agent"), "gamma_net_core.atari.dqn", "train a DQN agent (Nature CNN; MinAtar's network) for φ"),
    (("atari", "import-dopamine"), "gamma_net_core.atari.import_dopamine", "a Dopamine TF checkpoint -> a policy file"),
    (("atari", "train"), "gamma_net_studies.atari_train", "train Γ-nets and probe networks on shards"),
    (("atari", "evaluate"), "gamma_net_studies.atari_evaluate", "the paper's Atari comparison figures"),
    (("bench", "all"), "gamma_net_studies.ros.bench.all", "every benchmark with its defaults (make bench)"),
    (
        ("bench", "linear"),
        "gamma_net_studies.bench.linear",
        "linear Γ-net steps per second against its NumPy reference",
    ),
    (
        ("bench", "neural"),
        "gamma_net_studies.bench.neural",
        "neural learner updates/s (tiled vs per-γ loop), replay µs",
    ),
    (("bench", "horde"), "gamma_net_studies.bench.horde", "100 questions x 32 timescales: Horde vs 100 learners"),
    (("bench", "off-policy"), "gamma_net_studies.bench.off_policy", "cost of a GTD step against a TD(0) step"),
    (("bench", "atari"), "gamma_net_studies.bench.atari", "speed of recording, rollouts per core, 1 -> 2 workers"),
    (
        ("bench", "ros"),
        "gamma_net_studies.ros.bench.ros",
        "predictor node latency p50/p99, highest input rate sustained",
    ),
    (
        ("bench", "bridge"),
        "gamma_net_studies.ros.bench.bridge",
        "ALE bridge -> neural predictor node: transitions/s, no loss",
    ),
    (
        ("bench", "reflex"),
        "gamma_net_studies.ros.bench.reflex",
        "reflex node: prediction -> command p99, added path, vs echo",
    ),
    (
        ("bench", "horde-node"),
        "gamma_net_studies.ros.bench.horde",
        "horde node latency: 100 questions at 100 Hz, p50/p99",
    ),
    (
        ("bench", "startup"),
        "gamma_net_studies.ros.bench.startup",
        "learning nodes: start to first prediction, cold and warm",
    ),
    (
        ("bench", "playback"),
        "gamma_net_studies.ros.bench.playback",
        "bag_player -> predictor node at 1x, 6x, 20x: nothing lost",
    ),
]


class UsageError(ValueError):
    """A bad argument, an unusable path or a missing optional package: refused in one line, exit 2.

    A ``ValueError``, so code that checks values and is also used outside the CLI raises the same.
    """


def check(condition: bool, message: str) -> None:
    """Raise :class:`UsageError` with ``message`` unless ``condition`` holds."""
    if not condition:
        raise UsageError(message)


def check_range(
    flag: str,
    value: float | None,
    *,
    low: float | None = None,
    high: float | None = None,
    above: float | None = None,
) -> None:
    """Refuse ``value`` outside ``[low, high]`` (or not ``> above``), NaN and infinity; None passes.

    Args:
      flag: the option as the user typed it, e.g. ``"--steps"``; named in the message.
      value: the parsed value (None: the option was not given and has no default).
      low: smallest allowed value, inclusive.
      high: largest allowed value, inclusive.
      above: exclusive lower bound (``above=0``: positive).
    """
    if value is None:
        return
    bounds = []
    if above is not None:
        bounds.append(f"> {above:g}")
    if low is not None:
        bounds.append(f">= {low:g}")
    if high is not None:
        bounds.append(f"<= {high:g}")
    ok = (
        math.isfinite(value)
        and (above is None or value > above)
        and (low is None or value >= low)
        and (high is None or value <= high)
    )
    check(ok, f"{flag} must be {' and '.join(bounds) or 'finite'}; got {value}")


def _nearest_existing(path: pathlib.Path) -> pathlib.Path:
    path = path.absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _check_creatable_below(flag: str, path: pathlib.Path, what: str) -> None:
    """``path`` does not exist yet: its nearest existing ancestor must be a folder we may write in."""
    base = _nearest_existing(path)
    check(base.is_dir(), f"{flag} {path}: cannot make the {what}, {base} is a file, not a folder")
    check(os.access(base, os.W_OK | os.X_OK), f"{flag} {path}: cannot write in {base} (permission denied)")


def output_file(flag: str, path: str | os.PathLike | None) -> pathlib.Path | None:
    """Check that ``path`` can be written as a file (its folders are made later), without writing anything.

    Returns:
      ``path`` as a Path, or None where ``path`` is None (the option was not given).
    """
    if path is None:
        return None
    check(os.fspath(path) != "", f"{flag} must name a file; got ''")
    path = pathlib.Path(path)
    if path.exists():
        check(not path.is_dir(), f"{flag} {path} is a folder; it must name a file")
        check(os.access(path, os.W_OK), f"{flag} {path}: not writable (permission denied)")
        check(os.access(path.parent, os.W_OK | os.X_OK), f"{flag} {path}: cannot write in {path.parent}")
    else:
        _check_creatable_below(flag, path, "file")
    return path


def output_dir(flag: str, path: str | os.PathLike | None) -> pathlib.Path | None:
    """Check that ``path`` is a folder we may write in, or one that can be made, without making it.

    Returns:
      ``path`` as a Path, or None where ``path`` is None.
    """
    if path is None:
        return None
    check(os.fspath(path) != "", f"{flag} must name a folder; got ''")
    path = pathlib.Path(path)
    if path.exists():
        check(path.is_dir(), f"{flag} {path} is a file; it must name a folder")
        check(os.access(path, os.W_OK | os.X_OK), f"{flag} {path}: not writable (permission denied)")
    else:
        _check_creatable_below(flag, path, "folder")
    return path


def input_path(flag: str, path: str | os.PathLike | None, *, kind: str = "any") -> pathlib.Path | None:
    """Check that ``path`` exists (``kind``: ``"file"``, ``"dir"`` or ``"any"``) and can be read.

    Returns:
      ``path`` as a Path, or None where ``path`` is None.
    """
    if path is None:
        return None
    check(os.fspath(path) != "", f"{flag} must name a {'folder' if kind == 'dir' else 'file'}; got ''")
    path = pathlib.Path(path)
    check(path.exists(), f"{flag} {path}: no such file or folder")
    check(kind != "file" or path.is_file(), f"{flag} {path} is a folder; it must name a file")
    check(kind != "dir" or path.is_dir(), f"{flag} {path} is a file; it must name a folder")
    check(os.access(path, os.R_OK), f"{flag} {path}: not readable (permission denied)")
    return path


def _missing_module(exc: ModuleNotFoundError) -> str:
    name = (exc.name or str(exc)).split(".")[0]
    hints = {
        "rclpy": "this command needs ROS 2: run it through `make`, or `source tools/env.sh` first",
        "gamma_net_ros": "this command needs ROS 2 and the colcon-built package: `source tools/env.sh` first",
        "gamma_net_msgs": "build the messages first: `make`, or `source tools/env.sh` after a colcon build",
        "ale_py": "this command needs the Arcade Learning Environment: pip install ale-py (requirements.txt)",
        "minatar": "a MinAtar game needs MinAtar: pip install minatar (requirements.txt)",
        "torch": "the neural learner and the Atari studies need torch: pip install 'gamma_net_ros[neural]' (for a "
        "CPU-only torch, first: pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu)",
    }
    return f"needs the Python package {name!r}, which is not installed: " + hints.get(
        name, "install the project's requirements (make setup)"
    )


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad option is one line like every other refusal (the usage is one --help away)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def command_parser(module, command: str, help_: str) -> argparse.ArgumentParser:
    """The parser of one command: its own options, and the flags every command takes.

    ``--json PATH`` writes the printed tables as JSON; ``--no-progress`` turns progress bars off, and
    is taken by a command that draws none too, so that one script's flags fit every command.
    """
    parser = _Parser(prog=command, description=help_)
    module.add_arguments(parser)
    parser.add_argument("--json", metavar="PATH", help="also write the numbers printed as JSON to PATH")
    if "--no-progress" not in parser._option_string_actions:
        parser.add_argument("--no-progress", action="store_true", help="no progress bars (this command draws none)")
    return parser


def _group_notes() -> dict[str, str]:
    """What a group's commands share, shown by `gamma-net GROUP --help` (no heavy import)."""
    from gamma_net_core.atari import MINATAR_GAMES

    return {
        "atari": "--game takes an ALE game id (centipede, the paper's, or any other ALE ROM) or a MinAtar game:\n  "
        + ", ".join(MINATAR_GAMES)
        + '\n(MinAtar: its settings and reference network; config/minatar.yaml; docs/atari.md, "MinAtar").'
    }


def _usage(group: str | None = None) -> str:
    commands = [c for c in COMMANDS if group is None or c[0][0] == group]
    width = max(len(" ".join(words)) for words, _, _ in commands)
    name = f"gamma-net {group}" if group else "gamma-net"
    lines = [
        f"usage: {name} <command> [options]   (gamma-net <command> --help for its options)",
        "",
        "Γ-nets: value estimation generalized over timescale. Commands:",
    ]
    lines += [f"  {' '.join(words):<{width}}  {help_}" for words, _, help_ in commands]
    note = _group_notes().get(group or "")
    if note:
        lines += ["", note]
    lines += ["", "Every command that computes or measures prints tables; --json PATH writes them as JSON."]
    return "\n".join(lines)


def _match(argv: list[str]) -> tuple[tuple[str, ...], str, str] | None:
    best = None
    for entry in COMMANDS:
        words = entry[0]
        if tuple(argv[: len(words)]) == words and (best is None or len(words) > len(best[0])):
            best = entry
    return best


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    entry = _match(argv)
    groups = {words[0] for words, _, _ in COMMANDS if len(words) > 1}
    if entry is None and argv and argv[0] in groups and argv[1:2] in ([], ["-h"], ["--help"]):
        print(_usage(argv[0]))  # `gamma-net atari --help`: the group's commands
        return 0
    if entry is None:
        if argv and argv[0] not in ("-h", "--help"):
            print(f"gamma-net: unknown command {' '.join(argv[:2])!r}\n", file=sys.stderr)
            print(_usage(), file=sys.stderr)
            return 2
        print(_usage())
        return 0
    words, module_name, help_ = entry
    command = "gamma-net " + " ".join(words)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        print(f"{command}: {_missing_module(exc)}", file=sys.stderr)
        return 2
    parser = command_parser(module, command, help_)
    args = parser.parse_args(argv[len(words) :])
    started = time.perf_counter()
    try:
        output_file("--json", args.json)  # before the work, not after it
        report = module.run(args)
    except UsageError as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        if (exc.name or "").startswith("gamma_net"):
            raise  # one of ours: a bug, not a missing package
        print(f"{command}: {_missing_module(exc)}", file=sys.stderr)
        return 2
    except (ValueError, OSError) as exc:  # the input, or the disk, not the arguments: found while working
        print(f"{command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr)
        return 130
    if not isinstance(report, Report):
        raise TypeError(f"{module_name}.run returned {type(report).__name__}, expected Report")
    report.data.setdefault("wall_seconds", round(time.perf_counter() - started, 3))
    text = report.render()
    if text:
        print(text)
    if args.json:
        arguments = {k: v for k, v in vars(args).items() if k != "json"}
        write_json(args.json, report.to_json(" ".join(words), arguments))
        print(f"\njson: {args.json}")
    if report.summary:
        print(f"\n{report.summary}")
    return int(report.data.get("exit_code", 0))


if __name__ == "__main__":
    # Through the imported module, not this __main__ copy: the commands raise its UsageError (exit 2).
    from gamma_net_core import cli

    sys.exit(cli.main())
