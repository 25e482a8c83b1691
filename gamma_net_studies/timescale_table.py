"""`gamma-net timescales`: gamma <-> tau for given timescales (the paper's Table 1 by default)."""

from __future__ import annotations

import argparse

from gamma_net_core.cli import check, check_range
from gamma_net_core.report import Report, Table
from gamma_net_core.timescales import PROBE_TAUS, gamma_from_tau, tau_from_gamma

#: The paper's Table 1 ("Expected Timesteps"), given as tau: its probe timescales.
PAPER_TAUS = PROBE_TAUS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--gamma", type=float, nargs="+", help="discounts in [0, 1)")
    group.add_argument("--tau", type=float, nargs="+", help="horizons in steps, >= 1")
    parser.add_argument("--rate-hz", type=float, default=None, help="also show tau in seconds at this step rate")


def run(args: argparse.Namespace) -> Report:
    for gamma in args.gamma or ():
        check(0.0 <= gamma < 1.0, f"--gamma must be in [0, 1); got {gamma}")
    for tau in args.tau or ():
        check_range("--tau", tau, low=1.0)
    check_range("--rate-hz", args.rate_hz, above=0.0)
    if args.gamma is not None:
        pairs = [(g, tau_from_gamma(g)) for g in args.gamma]
    else:
        pairs = [(gamma_from_tau(t), float(t)) for t in (args.tau or PAPER_TAUS)]
    columns = ["gamma", "tau (steps)"] + (["tau (s)"] if args.rate_hz else [])
    table = Table("timescales", columns, formats={"gamma": "{:.6g}", "tau (steps)": "{:.6g}"})
    for gamma, tau in pairs:
        row = [gamma, tau] + ([tau / args.rate_hz] if args.rate_hz else [])
        table.add(*row)
    return Report(tables=[table])
