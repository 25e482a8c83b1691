"""The `gamma-net` entry point: tables on stdout, the same numbers as JSON, clear errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gamma_net_core.cli import COMMANDS, main
from gamma_net_core.report import round_significant


def test_timescales_table_and_json_agree(tmp_path, capsys):
    path = tmp_path / "out" / "t.json"
    assert main(["timescales", "--tau", "1", "10", "100", "--json", str(path)]) == 0
    printed = capsys.readouterr().out
    data = json.loads(path.read_text())
    assert data["command"] == "timescales"
    rows = data["tables"][0]["rows"]
    assert [r[0] for r in rows] == pytest.approx([0.0, 0.9, 0.99])
    assert [r[1] for r in rows] == pytest.approx([1.0, 10.0, 100.0])
    for gamma, tau in rows:
        assert f"{gamma:.6g}" in printed and f"{tau:.6g}" in printed


def test_default_table_is_the_papers_table_1(capsys):
    assert main(["timescales"]) == 0
    out = capsys.readouterr().out
    for gamma in ("0.5", "0.8", "0.9", "0.95", "0.975", "0.9875", "0.99"):
        assert gamma in out


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["timescales", "--gamma", "1.0"], "got 1.0"),
        (["timescales", "--gamma", "nan"], "got nan"),
        (["timescales", "--tau", "0.5"], "got 0.5"),
    ],
)
def test_bad_timescale_is_a_clear_error(argv, needle, capsys):
    assert main(argv) == 2
    assert needle in capsys.readouterr().err


@pytest.mark.slow
def test_square_wave_with_only_a_small_steps_averages_its_last_tenth(tmp_path):
    out = tmp_path / "sw"
    argv = ["square-wave", "--steps", "400", "--runs", "1", "--workers", "1", "--no-progress", "--out", str(out)]
    assert main(argv) == 0
    budget = json.loads((out / "square_wave.json").read_text())["budget"]
    assert budget["steps"] == 400 and budget["last"] == 40


def test_unknown_command_lists_the_commands(capsys):
    assert main(["no-such-command"]) == 2
    err = capsys.readouterr().err
    assert "unknown command" in err and "timescales" in err


def test_console_script_is_installed():
    result = subprocess.run(
        [sys.executable, "-m", "gamma_net_core.cli", "timescales", "--gamma", "0.9"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert "10" in result.stdout


@pytest.mark.parametrize("words, module_name, help_", COMMANDS)
def test_every_command_builds_its_parser(words, module_name, help_):
    import argparse
    import importlib

    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog="gamma-net " + " ".join(words))
    module.add_arguments(parser)
    assert callable(module.run) and help_


@pytest.mark.parametrize(
    "words, module_name, help_", COMMANDS, ids=lambda v: " ".join(v) if isinstance(v, tuple) else ""
)
def test_every_command_takes_the_common_flags(words, module_name, help_):
    """One script's `--json PATH --no-progress` fits every command (horde train once refused --no-progress)."""
    import importlib

    from gamma_net_core.cli import command_parser

    parser = command_parser(importlib.import_module(module_name), "gamma-net " + " ".join(words), help_)
    options = parser._option_string_actions
    assert "--json" in options and "--no-progress" in options
    assert options["--no-progress"].default is False and options["--no-progress"].nargs == 0


def test_round_significant_keeps_digits_everywhere_and_drops_non_finite():
    import numpy as np

    value = {
        "a": 123456.789,
        "b": [0.000123456, np.float64(2.0 / 3.0)],
        "c": np.array([[1.23456e-9, np.inf]]),
        "d": "x",
    }
    assert round_significant(value, 3) == {"a": 123000.0, "b": [0.000123, 0.667], "c": [[1.23e-9, None]], "d": "x"}
    assert round_significant((float("nan"), 7)) == [None, 7]
