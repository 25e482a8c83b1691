"""The horde node's own parameters (set with -p or a launch file; the questions file is not one)."""

from __future__ import annotations

from dataclasses import dataclass

from rclpy.node import Node

from gamma_net_ros.params import declare


@dataclass
class Settings:
    questions_file: str
    share: str
    tick_topic: str
    learn: bool
    reliable_input: bool
    silent_warning_s: float
    error_diagnostics_period: float
    gc_freeze: bool


def declare_settings(node: Node) -> Settings:
    """Declare the node's parameters and read them (``learn`` may change later: the node listens)."""
    return Settings(
        questions_file=declare(
            node, "questions_file", "", "the questions YAML ('' = config/horde.yaml)", read_only=True
        ),
        share=declare(
            node,
            "share",
            "",
            "the questions learned here: '' all, 'i/n' the i-th of n shares by name, or 'a,b'",
            read_only=True,
        ),
        tick_topic=declare(
            node,
            "tick_topic",
            "",
            "a questions' topic whose every message is a tick ('' = the clock at the questions' rate_hz)",
            read_only=True,
        ),
        learn=declare(node, "learn", True, "learn from the stream (false: predict only)"),
        reliable_input=declare(node, "reliable_input", False, "reliable QoS on the inputs (e.g. bags)", read_only=True),
        silent_warning_s=declare(
            node, "silent_warning_s", 5.0, "s before a topic that never published is reported", low=0.0, high=3600.0
        ),
        # Building a status per question costs ~35 us each (100 questions: 3.5 ms, a late tick at
        # 100 Hz), so the per-question error statuses go out every error_diagnostics_period seconds.
        error_diagnostics_period=declare(
            node,
            "error_diagnostics_period",
            5.0,
            "s between the per-question error statuses on /diagnostics (horde/errors: every second)",
            low=1.0,
            high=3600.0,
            read_only=True,
        ),
        gc_freeze=declare(
            node,
            "gc_freeze",
            True,
            "after start-up, exempt its objects from garbage collection (each full collection would walk "
            "them all: a pause of milliseconds that delays a burst of ticks; docs/benchmarks.md)",
            read_only=True,
        ),
    )
