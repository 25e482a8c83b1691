"""`gamma-net reflex base-study` at a tiny scale, through the command a user types."""

from __future__ import annotations

import json
import subprocess

from gamma_net_studies.base_study import CONDITIONS, PREDICTIVE, QUANTITIES


def test_the_base_study_runs_writes_its_numbers_and_a_range_rule_saves_bumps(tmp_path):
    out, report = tmp_path / "study", tmp_path / "study.json"
    # Seed 0 at 0.4 m/s: the operator meets a wall within two minutes, and the range rule stops in time.
    command = ["gamma-net", "reflex", "base-study", "--seeds", "1", "--minutes", "2", "--warmup-minutes", "1"]
    command += ["--dash-speed", "0.4", "--out", str(out), "--json", str(report), "--no-progress"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "predictive/reactive" in done.stdout
    data = json.loads(report.read_text())["data"]
    (setting,) = data["settings"]
    assert setting["setting"] == {"dash_speed": 0.4, "deceleration": 1.0, "latency_s": 0.1}
    assert set(setting["conditions"]) == set(CONDITIONS)
    for runs in setting["conditions"].values():
        assert set(runs) == set(QUANTITIES) and all(len(v) == 1 for v in runs.values())
    assert set(setting["ratios"]) == set(PREDICTIVE)
    assert (out / "base_study.png").is_file() and (out / "warm_horde_0.npz").is_file()
    conditions = setting["conditions"]
    assert conditions["none"]["bumps_per_min"][0] > conditions["reactive"]["bumps_per_min"][0]
    assert conditions["reactive"]["rule_on_fraction"][0] > 0.0 == conditions["none"]["rule_on_fraction"][0]


def test_a_bad_sweep_value_is_refused_in_one_line(tmp_path):
    command = ["gamma-net", "reflex", "base-study", "--deceleration", "0", "--out", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "gamma-net reflex base-study: --deceleration must be > 0 and <= 3; got 0.0"
    ]
