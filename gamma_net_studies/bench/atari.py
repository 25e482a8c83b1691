"""`gamma-net bench atari`: frames per second of recording and of Monte-Carlo rollouts, 1 -> 2 workers.

Four tables; every rate but reading's is the best of ``--repeats`` timings (the cores are
shared: the best is the least disturbed):
1. Recording, one core: the emulator alone (ALE, 4 frames per step: the reference), then
   the environment (sticky actions, max-pooling, resize, stacking), then with φ (a Nature
   CNN forward pass per step), then the whole recorder writing shards; and reading the
   recording back, whole shards and row by row.
2. Monte-Carlo rollouts per core (one worker in this process): with the random policy
   (no network), and with an ε-greedy Q-network (a forward pass per step).
3. Rollout throughput with 1 and with 2 worker processes, steady state: both pools are
   started and warmed up first, then timed in alternation so both see the same load.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np

from gamma_net_core.report import Report, Table

HORIZON = 200  # steps per benchmark rollout


def _best_rate(fn, seconds: float, repeats: int) -> float:
    """Best units per second of ``fn() -> units`` over ``repeats`` timings of about ``seconds`` each."""
    best = 0.0
    for _ in range(repeats):
        units, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            units += fn()
        best = max(best, units / elapsed)
    return best


def _reading_table(directory) -> Table:
    """Reading shards back: whole shards (a learner's path) and row by row (the ROS bridge's)."""
    from gamma_net_core.data.shards import ShardReader

    reader = ShardReader(directory, feature_size=512)
    table = Table(
        f"Reading {len(reader)} recorded transitions back (validated, SHA-256 checked)",
        ["how", "transitions/s"],
        formats={"transitions/s": "{:.0f}"},
    )
    for name, count in (
        ("whole shards (ShardReader.batches)", lambda: sum(len(b) for b in reader.batches())),
        ("row by row (iter(ShardReader))", lambda: sum(1 for _ in reader)),
    ):
        start = time.perf_counter()
        rows = count()
        table.add(name, rows / (time.perf_counter() - start))
    return table


def _recording_table(game: str, seconds: float, repeats: int) -> tuple[Table, Table]:
    from gamma_net_core.atari.env import AtariConfig, AtariEnv
    from gamma_net_core.atari.policies import RandomPolicy
    from gamma_net_core.atari.record import record

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
        rate = _best_rate(fn, seconds, repeats)
        reference = reference or rate
        table.add(name, rate, rate * config.frame_skip, rate / reference)
    steps = max(200, int(seconds * table.rows[-1][1]))
    rate = 0.0
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as out:
            summary = record(out, steps=steps, config=config, shard_size=max(100, steps // 4), progress=False)
            reading = _reading_table(out)
        rate = max(rate, summary["steps_per_second"])
    table.add("recorder (+ shard files, commits)", rate, rate * config.frame_skip, rate / reference)
    return table, reading


def _points(game: str, count: int):
    from gamma_net_core.atari.env import AtariConfig, AtariEnv
    from gamma_net_core.atari.evaluation_points import make_points
    from gamma_net_core.atari.policies import RandomPolicy

    config = AtariConfig(game=game, max_episode_steps=400)
    points = make_points(config, RandomPolicy(AtariEnv(config, seed=0).num_actions), episodes=1, seed=0)
    points.states = points.states[:count]
    return points


def _rollout_table(game: str, seconds: float, repeats: int, network_path: str) -> Table:
    from gamma_net_core.atari.rollouts import RolloutSpec, RolloutWorker

    points = _points(game, 4)
    table = Table(
        f"Monte-Carlo rollouts ({game}, {HORIZON}-step horizon), one worker in this process",
        ["policy", "rollout steps/s", "frames/s"],
        formats={"rollout steps/s": "{:.0f}", "frames/s": "{:.0f}"},
    )
    for name, policy in (("random (no network)", "random"), ("ε-greedy Q-network (forward per step)", network_path)):
        spec = RolloutSpec(points.config["env"], policy, 0.0001, 0, (0.0, 0.9, 0.99), HORIZON, 0)
        worker = RolloutWorker(spec)
        counter = {"k": 0}

        def fn(worker=worker, counter=counter):
            point = counter["k"] % len(points)
            _, _, _, lengths, _ = worker.run(point, points.states[point], [counter["k"]])
            counter["k"] += 1
            return int(lengths.sum())

        fn()
        rate = _best_rate(fn, seconds, repeats)
        table.add(name, rate, 4 * rate)
    return table


def _scaling_table(game: str, seconds: float, repeats: int, max_workers: int) -> Table:
    from gamma_net_core.atari import rollouts
    from gamma_net_core.tasks import TaskRunner

    points = _points(game, 4)
    spec = rollouts.RolloutSpec(points.config["env"], "random", 0.0001, 0, (0.0, 0.9, 0.99), HORIZON, 0)
    # Size the job from a one-core measurement so that one worker takes about `seconds`.
    worker = rollouts.RolloutWorker(spec)
    start = time.perf_counter()
    probe = int(worker.run(0, points.states[0], list(range(4)))[3].sum())
    per_core = probe / (time.perf_counter() - start)
    total_rollouts = max(4 * max_workers, int(seconds * per_core / HORIZON))
    tasks = [(i % len(points), points.states[i % len(points)], [i]) for i in range(total_rollouts)]
    runners = {w: TaskRunner(w, initializer=rollouts.start_worker, initargs=(spec,)) for w in range(1, max_workers + 1)}
    best = dict.fromkeys(runners, 0.0)
    try:
        for w, runner in runners.items():  # warm-up: imports, ROM loading, numba's cache, in every worker
            list(runner.map_unordered(rollouts.run_chunk, [(0, points.states[0], [10**6 + i]) for i in range(4 * w)]))
        for _ in range(repeats):
            for w, runner in runners.items():
                start = time.perf_counter()
                steps = sum(int(r[3].sum()) for r in runner.map_unordered(rollouts.run_chunk, tasks))
                best[w] = max(best[w], steps / (time.perf_counter() - start))
    finally:
        for runner in runners.values():
            runner.close()
    table = Table(
        f"Rollout throughput ({game}, random policy, {HORIZON}-step horizon) against worker processes",
        ["workers", "rollout steps/s", "frames/s", "speed-up vs 1"],
        formats={"rollout steps/s": "{:.0f}", "frames/s": "{:.0f}", "speed-up vs 1": "{:.2f}"},
    )
    for w, rate in best.items():
        table.add(w, rate, 4 * rate, rate / best[1])
    return table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--game", default="centipede")
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    parser.add_argument("--repeats", type=int, default=3, help="timings per measurement; the best is reported")
    parser.add_argument("--max-workers", type=int, default=2, help="scale rollouts from 1 to this many processes")


def run(args: argparse.Namespace) -> Report:
    from gamma_net_core.atari.arguments import check_game
    from gamma_net_core.atari.minatar import is_minatar
    from gamma_net_core.cli import check, check_range

    check_range("--seconds", args.seconds, above=0.0)
    check_range("--repeats", args.repeats, low=1)
    check_range("--max-workers", args.max_workers, low=1)
    check(
        not is_minatar(args.game),
        f"--game {args.game}: bench atari times ALE; MinAtar's rates are measured in docs/results.md (MinAtar)",
    )
    check_game("--game", args.game)

    # torch only once the arguments are known to be good
    from gamma_net_core.atari.env import AtariConfig, AtariEnv
    from gamma_net_core.atari.networks import random_network, save_q_network, torch_threads

    with tempfile.TemporaryDirectory() as tmp, torch_threads(1):
        network_path = f"{tmp}/network.pt"
        num_actions = AtariEnv(AtariConfig(game=args.game), seed=0).num_actions
        save_q_network(network_path, random_network(num_actions, seed=0), game=args.game)
        tables = [
            *_recording_table(args.game, args.seconds, args.repeats),
            _rollout_table(args.game, args.seconds, args.repeats, network_path),
            _scaling_table(args.game, 2 * args.seconds, args.repeats, args.max_workers),
        ]
    return Report(tables=tables)
