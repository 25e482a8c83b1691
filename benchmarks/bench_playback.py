"""bag_player delivery to the predictor node at 1x, 6x, 20x: `gamma-net bench playback` as a script (needs ROS 2).

python benchmarks/bench_playback.py [--messages N] [--rates X ...] [--depth N] [--no-reference] [--json PATH]
"""

import sys

from gamma_net_core.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "playback", *sys.argv[1:]]))
