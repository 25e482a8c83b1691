"""`gamma-net bench atari`: frames per second of recording and of Monte-Carlo rollouts, 1 -> 2 workers.

Three tables:
1. Recording, one core: the emulator alone (ALE, 4 frames per step: the reference), then
   the environment (sticky actions, max-pooling, resize, stacking), then with φ (a Nature
   CNN forward pass per step), then the whole recorder writing shards.
2. Monte-Carlo rollouts per core (one worker in this process): with the random policy
   (no network), and with an ε-greedy Q-network (a forward pass per step).
3. Scaling of rollout throughput from 1 to 2 worker processes (steady state: the pool is
   started and warmed up before timing).
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

from gamma_net_core.report import Report, Table


def _timed(fn, seconds: float) -> tuple[int, float]:
    """Call ``fn() -> units`` until ``seconds`` pass; (units, elapsed)."""
    units, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        units += fn()
    return units, elapsed


def _recording_table(game: str, seconds: float) -> Table:
    import torch

    from gamma_net_core.atari.env import AtariConfig, AtariEnv
    from gamma_net_core.atari.policies import RandomPolicy
    from gamma_net_core.atari.record import record

    torch.set_num_threads(1)
    config = AtariConfig(game=game)
    env = AtariEnv(config, seed=0)
    policy = RandomPolicy(env.num_actions)
    rng = np.random.default_rng(0)
    ale = env._ale  # the reference: the same emulator, no preprocessing
    actions = env.action_set

    def emulator_step():
        for _ in range(config.frame_skip):
            ale.act(actions[int(rng.integers(len(actions)))])
        if ale.game_over():
            ale.reset_game()
        return 1

    state = {"obs": env.reset()}

    def env_step(with_phi: bool):
        def fn():
            if with_phi:
                action, _ = policy.act_with_features(state["obs"], rng)
            else:
                action = policy.act(state["obs"], rng)
            step = env.step(action)
            state["obs"] = env.reset() if step.terminal or step.truncated else step.observation
            return 1

        return fn

    table = Table(
        f"Atari recording ({game}), one core: steps/s (4 frames each)",
        ["stage", "steps/s", "frames/s", "x emulator alone"],
        formats={"steps/s": "{:.0f}", "frames/s": "{:.0f}", "x emulator alone": "{:.2f}"},
    )
    reference = None
    for name, fn in (
        ("emulator alone (ALE act x4)", emulator_step),
        ("environment (sticky, pool, resize, stack)", env_step(False)),
        ("environment + φ (Nature CNN forward)", env_step(True)),
    ):
        fn()
        units, elapsed = _timed(fn, seconds)
        rate = units / elapsed
        reference = reference or rate
        table.add(name, rate, rate * config.frame_skip, rate / reference)
    with tempfile.TemporaryDirectory() as out:
        steps = max(200, int(seconds * table.rows[-1][1]))
        summary = record(out, steps=steps, config=config, shard_size=max(100, steps // 4), progress=False)
        rate = summary["steps_per_second"]
        table.add("recorder (+ shard files, commits)", rate, rate * config.frame_skip, rate / reference)
    return table


def _points(game: str, count: int):
    from gamma_net_core.atari.env import AtariConfig
    from gamma_net_core.atari.evaluation_points import make_points
    from gamma_net_core.atari.policies import RandomPolicy

    config = AtariConfig(game=game, max_episode_steps=400)
    points = make_points(config, RandomPolicy(_num_actions(game)), episodes=1, seed=0)
    points.states = points.states[:count]
    return points


def _num_actions(game: str) -> int:
    from gamma_net_core.atari.env import AtariConfig, AtariEnv

    return AtariEnv(AtariConfig(game=game), seed=0).num_actions


def _rollout_table(game: str, seconds: float, network_path: str) -> Table:
    from gamma_net_core.atari.rollouts import RolloutSpec, RolloutWorker

    points = _points(game, 4)
    table = Table(
        f"Monte-Carlo rollouts ({game}), one worker in this process",
        ["policy", "rollout steps/s", "frames/s"],
        formats={"rollout steps/s": "{:.0f}", "frames/s": "{:.0f}"},
    )
    for name, policy in (("random (no network)", "random"), ("ε-greedy Q-network (forward per step)", network_path)):
        spec = RolloutSpec(points.config["env"], policy, 0.0001, 0, (0.0, 0.9, 0.99), 200, 0)
        worker = RolloutWorker(spec)
        counter = {"k": 0}

        def fn(worker=worker, counter=counter):
            point = counter["k"] % len(points)
            _, _, _, lengths, _ = worker.run(point, points.states[point], [counter["k"]])
            counter["k"] += 1
            return int(lengths.sum())

        fn()
        steps, elapsed = _timed(fn, seconds)
        table.add(name, steps / elapsed, 4 * steps / elapsed)
    return table


def _scaling_table(game: str, seconds: float, max_workers: int) -> Table:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from gamma_net_core.atari import rollouts

    points = _points(game, 4)
    spec = rollouts.RolloutSpec(points.config["env"], "random", 0.0001, 0, (0.0, 0.9, 0.99), 200, 0)
    # Size the job from a one-core measurement so each run lasts about `seconds`.
    worker = rollouts.RolloutWorker(spec)
    start = time.perf_counter()
    probe = int(worker.run(0, points.states[0], list(range(4)))[3].sum())
    per_core = probe / (time.perf_counter() - start)
    total_rollouts = max(8, int(seconds * per_core / 200) * max_workers)
    tasks = [(i % len(points), [i]) for i in range(total_rollouts)]
    table = Table(
        f"Rollout throughput ({game}, random policy, 200-step horizon) against workers",
        ["workers", "rollout steps/s", "frames/s", "speed-up vs 1"],
        formats={"rollout steps/s": "{:.0f}", "frames/s": "{:.0f}", "speed-up vs 1": "{:.2f}"},
    )
    base = None
    context = multiprocessing.get_context("spawn")
    for workers in range(1, max_workers + 1):
        with ProcessPoolExecutor(
            workers, mp_context=context, initializer=rollouts._init_process, initargs=(spec,)
        ) as pool:
            # Warm-up: every worker imports torch, loads the ROM and compiles returns before timing.
            list(
                pool.map(
                    rollouts._run_in_process, *zip(*[(0, points.states[0], [10**6 + w]) for w in range(4 * workers)])
                )
            )
            start = time.perf_counter()
            futures = [pool.submit(rollouts._run_in_process, p, points.states[p], idx) for p, idx in tasks]
            steps = sum(int(f.result()[3].sum()) for f in futures)
            elapsed = time.perf_counter() - start
        rate = steps / elapsed
        base = base or rate
        table.add(workers, rate, 4 * rate, rate / base)
    return table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--game", default="centipede")
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    parser.add_argument("--max-workers", type=int, default=2, help="scale rollouts from 1 to this many processes")


def run(args: argparse.Namespace) -> Report:
    from gamma_net_core.atari.networks import random_network, save_q_network

    with tempfile.TemporaryDirectory() as tmp:
        network_path = f"{tmp}/network.pt"
        save_q_network(network_path, random_network(_num_actions(args.game), seed=0), game=args.game)
        tables = [
            _recording_table(args.game, args.seconds),
            _rollout_table(args.game, args.seconds, network_path),
            _scaling_table(args.game, 2 * args.seconds, args.max_workers),
        ]
    return Report(tables=tables)
