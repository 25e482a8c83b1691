"""Predictor node latency and sustained input rate: `gamma-net bench ros` as a script (needs ROS 2).

python benchmarks/bench_ros.py [--seconds S] [--burst S] [--rates HZ ...] [--json PATH]
"""

import sys

from gamma_net_core.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "ros", *sys.argv[1:]]))
