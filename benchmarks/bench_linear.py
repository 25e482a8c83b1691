"""Linear Γ-net steps per second against its NumPy reference: `gamma-net bench linear` as a script.

python benchmarks/bench_linear.py [--fast-steps N] [--reference-steps N] [--repeats N] [--json PATH]
"""

import sys

from gamma_net_core.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "linear", *sys.argv[1:]]))
