"""gamma_net_ros: Γ-nets (value estimation generalized over timescale) for ROS 2.

One distribution, two Python packages:
- gamma_net_core: learners, data and studies; imports nothing from ROS, so
  `pip install .` serves researchers without ROS.
- gamma_net_ros: rclpy nodes, thin adapters from messages to gamma_net_core calls.
"""

import sys
from glob import glob
from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "gamma_net_ros"

NODES = {
    "bag_player": "gamma_net_ros.bag_player:main",
    "dynamixel_driver": "gamma_net_ros.dynamixel_driver:main",
    "prediction_monitor": "gamma_net_ros.prediction_monitor:main",
    "servo_emulator": "gamma_net_ros.hardware.emulator:main",
    "teleop": "gamma_net_ros.teleop:main",
    "operator": "gamma_net_ros.operator:main",
    "predictor": "gamma_net_ros.predictor:main",
    "ale_bridge": "gamma_net_ros.ale_bridge:main",
    "neural_predictor": "gamma_net_ros.neural_predictor:main",
    "transition_counter": "gamma_net_ros.transition_counter:main",
    "horde": "gamma_net_ros.horde:main",
    "reflex": "gamma_net_ros.reflex:main",
}

# The nodes' executables belong to ROS: colcon (ament_python) runs `setup.py develop` or
# `setup.py ... install` and puts them in lib/gamma_net_ros/ (setup.cfg) for `ros2 run`.
# pip and wheels build through PEP 517 and never run those commands: they install `gamma-net`
# alone, so generic names like `operator` or `teleop` never land on a user's PATH.
ROS_INSTALL = bool({"develop", "install"} & set(sys.argv[1:]))

setup(
    name=PACKAGE,
    version="0.1.0",
    description="Γ-nets for ROS 2: one learner predicts a signal's discounted return at any timescale",
    long_description=(Path(__file__).resolve().parent / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10",
    packages=find_packages(include=["gamma_net_core", "gamma_net_core.*", "gamma_net_ros", "gamma_net_ros.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml")),
    ],
    # gamma_net_core's own needs. torch: install the build you want first
    # (e.g. `pip install torch==2.13.0` for CPU); an unpinned torch pulls a CUDA build.
    install_requires=[
        "numpy>=1.24",
        "numba>=0.59",
        "torch>=2.6",  # earlier versions have known weights_only bypasses (torch.load of untrusted files)
        "matplotlib>=3.7",
        "tqdm>=4.60",
        "pyyaml>=6",
        "rosbags>=0.10",
    ],
    extras_require={
        "atari": ["ale-py>=0.9"],
        "ray": ["ray>=2.9"],
        "hardware": ["dynamixel-sdk>=3.7", "pyserial>=3.5"],
    },
    zip_safe=True,
    entry_points={
        "console_scripts": ["gamma-net = gamma_net_core.cli:main"]
        + ([f"{name} = {target}" for name, target in NODES.items()] if ROS_INSTALL else []),
    },
)
