"""Atari recording, rollouts per core and 1 -> 2 worker scaling: `gamma-net bench atari` as a script."""

import sys

from gamma_net_core.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "atari", *sys.argv[1:]]))
