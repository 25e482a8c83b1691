"""MinAtar (Young and Tian 2019) behind the interface of :class:`~gamma_net_core.atari.env.AtariEnv`.

MinAtar's games are 10x10 grids with one boolean channel per kind of object; one agent
step is one game step (no frame skip, no frame stack: the channels already show motion,
e.g. Breakout's ball trail). The observation here is MinAtar's ``state()`` as uint8
[channels, 10, 10] (channels first, for torch's convolutions).

Settings are MinAtar's own (``minatar.Environment``): sticky actions with probability 0.1
per step (the previous step's action is repeated; the previous action survives a reset,
as in MinAtar), difficulty ramping on, and MinAtar's six actions (its ``num_actions()``;
the reference DQN's action set). MinAtar has no episode cut; the pipeline's cut of
``max_episode_steps`` (the paper's 27,000 steps) keeps a good Breakout agent's episode finite.

State save and restore. MinAtar draws its sticky actions and the game's own randomness
(where enemies appear, Breakout's first ball) from one ``numpy.random.RandomState`` that
the wrapper and the game share. :meth:`MinAtarEnv.get_state` saves the game object's
fields (ints, bools, lists and arrays: encoded as JSON, no pickle), that generator's state
and the previous action, so a state restored into any environment of the same game,
in any process, replays identically under the same actions. The saved game fields go in
:class:`~gamma_net_core.atari.env.EnvState`'s ``ale_state`` bytes and the generator in its
``sticky_rng``, so recordings, evaluation points and checkpoints store MinAtar states in
the files they already write.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any

import numpy as np

from gamma_net_core.atari import MINATAR_GAMES
from gamma_net_core.atari.env import EnvState, Step
from gamma_net_core.config import setting, validate

#: The pipeline's prefix of a MinAtar game's name.
PREFIX = "minatar-"
#: MinAtar's grid side.
GRID = 10


def is_minatar(name: str) -> bool:
    """Whether ``name`` names a MinAtar game (``minatar-breakout``, ``MinAtar:Breakout``, ...)."""
    return _normal(name).startswith("minatar_")


def _normal(name: str) -> str:
    text = str(name).strip().lower()
    for separator in ("-", ":", "/", " "):
        text = text.replace(separator, "_")
    return text


def resolve_game(name: str) -> str:
    """The pipeline's name of a MinAtar game (``minatar-space-invaders``), or a ValueError listing them.

    Case and separators are forgiven: ``MinAtar:Space_Invaders`` is ``minatar-space-invaders``.
    """
    wanted = _normal(name)
    for game in MINATAR_GAMES:
        if _normal(game) == wanted:
            return game
    raise ValueError(f"unknown MinAtar game {name!r}; MinAtar games: {', '.join(MINATAR_GAMES)}")


def module_name(game: str) -> str:
    """MinAtar's module of a game (``minatar-space-invaders`` -> ``space_invaders``)."""
    return resolve_game(game)[len(PREFIX) :].replace("-", "_")


@dataclasses.dataclass(frozen=True)
class MinAtarConfig:
    """Settings of :class:`MinAtarEnv`; defaults are MinAtar's (``minatar.Environment``)."""

    game: str = setting("minatar-breakout", f"MinAtar game: one of {', '.join(MINATAR_GAMES)}")
    sticky_action_probability: float = setting(
        0.1, "per step, probability of repeating the previous action (MinAtar: 0.1)", low=0.0, high=0.999
    )
    difficulty_ramping: bool = setting(True, "games speed up as the agent scores (MinAtar: on)")
    max_episode_steps: int = setting(
        27000,
        "steps after which an episode is cut, truncated not terminal (paper's cut; MinAtar: none)",
        low=1,
        high=10**9,
    )

    def __post_init__(self):
        validate(self)


# -- the game object's fields as JSON (no pickle) ------------------------------------------------


def _encode(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        data = base64.b64encode(np.ascontiguousarray(value).tobytes()).decode("ascii")
        return {"__ndarray__": data, "dtype": value.dtype.str, "shape": list(value.shape)}
    if isinstance(value, np.generic):  # kept typed: a numpy int and a Python int can differ in arithmetic
        return {"__scalar__": value.dtype.str, "value": value.item()}
    if isinstance(value, tuple):
        return {"__tuple__": [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError(f"a MinAtar game field holds a dict with non-string keys: {sorted(map(repr, value))}")
        return {"__dict__": {k: _encode(v) for k, v in value.items()}}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"a MinAtar game field holds a {type(value).__name__}, which the state cannot save")


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if isinstance(value, dict):
        if "__ndarray__" in value:
            raw = base64.b64decode(value["__ndarray__"])
            return np.frombuffer(raw, dtype=np.dtype(value["dtype"])).reshape(value["shape"]).copy()
        if "__scalar__" in value:
            return np.dtype(value["__scalar__"]).type(value["value"])
        if "__tuple__" in value:
            return tuple(_decode(v) for v in value["__tuple__"])
        if "__dict__" in value:
            return {k: _decode(v) for k, v in value["__dict__"].items()}
        raise ValueError(f"unknown encoded value with keys {sorted(value)}")
    return value


def _generator_state(random: np.random.RandomState) -> dict[str, Any]:
    state = random.get_state(legacy=False)
    return {**state, "state": {"key": state["state"]["key"].tolist(), "pos": int(state["state"]["pos"])}}


def _generator(state: dict[str, Any]) -> np.random.RandomState:
    random = np.random.RandomState()
    key = np.asarray(state["state"]["key"], dtype=np.uint32)
    random.set_state({**state, "state": {"key": key, "pos": int(state["state"]["pos"])}})
    return random


def _seeded(seed) -> np.random.RandomState:
    """A RandomState from anything ``numpy.random.MT19937`` takes (an int, a SeedSequence)."""
    return np.random.RandomState(np.random.MT19937(seed))


class MinAtarEnv:
    """A MinAtar game behind :class:`~gamma_net_core.atari.env.AtariEnv`'s interface (see the module docstring).

    Args:
      config: the settings; an unknown game is a ValueError listing MinAtar's games.
      seed: seeds the generator of sticky actions and of the game's randomness.
    """

    def __init__(self, config: MinAtarConfig | None = None, *, seed: int):
        from minatar import Environment

        self.config = config or MinAtarConfig()
        self.game = resolve_game(self.config.game)
        self._minatar = Environment(
            module_name(self.game),
            sticky_action_prob=self.config.sticky_action_probability,
            difficulty_ramping=self.config.difficulty_ramping,
        )
        self.num_actions = int(self._minatar.num_actions())
        self.action_set = list(range(self.num_actions))
        channels = int(self._minatar.state_shape()[2])
        self.observation_shape = (channels, GRID, GRID)
        self._fields = sorted(k for k in vars(self._minatar.env) if k != "random")
        self.reseed(seed)
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

    def observation(self) -> np.ndarray:
        """The current observation, uint8 [channels, 10, 10]."""
        return np.ascontiguousarray(self._minatar.state().transpose(2, 0, 1), dtype=np.uint8)

    def reseed(self, seed) -> None:
        """Replace the generator of sticky actions and game randomness (one per Monte-Carlo rollout).

        Args:
          seed: an int or a ``numpy.random.SeedSequence``.
        """
        self._share(_seeded(seed))

    def _share(self, random: np.random.RandomState) -> None:
        # The wrapper and the game draw from one generator, as MinAtar's own seed() arranges.
        self._minatar.random = random
        self._minatar.env.random = random

    def reset(self) -> np.ndarray:
        """Start a new episode; returns the first observation."""
        self._minatar.reset()
        self._episode_step = 0
        self._episode_over = False
        return self.observation()

    def step(self, action: int) -> Step:
        """Apply ``action`` (an index into MinAtar's six actions) for one game step.

        Raises:
          ValueError: ``action`` is not an index of the action set.
          RuntimeError: the episode is over (call :meth:`reset`).
        """
        if self._episode_over:
            raise RuntimeError("the episode is over (terminal or truncated): call reset() first")
        if not (isinstance(action, (int, np.integer)) and 0 <= action < self.num_actions):
            raise ValueError(f"action must be an int in [0, {self.num_actions}) for {self.game}; got {action!r}")
        reward, terminal = self._minatar.act(int(action))
        self._episode_step += 1
        terminal = bool(terminal)
        truncated = not terminal and self._episode_step >= self.config.max_episode_steps
        self._episode_over = terminal or truncated
        return Step(self.observation(), float(reward), terminal, truncated)

    def get_state(self) -> EnvState:
        """The whole state: the game's fields, the shared generator, the previous action, the counters."""
        game = vars(self._minatar.env)
        fields = {name: _encode(game[name]) for name in self._fields}
        return EnvState(
            game=self.game,
            ale_state=json.dumps(fields, sort_keys=True).encode("utf-8"),
            frames=self.observation(),
            episode_step=self._episode_step,
            previous_action=int(self._minatar.last_action),
            sticky_rng=_generator_state(self._minatar.random),
            episode_over=self._episode_over,
        )

    def set_state(self, state: EnvState) -> np.ndarray:
        """Continue exactly from ``state`` (from this or another environment of the same game).

        Returns:
          The restored observation.

        Raises:
          ValueError: the state is of another game, or not a MinAtar state of this game; nothing is changed.
        """
        if state.game != self.game:
            raise ValueError(f"state is of game {state.game!r}; this environment plays {self.game!r}")
        if not 0 <= int(state.previous_action) < self.num_actions:
            raise ValueError(f"state's previous action {state.previous_action} is not an action of {self.game}")
        try:
            fields = {name: _decode(value) for name, value in json.loads(state.ale_state.decode("utf-8")).items()}
            random = _generator(state.sticky_rng)
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"state is not a saved {self.game} state: {exc}") from None
        if sorted(fields) != self._fields:
            raise ValueError(
                f"state's game fields {sorted(fields)} are not {self.game}'s {self._fields} (another MinAtar version?)"
            )
        vars(self._minatar.env).update(fields)
        self._share(random)
        self._minatar.last_action = int(state.previous_action)
        self._episode_step = int(state.episode_step)
        self._episode_over = bool(state.episode_over)
        return self.observation()
