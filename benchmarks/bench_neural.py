"""Neural learner updates per second and replay sampling: `gamma-net bench neural` as a script.

python benchmarks/bench_neural.py [--device cuda] [--updates N] [--repeats N] [--threads N] [--json PATH]
"""

import sys

from gamma_net_core.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "neural", *sys.argv[1:]]))
