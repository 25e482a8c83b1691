"""The paper's studies and ours, the benchmarks and their runners: configurations -> runs -> JSON -> figures.

They import the library (:mod:`gamma_net_core`, and in :mod:`gamma_net_studies.ros` the nodes of
:mod:`gamma_net_ros`); the library never imports them (tests/test_layering.py). The `gamma-net`
command names each by module path and imports it only when its subcommand runs.
"""
