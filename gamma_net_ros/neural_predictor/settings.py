"""The neural predictor's parameters, declared and validated together at construction."""

from __future__ import annotations

from dataclasses import dataclass

from rclpy.node import Node

from gamma_net_core.neural.learner import NeuralConfig
from gamma_net_ros.params import declare, declare_config
from gamma_net_ros.prediction_serving import PublishedTimescales


@dataclass(frozen=True)
class NeuralNodeSettings:
    """What the node reads once; ``max_update_lag`` alone also changes at run time."""

    config: NeuralConfig
    cumulant: str
    published: PublishedTimescales
    rate: float
    depth: int
    lag: int
    every: int
    worker_nice: int
    progress_period: float


def declare_settings(node: Node) -> NeuralNodeSettings:
    """Declare the node's parameters (and set torch's thread count from ``torch_threads``)."""
    config = declare_config(node, NeuralConfig, "learner")
    threads = declare(
        node, "torch_threads", 1, "torch CPU threads (1: best on a shared CPU)", low=1, high=256, read_only=True
    )
    import torch

    torch.set_num_threads(threads)
    cumulant = declare(node, "cumulant_name", "reward", "name of the predicted signal", read_only=True)
    published = PublishedTimescales(node, config.tau_max)
    rate = declare(
        node, "publish_rate", 10.0, "predictions per second at most (0: none)", low=0.0, high=1000.0, read_only=True
    )
    depth = declare(
        node,
        "queue_depth",
        2000,
        "reliable KEEP_LAST depth; >= the bridge's window",
        low=1,
        high=10**6,
        read_only=True,
    )
    lag = declare(node, "max_update_lag", 0, "owed updates before intake waits (0: no bound)", low=0, high=2**62)
    every = declare(
        node,
        "report_every",
        32,
        "messages between taken reports (< bridge window)",
        low=1,
        high=10**6,
        read_only=True,
    )
    worker_nice = declare(
        node, "worker_nice", 10, "nice increment of the training thread (0: none)", low=0, high=19, read_only=True
    )
    progress_period = declare(
        node, "progress_period", 10.0, "s between progress lines", low=0.1, high=1e6, read_only=True
    )
    return NeuralNodeSettings(config, cumulant, published, rate, depth, lag, every, worker_nice, progress_period)
