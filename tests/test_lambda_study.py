"""`gamma-net lambda-study` end to end on a tiny budget: curves for every learner, figures, refusals in one line."""

from __future__ import annotations

import json
import subprocess

import pytest
from waiting import bound

#: Compiles the TD(lambda) kernels when the cache is cold; the busy 2-core machine is slow (scaled by `bound`).
TIMEOUT = 250.0


@pytest.mark.slow
@pytest.mark.timeout(bound(TIMEOUT + 30))
def test_lambda_study_writes_curves_for_every_learner_and_the_figures(tmp_path):
    out = tmp_path / "study"
    result = subprocess.run(
        ["gamma-net", "lambda-study", "--out", str(out), "--square-steps", "1000", "--circuits", "1",
         "--evaluations", "2", "--lams", "0.5", "--json", str(tmp_path / "report.json")],
        capture_output=True, text=True, timeout=bound(TIMEOUT),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    for name in ("lambda_square_wave.png", "lambda_arm.png", "lambda_horde_event.png", "lambda_study.json"):
        assert (out / name).stat().st_size > 0, name
    data = json.loads((out / "lambda_study.json").read_text())
    linear = ["Γ-net TD(0)", "Γ-net TD(0), fixed ladder", "Γ-net TD(λ=0.5)", "Γ-net TD(λ=0.5), backward view",
              "fixed-timescale TD(0)", "TD(Δ)", "TD(Δ), per-component λ, α"]  # fmt: skip
    for domain in ("square_wave", "arm"):
        assert [k for k in data[domain]] == linear
        for run in data[domain].values():
            assert run["failed"] is None and len(run["errors"]) == 2 and len(run["errors"][0]) == 9
            assert all(e >= 0 for e in run["errors"][-1])
    horde = data["horde"]
    assert "elbow_speed_until_past_2rad" in horde["questions"]
    assert [k for k in horde if k != "questions"] == [
        "Horde TD(0)", "Horde TD(0), fixed ladder", "Horde TD(λ=0.5)"
    ]  # fmt: skip
    assert len(horde["Horde TD(λ=0.5)"]["errors"][-1]) == 4  # questions, each [9 taus]
    assert "Horde, event question" in result.stdout and "TD(Δ)" in result.stdout


def test_lambda_study_refuses_a_bad_lambda_in_one_line(tmp_path):
    result = subprocess.run(
        ["gamma-net", "lambda-study", "--out", str(tmp_path / "s"), "--lams", "0.5", "1.0"],
        capture_output=True, text=True, timeout=bound(120),
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["gamma-net lambda-study: --lams must each be in (0, 0.999]; got 1.0"]
    assert not (tmp_path / "s").exists()
