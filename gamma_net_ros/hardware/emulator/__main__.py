import sys

from gamma_net_ros.hardware.emulator.cli import main

sys.exit(main())
