"""The Arcade Learning Environment with the paper's settings (its appendix table of parameters).

One step of :class:`AtariEnv` is ``frame_skip`` (4) emulated frames with the same agent
action; the observation is the pixel-wise maximum of the step's last two grayscale frames,
area-resized to 84x84, stacked with the three previous ones (uint8 [4, 84, 84], oldest
first, newest at index 3; at the start of an episode the older slots are zero, as in
Dopamine). The reward of a step is the sum over its frames (unclipped: it is the
cumulant). A lost life is not terminal; an episode is cut (``truncated``, not terminal)
after ``max_episode_steps`` (27,000) steps.

Sticky actions (probability 0.25): on every emulated frame, with probability p the
previous frame's action is applied again instead of the agent's, exactly ALE's
``repeat_action_probability`` rule (the previous action is NOOP after a reset). They are
drawn here, from a seeded ``numpy.random.Generator``, with ALE's own probability set to 0,
because ALE's saved state does not hold the previous action: ``cloneState(include_rng=True)``
saves the emulator and ALE's RNG, but the sticky previous action lives outside the state,
so a state restored into another ALE instance continues with that instance's last action
and diverges (checked against ale-py 0.12.1). Holding the previous action and the RNG here
makes :meth:`AtariEnv.get_state` / :meth:`AtariEnv.set_state` exact: restoring a state and
replaying the same actions gives the same frames and rewards, in any process.
"""

from __future__ import annotations

import base64
import dataclasses
import difflib
import re
from typing import Any, NamedTuple

import numpy as np

from gamma_net_core.atari.preprocessing import pool_and_resize
from gamma_net_core.config import setting, validate

#: ALE's screen size (rows, columns).
SCREEN_SHAPE = (210, 160)
#: ALE's NOOP action code: the previous action after a reset.
NOOP = 0


@dataclasses.dataclass(frozen=True)
class AtariConfig:
    """Settings of :class:`AtariEnv`; defaults from the paper's appendix table (Dopamine's)."""

    game: str = setting("centipede", "ALE game id (ale_py.roms.get_all_rom_ids()); the paper's main game")
    frame_skip: int = setting(4, "emulated frames per agent step, same action (paper: frameskip 4)", low=1, high=64)
    sticky_action_probability: float = setting(
        0.25, "per frame, probability of repeating the previous frame's action (paper: 0.25)", low=0.0, high=0.999
    )
    max_episode_steps: int = setting(
        27000, "agent steps after which an episode is cut, truncated not terminal (paper: 27,000)", low=1, high=10**9
    )
    frame_stack: int = setting(4, "frames stacked into one observation (Dopamine: 4)", low=1, high=16)
    screen_size: int = setting(84, "side of the square observation in pixels (paper: 84x84)", low=8, high=160)

    def __post_init__(self):
        validate(self)


class Step(NamedTuple):
    """What one agent step returns."""

    observation: np.ndarray  # uint8 [frame_stack, size, size], newest frame last
    reward: float  # sum of the step's frame rewards (unclipped)
    terminal: bool  # the game is over: the return stops here
    truncated: bool  # the episode was cut at max_episode_steps without being over


@dataclasses.dataclass(frozen=True)
class EnvState:
    """Everything needed to continue an :class:`AtariEnv` exactly, in plain types.

    ``ale_state`` is ``ALEState.serialize()`` of ``cloneState(include_rng=True)``;
    ``sticky_rng`` is the numpy bit generator state (a JSON-able dict).
    """

    game: str
    ale_state: bytes
    frames: np.ndarray  # uint8 [frame_stack, size, size]
    episode_step: int
    previous_action: int  # ALE action code applied on the last emulated frame
    sticky_rng: dict[str, Any]
    episode_over: bool

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (binary parts base64) that :meth:`from_json` reads back."""
        return {
            "game": self.game,
            "ale_state": base64.b64encode(self.ale_state).decode("ascii"),
            "frames": base64.b64encode(np.ascontiguousarray(self.frames).tobytes()).decode("ascii"),
            "frames_shape": list(self.frames.shape),
            "episode_step": int(self.episode_step),
            "previous_action": int(self.previous_action),
            "sticky_rng": self.sticky_rng,
            "episode_over": bool(self.episode_over),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EnvState:
        frames = np.frombuffer(base64.b64decode(data["frames"]), dtype=np.uint8).reshape(data["frames_shape"])
        return cls(
            game=data["game"],
            ale_state=base64.b64decode(data["ale_state"]),
            frames=frames.copy(),
            episode_step=int(data["episode_step"]),
            previous_action=int(data["previous_action"]),
            sticky_rng=data["sticky_rng"],
            episode_over=bool(data["episode_over"]),
        )


def _snake(name: str) -> str:
    """'ChopperCommand' or 'chopper-command' -> 'chopper_command' (ALE's ids)."""
    name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name.strip())
    return re.sub(r"[\s\-]+", "_", name).lower()


def resolve_game(name: str) -> str:
    """The ALE id of ``name`` (case and CamelCase forgiven), or a ValueError listing close matches."""
    from ale_py import roms

    known = roms.get_all_rom_ids()
    game = _snake(name)
    if game in known:
        return game
    close = difflib.get_close_matches(game, known, n=5, cutoff=0.6)
    hint = f"close matches: {', '.join(close)}" if close else f"known games: {', '.join(known)}"
    raise ValueError(f"unknown Atari game {name!r}; {hint}")


def _new_ale(rom_path: str, seed: int):
    from ale_py import ALEInterface, LoggerMode

    ALEInterface.setLoggerMode(LoggerMode.Error)
    ale = ALEInterface()
    ale.setInt("random_seed", int(seed) % (2**31 - 1))
    # Sticky actions are drawn here (see the module docstring); ALE must not add its own.
    ale.setFloat("repeat_action_probability", 0.0)
    ale.setInt("frame_skip", 1)
    ale.setInt("max_num_frames_per_episode", 0)
    ale.loadROM(rom_path)
    return ale


class AtariEnv:
    """An ALE game as the paper's agents saw it (see the module docstring).

    Typical loop::

        env = AtariEnv(AtariConfig(game="centipede"), seed=0)
        observation = env.reset()
        while True:
            step = env.step(policy.act(observation, rng))
            if step.terminal or step.truncated:
                observation = env.reset()
            else:
                observation = step.observation

    Args:
      config: the settings; the game name is validated (unknown -> ValueError with close matches).
      seed: seeds the sticky-action generator (and ALE's own RNG, which nothing here uses).
    """

    def __init__(self, config: AtariConfig | None = None, *, seed: int):
        from ale_py import roms

        self.config = config or AtariConfig()
        self.game = resolve_game(self.config.game)
        self._ale = _new_ale(str(roms.get_rom_path(self.game)), seed)
        self.action_set = [int(a.value) for a in self._ale.getMinimalActionSet()]
        self.num_actions = len(self.action_set)
        self.observation_shape = (self.config.frame_stack, self.config.screen_size, self.config.screen_size)
        self._sticky = np.random.default_rng(seed)
        self._frames = np.zeros(self.observation_shape, dtype=np.uint8)
        self._screens = np.zeros((2, *SCREEN_SHAPE), dtype=np.uint8)
        self._previous_action = NOOP
        self._episode_step = 0
        self._episode_over = True

    @property
    def episode_step(self) -> int:
        """Agent steps taken in the current episode."""
        return self._episode_step

    @property
    def episode_over(self) -> bool:
        """True before the first reset and after a terminal or truncated step: :meth:`reset` next."""
        return self._episode_over

    @property
    def lives(self) -> int:
        return int(self._ale.lives())

    @property
    def frame_number(self) -> int:
        """Emulated frames since the episode started (ALE's count)."""
        return int(self._ale.getEpisodeFrameNumber())

    def ram(self) -> np.ndarray:
        """A copy of the emulator's 128-byte RAM (the game's whole state; for tests and diagnostics)."""
        return self._ale.getRAM().copy()

    def observation(self) -> np.ndarray:
        """A copy of the current stacked observation."""
        return self._frames.copy()

    def reseed(self, seed) -> None:
        """Replace the sticky-action generator (e.g. one per Monte-Carlo rollout from a restored state).

        Args:
          seed: anything ``numpy.random.default_rng`` accepts (an int, a SeedSequence).
        """
        self._sticky = np.random.default_rng(seed)

    def reset(self) -> np.ndarray:
        """Start a new episode (ALE's reset is deterministic); returns the first observation."""
        self._ale.reset_game()
        self._previous_action = NOOP
        self._episode_step = 0
        self._episode_over = False
        self._frames[:] = 0
        self._ale.getScreenGrayscale(self._screens[1])
        self._frames[-1] = pool_and_resize(self._screens[1], self._screens[1], self.config.screen_size)
        return self._frames.copy()

    def step(self, action: int) -> Step:
        """Apply ``action`` (an index into the minimal action set) for ``frame_skip`` frames.

        Raises:
          ValueError: ``action`` is not an index of the action set.
          RuntimeError: the episode is over (call :meth:`reset`).
        """
        if self._episode_over:
            raise RuntimeError("the episode is over (terminal or truncated): call reset() first")
        if not (isinstance(action, (int, np.integer)) and 0 <= action < self.num_actions):
            raise ValueError(f"action must be an int in [0, {self.num_actions}) for {self.game}; got {action!r}")
        skip = self.config.frame_skip
        # Always draw one number per frame, so the generator's position does not depend on
        # when the game ended: a restored state continues the same stream.
        keep_previous = self._sticky.random(skip) < self.config.sticky_action_probability
        wanted = self.action_set[int(action)]
        reward = 0.0
        ale = self._ale
        for i in range(skip):
            if not keep_previous[i]:
                self._previous_action = wanted
            reward += ale.act(self._previous_action)
            if i >= skip - 2:
                ale.getScreenGrayscale(self._screens[i - (skip - 2)])
            if ale.game_over(with_truncation=False):
                # The step ends early: pool the final screen with itself.
                if i < skip - 1:
                    ale.getScreenGrayscale(self._screens[1])
                    self._screens[0] = self._screens[1]
                break
        if skip == 1:
            self._screens[0] = self._screens[1]
        self._frames[:-1] = self._frames[1:]
        self._frames[-1] = pool_and_resize(self._screens[0], self._screens[1], self.config.screen_size)
        self._episode_step += 1
        terminal = bool(ale.game_over(with_truncation=False))
        truncated = not terminal and self._episode_step >= self.config.max_episode_steps
        self._episode_over = terminal or truncated
        return Step(self._frames.copy(), float(reward), terminal, truncated)

    def get_state(self) -> EnvState:
        """The whole state: emulator (with ALE's RNG), frame stack, step count, sticky action and RNG."""
        return EnvState(
            game=self.game,
            ale_state=bytes(self._ale.cloneState(include_rng=True).serialize()),
            frames=self._frames.copy(),
            episode_step=self._episode_step,
            previous_action=self._previous_action,
            sticky_rng=self._sticky.bit_generator.state,
            episode_over=self._episode_over,
        )

    def set_state(self, state: EnvState) -> np.ndarray:
        """Continue exactly from ``state`` (from this or another env of the same game and config).

        Returns:
          The restored observation.

        Raises:
          ValueError: the state is of another game or observation shape; nothing is changed.
        """
        from ale_py import ALEState

        if state.game != self.game:
            raise ValueError(f"state is of game {state.game!r}; this environment plays {self.game!r}")
        if tuple(state.frames.shape) != self.observation_shape or state.frames.dtype != np.uint8:
            raise ValueError(
                f"state frames are {state.frames.dtype} {tuple(state.frames.shape)}; "
                f"this environment's observations are uint8 {self.observation_shape}"
            )
        if state.previous_action not in self.action_set and state.previous_action != NOOP:
            raise ValueError(f"state's previous action {state.previous_action} is not an action of {self.game}")
        sticky = np.random.default_rng()
        sticky.bit_generator.state = state.sticky_rng
        self._ale.restoreState(ALEState(state.ale_state))
        self._sticky = sticky
        self._frames[:] = state.frames
        self._episode_step = int(state.episode_step)
        self._previous_action = int(state.previous_action)
        self._episode_over = bool(state.episode_over)
        return self._frames.copy()
