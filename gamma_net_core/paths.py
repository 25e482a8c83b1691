"""Where the package's YAML parameter files are, however it was installed.

The files are installed as data of the ROS package `gamma_net_ros`:
`<prefix>/share/gamma_net_ros/config/` under a colcon install prefix (found the way
`ament_index` finds a package: a prefix on AMENT_PREFIX_PATH whose resource index lists it),
or under the Python prefix a `pip install .` or a wheel put them in. A source checkout's
`config/` is the last resort. Pure Python: no ROS import, so `gamma-net` works without ROS.
"""

from __future__ import annotations

import os
import pathlib
import site
import sys

PACKAGE = "gamma_net_ros"
_SOURCE_ROOT = pathlib.Path(__file__).resolve().parent.parent


def _ament_prefixes() -> list[pathlib.Path]:
    """Prefixes on AMENT_PREFIX_PATH that register the package (ament_index's rule)."""
    found = []
    for prefix in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep):
        if prefix and (pathlib.Path(prefix) / "share/ament_index/resource_index/packages" / PACKAGE).is_file():
            found.append(pathlib.Path(prefix))
    return found


def config_candidates(filename: str) -> list[pathlib.Path]:
    """Where ``config/<filename>`` may be, in the order they are tried."""
    prefixes = _ament_prefixes() + [pathlib.Path(sys.prefix)]
    user_base = getattr(site, "USER_BASE", None)
    if user_base:
        prefixes.append(pathlib.Path(user_base))  # pip install --user
    candidates = [prefix / "share" / PACKAGE / "config" / filename for prefix in prefixes]
    candidates.append(_SOURCE_ROOT / "config" / filename)
    return list(dict.fromkeys(candidates))


def config_file(name: str) -> pathlib.Path:
    """Path of the shipped parameter file ``config/<name>``.

    Args:
        name: the file's name, with or without ``.yaml`` (``"arm"``, ``"atari.yaml"``).

    Returns:
        The first existing file of `config_candidates`.

    Raises:
        FileNotFoundError: none exists; the message names every place looked in.
    """
    filename = name if name.endswith(".yaml") else f"{name}.yaml"
    candidates = config_candidates(filename)
    for path in candidates:
        if path.is_file():
            return path
    raise FileNotFoundError(
        f"no parameter file {filename!r} (pass --params); looked in: " + ", ".join(str(p) for p in candidates)
    )
