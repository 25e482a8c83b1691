"""`gamma-net warmup`: compile every numba kernel ahead of first use, so nodes start ready (`make setup` runs it).

On an empty cache a learning node would otherwise compile for half a minute on its first
start; see :mod:`gamma_net_core.warmup`. A second run loads everything from the cache and
takes about a second.
"""

from __future__ import annotations

import argparse

from gamma_net_core.report import Report, Table
from gamma_net_core.warmup import cache_dir, warm_all


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser  # no options: the shipped YAML files give the settings the nodes start with


def run(args: argparse.Namespace) -> Report:
    table = Table("numba kernels compiled or loaded", ["part", "seconds"], formats={"seconds": "{:.2f}"})
    total = warm_all(report=table.add)
    table.add("all", total)
    return Report(tables=[table], data={"cache_dir": str(cache_dir()), "seconds": total})
