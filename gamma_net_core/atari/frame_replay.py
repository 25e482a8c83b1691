"""Uniform replay of Atari transitions for the DQN trainer, storing each frame once.

A stacked observation holds 4 frames, 3 of them shared with the previous step, so the
buffer stores only each state's newest frame and rebuilds the stacks when sampling (as
Dopamine's circular replay buffer does): 7 kB per transition instead of 56 kB.

Slot i holds S_i's newest frame, the action A_i, the reward R_{i+1}, whether S_{i+1} is
terminal, and whether the episode ended after step i (terminal or cut). The stack of S_i
is frames i-3..i, with the frames before its episode's first step zeroed (as the
environment's observations are). The next state S_{i+1} is rebuilt from slot i+1, so a
slot can be sampled only once slot i+1 is written, and never when its episode was cut
there (the state after a cut is not stored; one lost sample per 27,000 steps).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np


class ReplayBatch(NamedTuple):
    observations: np.ndarray  # uint8 [B, stack, H, W]
    actions: np.ndarray  # int64 [B]
    rewards: np.ndarray  # float32 [B]
    terminals: np.ndarray  # bool [B]
    next_observations: np.ndarray  # uint8 [B, stack, H, W]


class FrameReplay:
    """A circular buffer of ``capacity`` transitions (see the module docstring).

    Args:
      capacity: transitions kept (the oldest are overwritten).
      frame_shape: (H, W) of one frame.
      stack: frames per observation.
    """

    ARRAYS = ("frames", "actions", "rewards", "terminals", "ends")

    def __init__(self, capacity: int, *, frame_shape: tuple[int, int] = (84, 84), stack: int = 4):
        if capacity < stack + 2:
            raise ValueError(f"replay capacity must be >= {stack + 2}; got {capacity}")
        self.capacity = int(capacity)
        self.stack = int(stack)
        self.frames = np.zeros((capacity, *frame_shape), dtype=np.uint8)
        self.actions = np.zeros(capacity, dtype=np.int64)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.terminals = np.zeros(capacity, dtype=np.bool_)
        self.ends = np.zeros(capacity, dtype=np.bool_)
        self.cursor = 0  # next slot to write
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def add(self, *, frame: np.ndarray, action: int, reward: float, terminal: bool, ended: bool) -> None:
        """Store step t: S_t's newest frame, A_t, R_{t+1}, S_{t+1} terminal, episode ended after t."""
        i = self.cursor
        self.frames[i] = frame
        self.actions[i] = action
        self.rewards[i] = reward
        self.terminals[i] = terminal
        self.ends[i] = ended
        self.cursor = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def _valid(self, index: np.ndarray) -> np.ndarray:
        age = (self.cursor - 1 - index) % self.capacity  # 0 for the newest slot
        ok = (index < self.size) & (age >= 1)  # slot i + 1 is written
        if self.size == self.capacity:
            # The oldest slots' earlier frames were overwritten by the newest ones.
            ok &= age < self.capacity - (self.stack - 1)
        cut = self.ends[index] & ~self.terminals[index]
        return ok & ~cut

    def stack_at(self, index: np.ndarray) -> np.ndarray:
        """Observations [B, stack, H, W] of slots ``index``, zero before each one's episode start."""
        index = np.asarray(index)
        out = np.zeros((index.size, self.stack, *self.frames.shape[1:]), dtype=np.uint8)
        alive = np.ones(index.size, dtype=np.bool_)
        for back in range(self.stack):  # back = 0 is the newest frame
            slot = (index - back) % self.capacity
            if back:
                # An episode that ended at slot i - back leaves no frame to S_i's stack from there on.
                alive &= ~self.ends[slot]
                if self.size < self.capacity:
                    alive &= index - back >= 0
            out[alive, self.stack - 1 - back] = self.frames[slot[alive]]
        return out

    def sample(self, batch_size: int, rng: np.random.Generator) -> ReplayBatch:
        """``batch_size`` transitions drawn uniformly from the valid slots."""
        if self.size < self.stack + 2:
            raise ValueError(f"replay holds {self.size} transitions; need at least {self.stack + 2} to sample")
        chosen = np.zeros(0, dtype=np.int64)
        while chosen.size < batch_size:
            draw = rng.integers(0, self.size, size=batch_size)
            chosen = np.concatenate([chosen, draw[self._valid(draw)]])
        index = chosen[:batch_size]
        return ReplayBatch(
            self.stack_at(index),
            self.actions[index],
            self.rewards[index],
            self.terminals[index],
            self.stack_at((index + 1) % self.capacity),
        )

    def state_dict(self) -> dict[str, np.ndarray | int]:
        return {**{name: getattr(self, name) for name in self.ARRAYS}, "cursor": self.cursor, "size": self.size}

    def load_state_dict(self, state) -> None:
        for name in self.ARRAYS:
            value = np.asarray(state[name])
            if value.shape != getattr(self, name).shape:
                raise ValueError(f"replay {name} has shape {value.shape}, expected {getattr(self, name).shape}")
            getattr(self, name)[:] = value
        self.cursor, self.size = int(state["cursor"]), int(state["size"])
