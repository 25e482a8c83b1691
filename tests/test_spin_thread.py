"""SpinThread: a node spun in a background thread, stopped and joined before the node is destroyed."""

from __future__ import annotations

import pytest
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from std_msgs.msg import Int32
from waiting import bound, wait_until

from gamma_net_ros.spin_thread import SpinThread


@pytest.fixture
def pair(rclpy_session):
    talker, listener = Node("spin_thread_talker"), Node("spin_thread_listener")
    yield talker, listener
    talker.destroy_node()


def test_callbacks_run_until_stop_and_none_after_it(pair):
    talker, listener = pair
    heard = []
    listener.create_subscription(Int32, "spin_thread_test", lambda msg: heard.append(msg.data), 10)
    publish = talker.create_publisher(Int32, "spin_thread_test", 10).publish
    executor = SingleThreadedExecutor()
    executor.add_node(listener)
    spinner = SpinThread(executor)
    assert wait_until(lambda: talker.count_subscribers("spin_thread_test") == 1, timeout=10)

    def heard_one() -> bool:
        publish(Int32(data=1))
        return bool(heard)

    assert wait_until(heard_one, timeout=10), "nothing heard while spinning"

    assert spinner.stop(timeout=bound(10))
    assert not spinner.thread.is_alive()  # joined: nothing holds the node's handle now
    listener.destroy_node()  # on this thread, as the benches do after stop()
    before = len(heard)
    for n in range(5):
        publish(Int32(data=100 + n))
    wait_until(lambda: len(heard) > before, timeout=0.5)  # a short look: anything heard now is a failure
    assert len(heard) == before


def test_a_context_shut_down_under_the_spin_ends_it_quietly(rclpy_session, monkeypatch):
    import threading

    import rclpy

    errors = []
    monkeypatch.setattr(threading, "excepthook", errors.append)  # an exception ending the thread lands here
    context = rclpy.Context()
    rclpy.init(context=context)
    node = rclpy.create_node("spin_thread_own_context", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spinner = SpinThread(executor, period_s=1.0)  # mostly inside spin_once's wait when the context goes
    context.try_shutdown()  # as rclpy's Ctrl-C handler does
    spinner.thread.join(bound(10))
    assert not spinner.thread.is_alive()
    assert spinner.stop(timeout=bound(10))
    node.destroy_node()
    assert errors == []
