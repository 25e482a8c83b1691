"""The ALE bridge's settings and where its rows come from: a recording's shards, or ALE played live.

A row is one step: φ(S_t), C_{t+1} (the reward), terminal, truncated, episode, step. Both
sources' parameters are declared on the bridge whichever is chosen, as one YAML section holds both.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from rclpy.node import Node

from gamma_net_core.atari.env import AtariConfig
from gamma_net_core.atari.policies import EVAL_EPSILON
from gamma_net_core.data.shards import ShardReader
from gamma_net_ros.params import declare, declare_config

#: (features float32 [F], cumulant, terminal, truncated, episode, step): one row of a recording.
Row = tuple[np.ndarray, float, bool, bool, int, int]


def recorded_rows(reader: ShardReader) -> Iterator[Row]:
    """A recording's rows in order, each shard validated (SHA-256, layout, order) before its first row."""
    for batch in reader.batches():
        for i in range(len(batch)):
            yield (
                batch.features[i],
                float(batch.cumulants[i]),
                bool(batch.terminals[i]),
                bool(batch.truncated[i]),
                int(batch.episodes[i]),
                int(batch.steps[i]),
            )


def live_rows(env, policy, rng: np.random.Generator, *, steps: int) -> Iterator[Row]:
    """Play ``policy`` in ``env`` (an AtariEnv) and yield each step as it happens; ``steps`` 0: forever."""
    episode, taken, observation = 0, 0, None
    while steps == 0 or taken < steps:
        if env.episode_over:
            observation = env.reset()
        action, phi = policy.act_with_features(observation, rng)
        step = env.step(action)
        yield phi, float(step.reward), bool(step.terminal), bool(step.truncated), episode, env.episode_step - 1
        observation = step.observation
        episode += int(step.terminal or step.truncated)
        taken += 1


def open_source(node: Node, source: str, feature_size: int | None) -> tuple[Iterator[Row], int | None, str]:
    """Declare both sources' parameters on ``node`` and open ``source``: (rows, row count or None, a log phrase).

    Raises:
      ValueError: an empty ``shard_dir``, or a live policy of another φ size than ``feature_size``.
      FileNotFoundError, ShardError: a recording that is missing or corrupt.
    """
    directory = declare(node, "shard_dir", "", "recording directory (gamma-net atari record)", read_only=True)
    verify = declare(node, "verify", True, "check every shard before the first message", read_only=True)
    live = _declare_live(node)
    if source == "live":
        return _open_live(feature_size, **live)
    if not directory:
        raise ValueError("shard_dir is empty: give the recording's directory (-p shard_dir:=DIR)")
    reader = ShardReader(directory, feature_size=feature_size)  # FileNotFoundError / ShardError
    if verify:
        started = time.perf_counter()
        for _ in reader.batches():  # hashes, layouts, NaNs and row order of every shard
            pass
        node.get_logger().info(
            f"{directory}: {len(reader.shards)} shards, {reader.count} transitions, "
            f"checked in {time.perf_counter() - started:.2f} s"
        )
    return recorded_rows(reader), reader.count, f"replaying {reader.count} transitions from {directory}"


def _declare_live(node: Node) -> dict:
    return dict(
        config=declare_config(node, AtariConfig, "env"),
        spec=declare(node, "policy", "random", "random, a Q-network file, or py:module:factory", read_only=True),
        seed=declare(
            node, "seed", 0, "seeds sticky actions and the policy's draws", low=0, high=2**31 - 1, read_only=True
        ),
        epsilon=declare(
            node,
            "epsilon",
            EVAL_EPSILON,
            "ε of a Q-network policy (paper: 1e-4)",
            low=0.0,
            high=1.0,
            read_only=True,
        ),
        feature_seed=declare(
            node, "feature_seed", 0, "seed of the random policy's φ network", low=0, high=2**31 - 1, read_only=True
        ),
        steps=declare(node, "steps", 0, "steps to play (0: until stopped)", low=0, high=2**62, read_only=True),
    )


def _open_live(
    feature_size: int | None, *, config, spec, seed, epsilon, feature_seed, steps
) -> tuple[Iterator[Row], int | None, str]:
    import torch

    from gamma_net_core.atari.record import make_player

    torch.set_num_threads(1)  # batch-1 forward passes: one thread is fastest, and the cores are shared
    env, policy, rng = make_player(config, spec, seed=seed, epsilon=epsilon, feature_seed=feature_seed)
    if feature_size is not None and policy.feature_size != feature_size:
        raise ValueError(f"policy {spec!r} gives φ of size {policy.feature_size}; feature_size is {feature_size}")
    rows = live_rows(env, policy, rng, steps=steps)
    return rows, steps or None, f"playing {env.game} live with policy {spec!r}"


@dataclass(frozen=True)
class BridgeSettings:
    """The bridge's source and pace parameters (read-only), declared and validated together."""

    source: str
    feature_size: int | None  # None: any
    rate: float
    consumers: int
    depth: int
    window: int
    exit_at_end: bool
    progress_period: float
    timeout: float


def declare_settings(node: Node) -> BridgeSettings:
    """Declare the bridge's parameters on ``node``.

    Raises:
      ValueError: an unknown ``source``, or a ``window`` deeper than ``queue_depth``.
    """
    source = declare(node, "source", "shards", "shards (replay a recording) or live (play ALE)", read_only=True)
    if source not in ("shards", "live"):
        raise ValueError(f"source must be 'shards' or 'live'; got {source!r}")
    feature_size = declare(
        node, "feature_size", 512, "φ size the consumers' network takes (0: any)", low=0, high=10**6, read_only=True
    )
    rate = declare(node, "rate", 0.0, "messages per second at most (0: no limit)", low=0.0, high=1e7, read_only=True)
    consumers = declare(
        node,
        "consumers",
        1,
        "acknowledging consumers to wait for (0: no flow control)",
        low=0,
        high=1000,
        read_only=True,
    )
    depth = declare(
        node, "queue_depth", 2000, "reliable KEEP_LAST depth of the publisher", low=1, high=10**6, read_only=True
    )
    window = declare(
        node,
        "window",
        1000,
        "messages in flight per consumer at most; <= queue_depth and <= the consumers' depth",
        low=1,
        high=10**6,
        read_only=True,
    )
    if window > depth:
        raise ValueError(f"window {window} must not exceed queue_depth {depth}: resent samples would be gone")
    exit_at_end = declare(node, "exit_at_end", False, "exit (code 0) once every message is taken", read_only=True)
    progress_period = declare(
        node, "progress_period", 5.0, "s between progress lines", low=0.1, high=1e6, read_only=True
    )
    timeout = declare(
        node, "consumer_timeout", 10.0, "s without a report: consumer gone", low=0.5, high=1e6, read_only=True
    )

    return BridgeSettings(
        source, feature_size or None, rate, consumers, depth, window, exit_at_end, progress_period, timeout
    )
