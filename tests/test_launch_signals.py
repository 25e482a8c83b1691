"""`ros2 launch` of our files hears SIGINT through the wakeup fd alone: no KeyboardInterrupt inside its tasks.

Launch leaves Python's SIGINT handler in place; a SIGINT while one of its tasks runs (starting a process)
raised KeyboardInterrupt in that task, which died with the process it had just started no longer launch's
(tools/stop_trials.py's docker trials: 1 of 20 stops in the starting phase left the Horde running until
the final SIGKILL). ``take_stop_signals``, first in each launch file, makes the handler a no-op.
"""

from __future__ import annotations

import os
import signal
import socket

from gamma_net_ros.launch_checks import take_stop_signals


def test_after_take_stop_signals_a_sigint_reaches_the_wakeup_fd_and_raises_nothing():
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    previous_fd = signal.set_wakeup_fd(writer.fileno())
    previous_handler = signal.getsignal(signal.SIGINT)
    try:
        take_stop_signals()
        os.kill(os.getpid(), signal.SIGINT)  # to itself: its Python handler runs before the next line
        reader.settimeout(5.0)
        heard = reader.recv(16)
        assert signal.SIGINT in heard  # launch's AsyncSafeSignalManager reads this byte and shuts down
        assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    finally:
        signal.set_wakeup_fd(previous_fd)
        signal.signal(signal.SIGINT, previous_handler)
        reader.close()
        writer.close()
