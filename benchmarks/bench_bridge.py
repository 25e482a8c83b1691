"""ALE bridge -> neural predictor node (and a bare subscriber): `gamma-net bench bridge` as a script."""

import sys

from gamma_net_core.cli import main

if __name__ == "__main__":
    sys.exit(main(["bench", "bridge", *sys.argv[1:]]))
