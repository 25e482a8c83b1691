"""Evaluation points as in the paper: saved emulator and agent states along the policy's episodes.

The paper (section "Evaluation"): run the agent in evaluation mode over several episodes;
at the start of each episode draw an offset in [10, 100) steps; from the offset on, save
the state of the environment and agent every 30 steps (120 frames), and also the episode's
start state. From each point, Monte-Carlo rollouts estimate the expected return at the
probe timescales (:mod:`gamma_net_core.atari.rollouts`); a Γ-net's prediction at a point
is made from the point's φ, saved here too.

File (``points.npz``, written by :func:`gamma_net_core.checkpoint.save_npz`, kind
``atari_evaluation_points``, no pickle):

===================  ====================  ================================================
array                dtype, shape          meaning
===================  ====================  ================================================
ale_states           uint8 [total bytes]   every point's ``ALEState.serialize()`` (a MinAtar game's
                                           saved fields), concatenated
ale_state_offsets    int64 [P + 1]         point i's bytes are ale_states[off[i]:off[i+1]]
frames               uint8 [P, 4, 84, 84]  the stacked observation at the point (MinAtar: [P, C, 10, 10])
features             float32 [P, 512]      φ of that observation (the policy's network)
episodes             int64 [P]             episode index, from 0
steps                int64 [P]             step within the episode (0 = the start state)
previous_actions     int64 [P]             ALE action of the last emulated frame (sticky)
===================  ====================  ================================================

The JSON header's ``config`` holds the game, environment settings, policy identity, seed
and point schedule; its ``meta`` holds each point's sticky-action and policy generator
states and each episode's offset.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any

import numpy as np

from gamma_net_core.atari.domains import make_env
from gamma_net_core.atari.env import AtariConfig, EnvState
from gamma_net_core.atari.minatar import MinAtarConfig
from gamma_net_core.checkpoint import load_npz, save_npz
from gamma_net_core.config import to_mapping

KIND = "atari_evaluation_points"
VERSION = 1
#: The paper's schedule: offset drawn in [10, 100) steps, then a point every 30 steps.
OFFSET_LOW, OFFSET_HIGH, INTERVAL = 10, 100, 30


@dataclasses.dataclass
class EvaluationPoints:
    """Points of one game and policy; ``states[i]`` restores point i exactly."""

    config: dict[str, Any]  # game, env settings, policy, seed, schedule
    states: list[EnvState]
    features: np.ndarray  # float32 [P, F]
    episodes: np.ndarray  # int64 [P]
    steps: np.ndarray  # int64 [P]
    policy_rng: list[dict[str, Any]]  # the agent's generator state at each point
    offsets: list[int]  # each episode's offset

    def __len__(self) -> int:
        return len(self.states)

    def save(self, path: str | os.PathLike):
        """Write the points file described in the module docstring (atomically)."""
        blobs = [np.frombuffer(s.ale_state, dtype=np.uint8) for s in self.states]
        offsets = np.concatenate([[0], np.cumsum([b.size for b in blobs])]).astype(np.int64)
        frames = np.stack([s.frames for s in self.states]) if self.states else np.zeros((0, 4, 84, 84), np.uint8)
        arrays = {
            "ale_states": np.concatenate(blobs) if blobs else np.zeros(0, np.uint8),
            "ale_state_offsets": offsets,
            "frames": frames,
            "features": self.features.astype(np.float32),
            "episodes": self.episodes.astype(np.int64),
            "steps": self.steps.astype(np.int64),
            "previous_actions": np.array([s.previous_action for s in self.states], dtype=np.int64),
        }
        meta = {
            "sticky_rng": [s.sticky_rng for s in self.states],
            "policy_rng": self.policy_rng,
            "offsets": self.offsets,
            "episode_over": [s.episode_over for s in self.states],
        }
        return save_npz(path, kind=KIND, version=VERSION, config=self.config, arrays=arrays, meta=meta)

    @classmethod
    def load(cls, path: str | os.PathLike) -> EvaluationPoints:
        """Read a points file (validated: kind, version, consistent array lengths)."""
        config, arrays, meta = load_npz(path, kind=KIND, version=VERSION)
        off = arrays["ale_state_offsets"]
        count = arrays["frames"].shape[0]
        lengths = {name: arrays[name].shape[0] for name in ("features", "episodes", "steps", "previous_actions")}
        if off.shape != (count + 1,) or any(n != count for n in lengths.values()) or len(meta["sticky_rng"]) != count:
            raise ValueError(f"{path}: inconsistent point arrays ({count} frames, offsets {off.shape}, {lengths})")
        game = config["game"]
        states = [
            EnvState(
                game=game,
                ale_state=arrays["ale_states"][off[i] : off[i + 1]].tobytes(),
                frames=arrays["frames"][i],
                episode_step=int(arrays["steps"][i]),
                previous_action=int(arrays["previous_actions"][i]),
                sticky_rng=meta["sticky_rng"][i],
                episode_over=bool(meta["episode_over"][i]),
            )
            for i in range(count)
        ]
        return cls(
            config=config,
            states=states,
            features=arrays["features"],
            episodes=arrays["episodes"],
            steps=arrays["steps"],
            policy_rng=meta["policy_rng"],
            offsets=list(meta["offsets"]),
        )


def point_schedule(offset: int, interval: int = INTERVAL):
    """Whether step t of an episode is a point: the start (t = 0), then offset, offset + interval, ..."""
    return lambda t: t == 0 or (t >= offset and (t - offset) % interval == 0)


def make_points(
    config: AtariConfig | MinAtarConfig,
    policy,
    *,
    episodes: int,
    seed: int,
    offset_low: int = OFFSET_LOW,
    offset_high: int = OFFSET_HIGH,
    interval: int = INTERVAL,
    progress: bool = False,
) -> EvaluationPoints:
    """Play ``episodes`` episodes with ``policy`` and save a point where the paper's schedule says.

    Args:
      config: the environment: an ALE game (the paper's settings by default) or a MinAtar game.
      policy: a :class:`~gamma_net_core.atari.policies.Policy` (evaluation mode, ε = 0.0001).
      episodes: number of episodes (each ends when terminal or truncated).
      seed: one SeedSequence gives three streams: sticky actions, policy draws, offsets.
      offset_low, offset_high: the offset is drawn uniformly from [offset_low, offset_high).
      interval: steps between points after the offset.
      progress: a tqdm bar on stderr, counting steps.

    Returns:
      The points, in the order they were visited.
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1; got {episodes}")
    if not 0 <= offset_low < offset_high or interval < 1:
        raise ValueError(
            f"need 0 <= offset_low < offset_high and interval >= 1; got {offset_low}, {offset_high}, {interval}"
        )
    from tqdm import tqdm

    sticky_seed, policy_seed, offset_seed = (int(s) for s in np.random.SeedSequence(seed).generate_state(3))
    env = make_env(config, seed=sticky_seed)
    rng = np.random.default_rng(policy_seed)
    offset_rng = np.random.default_rng(offset_seed)
    states, features, episode_of, step_of, policy_states, offsets = [], [], [], [], [], []
    bar = tqdm(unit="step", desc="evaluation points", file=sys.stderr, disable=not progress)
    for episode in range(episodes):
        offset = int(offset_rng.integers(offset_low, offset_high))
        offsets.append(offset)
        is_point = point_schedule(offset, interval)
        observation = env.reset()
        while True:
            t = env.episode_step
            if is_point(t):
                states.append(env.get_state())
                policy_states.append(rng.bit_generator.state)
                action, phi = policy.act_with_features(observation, rng)
                features.append(phi)
                episode_of.append(episode)
                step_of.append(t)
            else:
                action = policy.act(observation, rng)
            step = env.step(action)
            observation = step.observation
            bar.update(1)
            if step.terminal or step.truncated:
                break
        bar.set_postfix(episodes=episode + 1, points=len(states))
    bar.close()
    schedule = {"offset_low": int(offset_low), "offset_high": int(offset_high), "interval": int(interval)}
    return EvaluationPoints(
        config={
            "game": env.game,
            "env": {**to_mapping(config), "game": env.game},
            "policy": {k: v for k, v in policy.describe().items() if k != "path"},
            "seed": int(seed),
            "episodes": int(episodes),
            **schedule,
        },
        states=states,
        features=np.array(features, dtype=np.float32).reshape(len(states), policy.feature_size),
        episodes=np.array(episode_of, dtype=np.int64),
        steps=np.array(step_of, dtype=np.int64),
        policy_rng=policy_states,
        offsets=offsets,
    )
