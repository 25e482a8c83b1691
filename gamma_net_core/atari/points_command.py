"""`gamma-net atari points`: evaluation points and their Monte-Carlo returns per probe τ.

Writes ``DIR/points.npz`` (:mod:`gamma_net_core.atari.evaluation_points`), then
``DIR/returns.npz`` and ``DIR/returns.json`` (:mod:`gamma_net_core.atari.rollouts`).
If ``DIR/points.npz`` exists and was made with the same game, settings, policy, seed and
episodes, it is reused and only the rollouts run.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from gamma_net_core.atari.arguments import GAME_HELP, add_play_arguments
from gamma_net_core.config import to_mapping
from gamma_net_core.report import Report, Table, write_json


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--game", default="centipede", help=GAME_HELP + " (default: centipede)")
    parser.add_argument("--episodes", type=int, required=True, help="episodes to draw points from")
    parser.add_argument("--rollouts", type=int, required=True, help="Monte-Carlo rollouts per point (paper: 1000)")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--policy", default="random", help="'random' or a Q-network file")
    parser.add_argument("--epsilon", type=float, default=None, help="ε of a Q-network policy (default 0.0001)")
    parser.add_argument("--feature-seed", type=int, default=0, help="seed of the random policy's feature network")
    parser.add_argument("--seed", type=int, default=0, help="seed of the points' episodes and of the rollouts")
    parser.add_argument(
        "--horizon",
        default="auto",
        help="rollout length: 'auto' (largest probe γ's weight < 1e-4: 917 steps), an int, or 'episode'",
    )
    parser.add_argument("--taus", type=float, nargs="+", default=None, help="probe τ (default: the paper's nine)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="local processes (0: in this one)")
    parser.add_argument("--ray-address", default=None, help="run rollouts on this Ray cluster ('auto', 'ray://...')")
    parser.add_argument("--chunk", type=int, default=8, help="rollouts of one point per task")
    add_play_arguments(parser)
    parser.add_argument(
        "--cumulant",
        default="raw",
        choices=("raw", "clipped"),
        help="returns of the game's reward (raw, the reference's) or of Dopamine's clipped reward",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def _horizon(text: str):
    from gamma_net_core.cli import UsageError

    if text == "auto":
        return "auto"
    if text == "episode":
        return None
    try:
        steps = int(text)
    except ValueError:
        steps = 0
    if steps < 1:
        raise UsageError(f"--horizon must be 'auto', 'episode' or an int >= 1; got {text!r}")
    return steps


def run(args: argparse.Namespace) -> Report:
    from gamma_net_core.atari.arguments import check_play, play_config
    from gamma_net_core.atari.domains import make_env
    from gamma_net_core.atari.policies import EVAL_EPSILON, file_sha256, load_policy
    from gamma_net_core.atari.rollouts import PROBE_TAUS, monte_carlo_returns
    from gamma_net_core.cli import check, check_range, output_dir

    check_range("--episodes", args.episodes, low=1)
    check_range("--rollouts", args.rollouts, low=1)
    for tau in args.taus or ():
        check_range("--taus", tau, low=1.0)  # tau = 1 / (1 - gamma): gamma in [0, 1)
    check(args.taus is None or len(set(args.taus)) == len(args.taus), f"--taus repeats a value: {args.taus}")
    check_range("--workers", args.workers, low=0)
    check_range("--chunk", args.chunk, low=1)
    horizon = _horizon(args.horizon)
    check_play(args)
    out = output_dir("--out", args.out)
    if args.ray_address is not None:
        import ray  # noqa: F401  (without Ray: refused now, in one line, not after the points are made)
    config = play_config(args)
    env = make_env(config, seed=0)
    policy = load_policy(
        args.policy,
        num_actions=env.num_actions,
        game=env.game,
        epsilon=EVAL_EPSILON if args.epsilon is None else args.epsilon,
        feature_seed=args.feature_seed,
    )
    points_path = out / "points.npz"
    points = _points(points_path, args, config, env.game, policy)
    results = monte_carlo_returns(
        points,
        policy=args.policy,
        rollouts=args.rollouts,
        taus=args.taus or PROBE_TAUS,
        horizon=horizon,
        seed=args.seed,
        epsilon=args.epsilon,
        feature_seed=args.feature_seed,
        workers=args.workers,
        ray_address=args.ray_address,
        chunk=args.chunk,
        progress=not args.no_progress,
        points_sha256=file_sha256(points_path),
        cumulant=args.cumulant,
    )
    results.save(out / "returns.npz")
    write_json(
        out / "returns.json",
        {
            "config": results.config,
            "taus": results.taus,
            "gammas": results.gammas,
            "episodes": points.episodes,
            "steps": points.steps,
            "returns": results.returns,
            "standard_errors": results.standard_errors,
        },
    )
    table, ends = _tables(results, env.game, len(points), args.rollouts)
    files = [str(points_path), str(out / "returns.npz"), str(out / "returns.json")]
    return Report(tables=[table, ends], data={"points": len(points), "horizon": results.config["horizon"]}, files=files)


def _points(points_path, args: argparse.Namespace, config, game: str, policy):
    """The evaluation points in ``points_path`` if made with these settings, else made now and saved there."""
    from gamma_net_core.atari.evaluation_points import EvaluationPoints, make_points

    if points_path.is_file():
        points = EvaluationPoints.load(points_path)
        wanted = {
            "game": game,
            "env": {**to_mapping(config), "game": game},
            "policy": {k: v for k, v in policy.describe().items() if k != "path"},
            "seed": args.seed,
            "episodes": args.episodes,
        }
        if any(points.config.get(k) != v for k, v in wanted.items()):
            raise ValueError(f"{points_path} was made with other settings: {points.config}; use another --out")
        return points
    points = make_points(config, policy, episodes=args.episodes, seed=args.seed, progress=not args.no_progress)
    points.save(points_path)
    return points


def _tables(results, game: str, n_points: int, rollouts: int) -> tuple[Table, Table]:
    """The returns per timescale, and how the rollouts ended."""
    table = Table(
        f"Monte-Carlo returns: {game}, {n_points} points, {rollouts} rollouts each",
        ["tau", "gamma", "mean return", "min", "max", "mean std error"],
    )
    mean, se = results.returns, results.standard_errors
    for g, (tau, gamma) in enumerate(zip(results.taus, results.gammas)):
        column_se = float(np.mean(se[:, g])) if np.isfinite(se[:, g]).any() else float("nan")
        table.add(
            float(tau),
            float(gamma),
            float(mean[:, g].mean()),
            float(mean[:, g].min()),
            float(mean[:, g].max()),
            column_se,
        )
    ends = Table("how rollouts ended", ["horizon", "terminal", "episode cut", "mean length"])
    ends.add(
        int((results.rollout_ends == 0).sum()),
        int((results.rollout_ends == 1).sum()),
        int((results.rollout_ends == 2).sum()),
        float(results.rollout_lengths.mean()),
    )
    return table, ends
