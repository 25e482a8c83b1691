"""Checks of the arguments the `gamma-net atari ...` commands share, made before any work.

Each raises :class:`~gamma_net_core.cli.UsageError` naming the option and the value, so a
typo in a game or a policy path is refused in one line before an episode is played.
"""

from __future__ import annotations

import argparse

from gamma_net_core.cli import UsageError, check, check_range, input_path


def check_game(flag: str, name: str) -> str:
    """The ALE id of ``name``, or a refusal listing close matches (needs ``ale_py``).

    Returns:
      The game's ALE id.
    """
    from gamma_net_core.atari.env import resolve_game

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
