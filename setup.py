"""gamma_net_ros: Γ-nets (value estimation generalized over timescale) for ROS 2.

One distribution, two Python packages:
- gamma_net_core: learners, data and studies; imports nothing from ROS, so
  `pip install .` serves researchers without ROS.
- gamma_net_ros: rclpy nodes, thin adapters from messages to gamma_net_core calls.
"""

import runpy
import sys
from glob import glob
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.develop import develop
from setuptools.command.install_scripts import install_scripts

PACKAGE = "gamma_net_ros"

# Each node's executable starts in gamma_net_ros/entry.py, which installs the stop handlers before the
# node's module imports rclpy, numba or torch; read by path, so building needs nothing installed.
NODES = runpy.run_path(str(Path(__file__).resolve().parent / "gamma_net_ros" / "entry.py"))["NODES"]

#: The neural learner's torch; earlier versions have known weights_only bypasses (torch.load of untrusted files).
TORCH = "torch>=2.6"

# The nodes' executables belong to ROS: colcon (ament_python) runs `setup.py develop` or
# `setup.py ... install` and puts them in lib/gamma_net_ros/ (setup.cfg) for `ros2 run`.
# pip and wheels build through PEP 517 and never run those commands: they install `gamma-net`
# alone, so generic names like `operator` or `teleop` never land on a user's PATH.
ROS_INSTALL = bool({"develop", "install"} & set(sys.argv[1:]))

#: A node's executable: the stop handlers come before any import that takes time. setuptools' own
#: console-script wrapper imports importlib.metadata first (0.1 to 1 s on a busy machine), a window
#: in which Ctrl-C gave a KeyboardInterrupt traceback; so each one is written over with this.
NODE_SCRIPT = """#!{python}
import sys

from gamma_net_ros.entry import run

sys.exit(run({name!r}))
"""


def _light_scripts(folder: str) -> None:
    for name in NODES:
        script = Path(folder) / name
        if script.is_file():
            python = script.read_text().splitlines()[0][2:].strip() or sys.executable
            script.write_text(NODE_SCRIPT.format(python=python, name=name))


class Develop(develop):
    def run(self):
        super().run()
        _light_scripts(self.script_dir)


class InstallScripts(install_scripts):
    def run(self):
        super().run()
        _light_scripts(self.install_dir)


setup(
    name=PACKAGE,
    version="0.1.0",
    description="Γ-nets for ROS 2: one learner predicts a signal's discounted return at any timescale",
    long_description=(Path(__file__).resolve().parent / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(
        include=[
            "gamma_net_core",
            "gamma_net_core.*",
            "gamma_net_ros",
            "gamma_net_ros.*",
            "gamma_net_studies",
            "gamma_net_studies.*",
        ]
    ),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml") + glob("config/*.json")),
        (f"share/{PACKAGE}/config/security", glob("config/security/*.xml")),  # the SROS2 policy
    ],
    # gamma_net_core's own needs: the linear learners, the Horde, the studies' tools. torch is an
    # extra, not a requirement: pip resolves a bare `torch` to a CUDA build and its nvidia packages
    # (about 2.5 GB), which the linear learners never use. For the neural learner on a CPU, install
    # torch from its CPU index first (README, "Install"), then `.[neural]` keeps it.
    install_requires=[
        "numpy>=1.24",
        "numba>=0.59",
        "matplotlib>=3.7",
        "tqdm>=4.60",
        "pyyaml>=6",
        "rosbags>=0.10",
    ],
    extras_require={
        "neural": [TORCH],
        "atari": ["ale-py>=0.9", TORCH],
        "minatar": ["minatar>=1.0.15", TORCH],
        "ray": ["ray>=2.9"],
        "hardware": ["dynamixel-sdk>=3.7", "pyserial>=3.5"],
    },
    zip_safe=True,
    cmdclass={"develop": Develop, "install_scripts": InstallScripts},
    entry_points={
        "console_scripts": ["gamma-net = gamma_net_core.cli:main"]
        + ([f"{name} = gamma_net_ros.entry:{name}" for name in NODES] if ROS_INSTALL else []),
    },
)
