"""Point the ROS 2 PyPI wheels' CMake exports at this interpreter's include folders.

The `ros-*` wheels export CMake targets whose include folders name the machine that
built them (/opt/python/cp311-cp311/...). CMake refuses a target whose include folder
is missing, so building `msg/` fails until those two paths name this venv's Python
headers and NumPy headers. Idempotent: a second run finds nothing to change.
"""

import pathlib
import sys
import sysconfig

import numpy

BUILD_PYTHON = "/opt/python/cp{0}{1}-cp{0}{1}".format(*sys.version_info[:2])
PYVER = "python{}.{}".format(*sys.version_info[:2])
REWRITES = {
    f"{BUILD_PYTHON}/include/{PYVER}": sysconfig.get_paths()["include"],
    f"{BUILD_PYTHON}/lib/{PYVER}/site-packages/numpy/_core/include": numpy.get_include(),
}


def main() -> int:
    share = pathlib.Path(sys.prefix) / "share"
    changed = 0
    for path in share.rglob("*.cmake"):
        text = path.read_text()
        new = text
        for old, real in REWRITES.items():
            new = new.replace(old, real)
        if new != text:
            path.write_text(new)
            changed += 1
    print(f"fix_ros_cmake: rewrote include folders in {changed} CMake files under {share}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
