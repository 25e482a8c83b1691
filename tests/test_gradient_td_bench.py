"""`gamma-net bench off-policy` runs end to end on a tiny budget (timings are never asserted)."""

from __future__ import annotations

import argparse

from gamma_net_studies.bench import off_policy


def test_bench_reports_the_cost_of_a_gtd_step():
    parser = argparse.ArgumentParser()
    off_policy.add_arguments(parser)
    args = parser.parse_args(["--linear-steps", "50", "--horde-steps", "3", "--questions", "4", "--repeats", "1"])
    report = off_policy.run(args)
    linear, horde = report.data["linear"], report.data["horde"]
    assert linear["gtd_cost"] == linear["td0_steps_per_s"] / linear["gtd_steps_per_s"] > 0
    assert linear["gtd_cost_same_kernel"] == linear["off_policy_td_steps_per_s"] / linear["gtd_steps_per_s"] > 0
    assert horde["questions"] == 4 and horde["gamma_t"] == 32
    assert horde["tdc_cost_plain"] == horde["td0_plain_steps_per_s"] / horde["tdc_steps_per_s"] > 0
    assert "GTD cost" in report.render() and "expected <= 2.5" in report.summary and "load" in report.summary
