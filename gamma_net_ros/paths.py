"""Where the package's YAML parameter files are: installed share/, else the source tree."""

from __future__ import annotations

import pathlib

PACKAGE = "gamma_net_ros"
_SOURCE_ROOT = pathlib.Path(__file__).resolve().parent.parent


def config_file(name: str) -> pathlib.Path:
    """Path of ``config/<name>`` (``name`` with or without ``.yaml``).

    The colcon-installed share folder wins (that is what `ros2 launch` uses on a
    robot); a source checkout's config/ is the fallback for pip-installed use.
    """
    filename = name if name.endswith(".yaml") else f"{name}.yaml"
    candidates = []
    try:
        from ament_index_python.packages import PackageNotFoundError, get_package_share_directory

        try:
            candidates.append(pathlib.Path(get_package_share_directory(PACKAGE)) / "config" / filename)
        except PackageNotFoundError:
            pass
    except ImportError:
        pass
    candidates.append(_SOURCE_ROOT / "config" / filename)
    for path in candidates:
        if path.is_file():
            return path
    raise FileNotFoundError(f"no parameter file {filename!r}; looked in: " + ", ".join(str(p) for p in candidates))
