"""Benchmarks that start real nodes (`gamma-net bench ros|bridge|horde-node|playback|all`).

Each times a reference in the same run and reports ratios; none is a node itself. The
learners' own benchmarks, which need no ROS, are in :mod:`gamma_net_studies.bench`.
"""
