"""Which domain plays a game: ALE, or MinAtar for a game named ``minatar-<game>``.

Recording, evaluation points, rollouts and the DQN trainer build their environment, its
settings and a fresh Q-network here, from the game's name alone; both environments offer
the same interface (reset, step, get_state / set_state, reseed) and both states are an
:class:`~gamma_net_core.atari.env.EnvState`, so nothing downstream knows which one played.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gamma_net_core.atari.env import AtariConfig
from gamma_net_core.atari.minatar import MinAtarConfig, is_minatar

__all__ = ["config_from_mapping", "env_config", "is_minatar", "make_env", "random_q_network", "resolve_game"]


def resolve_game(name: str) -> str:
    """The game's id in its domain (``centipede``, ``minatar-breakout``), or a ValueError naming close matches."""
    if is_minatar(name):
        from gamma_net_core.atari import minatar

        return minatar.resolve_game(name)
    from gamma_net_core.atari import env

    return env.resolve_game(name)


def env_config(
    game: str, *, sticky: float | None = None, max_episode_steps: int | None = None
) -> AtariConfig | MinAtarConfig:
    """The settings of ``game``'s domain, with the options a user gave (None: the domain's default).

    Defaults: ALE, the paper's (sticky 0.25, cut at 27,000 steps); MinAtar, its own (sticky 0.1,
    difficulty ramping) with the paper's cut.
    """
    given = {"sticky_action_probability": sticky, "max_episode_steps": max_episode_steps}
    cls = MinAtarConfig if is_minatar(game) else AtariConfig
    return cls(game=game, **{k: v for k, v in given.items() if v is not None})


def config_from_mapping(mapping: Mapping[str, Any]) -> AtariConfig | MinAtarConfig:
    """The config whose :func:`~gamma_net_core.config.to_mapping` is ``mapping`` (as files store it)."""
    cls = MinAtarConfig if is_minatar(mapping["game"]) else AtariConfig
    return cls(**mapping)


def make_env(config: AtariConfig | MinAtarConfig, *, seed: int):
    """An :class:`~gamma_net_core.atari.env.AtariEnv` or a :class:`~gamma_net_core.atari.minatar.MinAtarEnv`."""
    if isinstance(config, MinAtarConfig):
        from gamma_net_core.atari.minatar import MinAtarEnv

        return MinAtarEnv(config, seed=seed)
    from gamma_net_core.atari.env import AtariEnv

    return AtariEnv(config, seed=seed)


def random_q_network(env, *, seed: int):
    """A freshly initialised Q-network for ``env``: the Nature CNN (ALE) or MinAtar's reference network."""
    if is_minatar(env.game):
        from gamma_net_core.atari.minatar_network import random_network

        return random_network(env.num_actions, in_channels=env.observation_shape[0], seed=seed)
    from gamma_net_core.atari.networks import random_network

    stack, size, _ = env.observation_shape
    return random_network(env.num_actions, seed=seed, frame_stack=stack, screen_size=size)


def feature_network_factory(game: str, *, num_actions: int, frame_stack: int = 4, screen_size: int = 84):
    """``seed -> network``: the fixed random network whose φ a random policy gives, for ``game``'s observations."""
    if is_minatar(game):
        from gamma_net_core.atari.minatar import MinAtarConfig, MinAtarEnv
        from gamma_net_core.atari.minatar_network import random_network

        channels = MinAtarEnv(MinAtarConfig(game=game), seed=0).observation_shape[0]
        return lambda seed: random_network(num_actions, in_channels=channels, seed=seed)
    from gamma_net_core.atari.networks import random_network

    return lambda seed: random_network(num_actions, seed=seed, frame_stack=frame_stack, screen_size=screen_size)
