"""Benchmarks: speed measured as a ratio against a reference timed in the same run (`gamma-net bench ...`)."""
