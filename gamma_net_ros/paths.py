"""Where the package's YAML parameter files are: see gamma_net_core.paths (one rule for both)."""

from gamma_net_core.paths import PACKAGE, config_file

__all__ = ["PACKAGE", "config_file"]
