"""Checks of the arguments the `gamma-net atari ...` commands share, made before any work.

Each raises :class:`~gamma_net_core.cli.UsageError` naming the option and the value, so a
typo in a game or a policy path is refused in one line before an episode is played.
"""

from __future__ import annotations

import argparse

from gamma_net_core.atari import MINATAR_GAMES
from gamma_net_core.cli import UsageError, check, check_range, input_path

#: What ``--game`` takes, in every `gamma-net atari` command's help.
GAME_HELP = f"ALE game id (e.g. centipede) or a MinAtar game ({', '.join(MINATAR_GAMES)})"


def add_play_arguments(parser: argparse.ArgumentParser) -> None:
    """--sticky and --max-episode-steps; unset, each is the game's domain's default."""
    parser.add_argument(
        "--max-episode-steps", type=int, default=None, help="episode cut (default: the paper's 27,000, both domains)"
    )
    parser.add_argument(
        "--sticky", type=float, default=None, help="sticky-action probability (default: paper 0.25; MinAtar 0.1)"
    )


def play_config(args: argparse.Namespace):
    """The environment settings of --game, --sticky and --max-episode-steps (an AtariConfig or MinAtarConfig)."""
    from gamma_net_core.atari.domains import env_config

    return env_config(args.game, sticky=args.sticky, max_episode_steps=args.max_episode_steps)


def check_game(flag: str, name: str) -> str:
    """The id of ``name`` in its domain, or a refusal listing close matches (needs ``ale_py`` or ``minatar``).

    Returns:
      The game's ALE id, or its MinAtar name (``minatar-breakout``).
    """
    from gamma_net_core.atari.domains import resolve_game

    try:
        return resolve_game(name)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def check_policy(flag: str, spec: str) -> None:
    """``"random"``, a ``"py:module:factory"`` or an existing network file (read later, with its checks)."""
    check(spec != "", f"{flag} must be 'random', 'py:module:factory' or a network file; got ''")
    if spec != "random" and not spec.startswith("py:"):
        check(
            input_path(flag, spec).is_file(),
            f"{flag} {spec} is a folder; it must be 'random', 'py:module:factory' or a network file",
        )


def check_play(args: argparse.Namespace) -> None:
    """The settings of how the game is played: --game, --sticky, --max-episode-steps, and where given
    --policy, --epsilon, --seed, --feature-seed."""
    check_range("--max-episode-steps", args.max_episode_steps, low=1)
    check_range("--sticky", args.sticky, low=0.0, high=0.999)
    for flag in ("seed", "feature_seed"):
        if hasattr(args, flag):
            check_range("--" + flag.replace("_", "-"), getattr(args, flag), low=0)
    if getattr(args, "epsilon", None) is not None:
        check_range("--epsilon", args.epsilon, low=0.0, high=1.0)
    if hasattr(args, "policy"):
        check_policy("--policy", args.policy)
    check_game("--game", args.game)
