"""`gamma-net atari record`: play a policy in ALE or MinAtar and record (φ, cumulant, terminal, ...) shards.

The paper's data: transitions generated sequentially by a policy in evaluation mode
(ε = 0.0001), the environment reset at the end of each episode or after 27,000 steps,
saved in order, reloaded in the same order for every experiment.

Resuming: with every shard commit the recorder saves its whole state in the index (the
environment's :class:`~gamma_net_core.atari.env.EnvState`, the policy's generator state,
the episode counter). Running the same command again with a larger ``--steps``, or after
an interrupt, restores that state and continues, so the result equals a recording made
in one go. Ctrl-C stops at the next step boundary and commits; a hard kill loses the rows
after the last commit (at most one shard), which are then recorded again identically.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from gamma_net_core.atari.arguments import GAME_HELP, add_play_arguments
from gamma_net_core.config import to_mapping
from gamma_net_core.report import Report, Table

#: Rows per shard file by default: about 20 MB of φ, a commit every few seconds of recording.
DEFAULT_SHARD_SIZE = 10_000


def _policy_identity(description: dict[str, Any]) -> dict[str, Any]:
    """The parts of a policy description that must match to continue a recording (not its path)."""
    return {k: v for k, v in description.items() if k != "path"}


@contextlib.contextmanager
def _stop_on_sigint(flag: dict[str, bool]):
    """Turn Ctrl-C into a request to stop at the next step boundary (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        flag["stop"] = True

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def make_player(config, policy: str, *, seed: int, epsilon: float, feature_seed: int):
    """The environment, the policy and the policy's generator, all from one seed: what plays a game.

    Recording and the ROS bridge's live play both start here, so the same seed plays the same game.

    Returns:
      (AtariEnv or MinAtarEnv, Policy, numpy Generator for the policy's draws).
    """
    from gamma_net_core.atari.domains import make_env
    from gamma_net_core.atari.policies import load_policy

    env_seed, policy_seed = (int(s) for s in np.random.SeedSequence(seed).generate_state(2))
    env = make_env(config, seed=env_seed)  # ValueError on an unknown game, naming close matches
    agent = load_policy(
        policy,
        num_actions=env.num_actions,
        game=env.game,
        epsilon=epsilon,
        feature_seed=feature_seed,
        frame_stack=getattr(config, "frame_stack", 4),
        screen_size=getattr(config, "screen_size", 84),
    )
    return env, agent, np.random.default_rng(policy_seed)


@dataclasses.dataclass
class Recorder:
    """A game being recorded: the player, the shard writer, and the episode counter (all resumed together)."""

    env: Any
    agent: Any
    rng: np.random.Generator
    description: dict[str, Any]
    writer: Any  # ShardWriter
    episode: int = 0

    def resume_state(self) -> dict[str, Any]:
        """What a later command restores to continue as if the recording had not stopped."""
        return {
            "env": self.env.get_state().to_json(),
            "policy_rng": self.rng.bit_generator.state,
            "episode": self.episode,
            "policy_path": self.description.get("path"),
        }


def open_recorder(
    out, *, config, policy: str, seed: int, epsilon: float, feature_seed: int, shard_size: int
) -> Recorder:
    """Make the player and the writer of ``out``, restoring the state of a recording it already holds.

    Raises:
      ValueError: ``out`` holds a recording made with other settings, or rows without a resume state.
    """
    from gamma_net_core.atari.env import EnvState
    from gamma_net_core.data.shards import ShardWriter

    env, agent, rng = make_player(config, policy, seed=seed, epsilon=epsilon, feature_seed=feature_seed)
    description = agent.describe()
    meta = {
        "game": env.game,
        "env": {**to_mapping(config), "game": env.game},
        "policy": _policy_identity(description),
        "seed": int(seed),
    }
    writer = ShardWriter(out, feature_size=agent.feature_size, shard_size=shard_size, meta=meta)
    recorder = Recorder(env, agent, rng, description, writer)
    if writer.resume is not None:
        env.set_state(EnvState.from_json(writer.resume["env"]))
        rng.bit_generator.state = writer.resume["policy_rng"]
        recorder.episode = int(writer.resume["episode"])
    elif writer.count:
        raise ValueError(f"{out}: the recording has rows but no resume state; it cannot be continued")
    return recorder


def play(recorder: Recorder, *, steps: int, progress: bool, on_step: Callable[[int], None] | None) -> bool:
    """Play and write rows until ``steps`` are recorded or Ctrl-C; commit. True if stopped by Ctrl-C."""
    from tqdm import tqdm

    from gamma_net_core.atari.networks import torch_threads
    from gamma_net_core.data.shards import clip_reward

    env, agent, rng, writer = recorder.env, recorder.agent, recorder.rng, recorder.writer
    stop = {"stop": False}
    bar = tqdm(total=steps, initial=min(writer.count, steps), unit="step", file=sys.stderr, disable=not progress)
    observation = env.observation()
    # One torch thread: a batch of one observation gains nothing from more, and loses on a busy machine.
    with _stop_on_sigint(stop), bar, torch_threads(1):
        while writer.count < steps and not stop["stop"]:
            if env.episode_over:
                observation = env.reset()
            action, phi = agent.act_with_features(observation, rng)
            step = env.step(action)
            ended = step.terminal or step.truncated
            writer.append(
                features=phi,
                cumulant=step.reward,
                clipped_cumulant=clip_reward(step.reward),
                terminal=step.terminal,
                truncated=step.truncated,
                episode=recorder.episode,
                step=env.episode_step - 1,
            )
            observation = step.observation
            if ended:
                recorder.episode += 1
            if writer.shard_full:
                writer.commit(recorder.resume_state())
            bar.update(1)
            if on_step is not None:
                on_step(writer.count)
        writer.commit(recorder.resume_state())
    return bool(stop["stop"])


def record(
    out,
    *,
    steps: int,
    config=None,
    policy: str = "random",
    seed: int = 0,
    epsilon: float | None = None,
    feature_seed: int = 0,
    shard_size: int = DEFAULT_SHARD_SIZE,
    progress: bool = True,
    on_step: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Record until the directory ``out`` holds ``steps`` transitions (continuing what it holds).

    Args:
      out: the recording's directory.
      steps: total transitions wanted in ``out``.
      config: an :class:`~gamma_net_core.atari.env.AtariConfig` (default: the paper's, Centipede)
        or a :class:`~gamma_net_core.atari.minatar.MinAtarConfig`.
      policy: ``"random"``, a Q-network file or ``"py:module:factory"``
        (see :func:`~gamma_net_core.atari.policies.load_policy`).
      seed: seeds the sticky actions and the policy's draws (two streams of one SeedSequence).
      epsilon: ε of a Q-network policy (default 0.0001, the paper's).
      feature_seed: seed of the random policy's fixed feature network.
      shard_size: rows per shard (a commit per shard).
      progress: show a tqdm bar on stderr.
      on_step: called with the row count after each row (tests use it to interrupt).

    Returns:
      A summary: rows recorded now, total rows, episodes completed, whether it was interrupted.

    Raises:
      ValueError: bad arguments, or ``out`` holds a recording made with other settings.
    """
    from gamma_net_core.atari.env import AtariConfig
    from gamma_net_core.atari.policies import EVAL_EPSILON

    if steps < 0:
        raise ValueError(f"steps must be >= 0; got {steps}")
    recorder = open_recorder(
        out,
        config=config or AtariConfig(),
        policy=policy,
        seed=seed,
        epsilon=EVAL_EPSILON if epsilon is None else epsilon,
        feature_seed=feature_seed,
        shard_size=shard_size,
    )
    start_count = recorder.writer.count
    started = time.perf_counter()
    stopped = play(recorder, steps=steps, progress=progress, on_step=on_step)
    seconds = time.perf_counter() - started
    recorded = recorder.writer.count - start_count
    return {
        "directory": str(out),
        "game": recorder.env.game,
        "policy": recorder.description,
        "recorded": recorded,
        "total": recorder.writer.count,
        "episodes_completed": recorder.episode,
        "interrupted": stopped and recorder.writer.count < steps,
        "seconds": seconds,
        "steps_per_second": recorded / seconds if seconds > 0 else float("nan"),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--game", default="centipede", help=GAME_HELP + " (default: centipede, the paper's)")
    parser.add_argument("--steps", type=int, required=True, help="total transitions wanted in --out")
    parser.add_argument("--out", required=True, help="recording directory (continued if it holds one)")
    parser.add_argument("--policy", default="random", help="'random' or a Q-network file (see docs/atari.md)")
    parser.add_argument("--seed", type=int, default=0, help="seed of sticky actions and policy draws")
    parser.add_argument("--epsilon", type=float, default=None, help="ε of a Q-network policy (default 0.0001)")
    parser.add_argument("--feature-seed", type=int, default=0, help="seed of the random policy's feature network")
    parser.add_argument("--shard-size", type=int, default=DEFAULT_SHARD_SIZE, help="rows per shard file")
    add_play_arguments(parser)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> Report:
    from gamma_net_core.atari.arguments import check_play, play_config
    from gamma_net_core.cli import check_range, output_dir

    check_range("--steps", args.steps, low=1)
    check_range("--shard-size", args.shard_size, low=1)
    check_play(args)
    output_dir("--out", args.out)
    config = play_config(args)
    summary = record(
        args.out,
        steps=args.steps,
        config=config,
        policy=args.policy,
        seed=args.seed,
        epsilon=args.epsilon,
        feature_seed=args.feature_seed,
        shard_size=args.shard_size,
        progress=not args.no_progress,
    )
    table = Table("atari record", ["game", "recorded now", "total", "steps/s", "interrupted"])
    table.add(
        summary["game"], summary["recorded"], summary["total"], summary["steps_per_second"], summary["interrupted"]
    )
    data = dict(summary)
    if summary["interrupted"]:
        print("interrupted: committed; run the same command again to continue", file=sys.stderr)
        data["exit_code"] = 130
    return Report(tables=[table], data=data, files=[str(args.out)])
