"""Give each test session its own ROS 2 domain, so parallel runs never hear each other.

DDS discovery is shared by every process on a machine. A session claims a free
ROS_DOMAIN_ID by holding an exclusive lock file for it, and keeps discovery on
localhost. Subprocesses inherit both through the environment.
"""

from __future__ import annotations

import fcntl
import os
import random
import tempfile

# Domain IDs 1..100 stay clear of the ports of other IDs on Linux (0 is everyone's default).
_DOMAINS = range(1, 101)
_held_lock = None


def claim_domain() -> int:
    global _held_lock
    if "GAMMA_NET_TEST_DOMAIN" in os.environ:
        domain = int(os.environ["GAMMA_NET_TEST_DOMAIN"])
    else:
        candidates = list(_DOMAINS)
        random.Random(os.getpid()).shuffle(candidates)
        for domain in candidates:
            path = os.path.join(tempfile.gettempdir(), f"gamma_net_ros_domain_{domain}.lock")
            handle = open(path, "w")
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                handle.close()
                continue
            _held_lock = handle  # held until this process exits
            break
        else:
            raise RuntimeError("no free ROS_DOMAIN_ID in 1..100 (too many test sessions at once?)")
    os.environ["ROS_DOMAIN_ID"] = str(domain)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    os.environ.pop("ROS_LOCALHOST_ONLY", None)
    return domain
