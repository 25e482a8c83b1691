"""`gamma-net bench horde`: one Horde learner of Q questions against Q single-question Γ-nets, in one run.

The issue's setting: 100 questions, |Gamma_t| = 32 training timescales per step, the arm's
tile coding (two state inputs plus gamma and tau, 100 tilings hashed into 2048 features + bias).
Both doors a node takes, one transition per call with Gamma_t drawn per step:

- horde: :meth:`HordeLearner.learn` updating all Q questions (features computed once, shared), on
  its run kernels (each distinct active row touched about once a step) and on the plain kernels
  (``reference_kernels``, every active (tiling, gamma) pair's row: their oracle), both timed;
- loop: Q :class:`~gamma_net_core.linear.LinearGammaNet` objects, ``learn`` called on each (the
  same work, each recomputing its features), one "step" being all Q updated;
- horde (Autostep): the same Horde with a step size per question and feature;
- horde (TD(lambda)) with ``--lam`` > 0: the same Horde learning by TD(lambda) on the fixed
  ladder of 32 timescales, every question's traces shared (one continuation group), timed in
  the same run as TD(0) so their ratio is the cost of the traces.

The process is pinned to one core and numba to one thread; each timing is the best of
``--repeats``.

``--cost-model`` adds the cost of one tick of a node (``learn``, then ``predict`` at the 7
published timescales) for ``--cost-questions`` (100, 300, 1,000, 3,000): per tick, the bytes of
weights it must move (each distinct active row of ``W[feature, question]`` read once, those of
S_t written once, the published timescales' rows read: :func:`tick_cost`) and its flops; from the
machine's memory bandwidth (a numpy copy of a 256 MiB array, read plus write), the fastest a
tick can be when its weights stream from memory; and the measured tick's fraction of that limit,
on the run kernels and on the plain ones, tick by tick in alternation on the same transitions.
Weights that fit in the caches (100 questions: 1.6 MB) are read from them, faster than the limit.

Goals (reported, never asserted): the Horde at least 10x the loop and at least
100 steps/s (a 100 Hz clock), with TD(lambda) too (issue 18).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time

import numpy as np

from gamma_net_core.report import Report, Table

GOAL_RATIO = 10.0
#: The paper's arm coder (config/arm.yaml), spelled out: the library's default coder is finer.
ARM_CODER = {"tilings": (100,), "tile_widths": (1.0,), "memory_size": 2048, "hashing": "always", "bias": True,
             "timescale_input": "both"}  # fmt: skip
GOAL_STEPS_PER_SECOND = 100.0


def _data(steps: int, questions: int):
    rng = np.random.default_rng(0)
    walk = np.clip(0.5 + np.cumsum(rng.normal(0.0, 0.01, size=(steps + 1, 2)), axis=0), 0.0, 1.0)
    cumulants = np.abs(rng.normal(0.0, 1.0, size=(steps, questions)))
    return walk[:-1], cumulants, walk[1:]


def best_seconds(repeats: int, once) -> float:
    """The fastest of ``repeats`` timed calls of ``once()``, in seconds (other work only ever slows a run)."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        once()
        best = min(best, time.perf_counter() - started)
    return best


def bytes_needed(*, questions: int, steps: int, features: int) -> int:
    """Bytes the largest moment of :func:`measure` holds: the cumulants, then Autostep's four [F, Q] arrays.

    Args:
      questions: Q.
      steps: rows of data made (the larger of the Horde's and the loop's steps).
      features: F, the tile coder's features (bias included).
    """
    return 8 * questions * (steps + 4 * features)


def _memory_bytes() -> int | None:
    """This machine's physical memory, or None where the platform does not say."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def measure(*, questions: int, horde_steps: int, loop_steps: int, repeats: int, lam: float = 0.0) -> dict:
    """Steps per second of the Horde (constant, Autostep, TD(lambda) when ``lam`` > 0) and of the loop."""
    from gamma_net_core.horde.learner import HordeLearner
    from gamma_net_core.horde.questions import AdaptationConfig
    from gamma_net_core.linear import GammaNetConfig, LinearGammaNet
    from gamma_net_core.timescales import TimescaleSampler, TimescaleSampling

    config = GammaNetConfig(**ARM_CODER, step_size=0.1, bias_unit="scaled")  # the paper's arm
    sampling = TimescaleSampling(n_gamma=1, n_tau=29)  # |Gamma_t| = 32
    s_t, c, s_tp1 = _data(max(horde_steps, loop_steps), questions)
    names = [f"q{i}" for i in range(questions)]

    def horde(method: str, lam: float = 0.0, reference: bool = False):
        def once() -> None:
            adaptation = AdaptationConfig(method=method)
            rng = np.random.default_rng(1)
            cfg = dataclasses.replace(config, lam=lam, lambda_view="backward")  # a Horde has traces only
            learner = HordeLearner(cfg, names=names, timescales=sampling, adaptation=adaptation, rng=rng,
                                   reference_kernels=reference)  # fmt: skip
            for t in range(horde_steps):
                learner.learn(s_t[t], c[t], s_tp1[t])

        return once

    def loop() -> None:
        nets = [LinearGammaNet(config, rng=np.random.default_rng(1)) for _ in range(questions)]
        sampler = TimescaleSampler(sampling, np.random.default_rng(2))
        for t in range(loop_steps):
            gammas = sampler.sample()
            for q, net in enumerate(nets):
                net.learn(s_t[t], c[t, q], s_tp1[t], False, gammas)

    # Compile (or load the cached kernels) outside the timings.
    for method, reference in (("constant", False), ("constant", True), ("autostep", False)):
        warm = HordeLearner(config, names=names[:2], timescales=sampling, adaptation=AdaptationConfig(method=method),
                            rng=np.random.default_rng(1), reference_kernels=reference)  # fmt: skip
        warm.learn(s_t[0], c[0, :2], s_tp1[0])
    LinearGammaNet(config, rng=np.random.default_rng(1)).learn(s_t[0], c[0, 0], s_tp1[0], False, [0.5])
    if lam > 0.0:
        traced = dataclasses.replace(config, lam=lam, lambda_view="backward")
        warm = HordeLearner(traced, names=names[:2], timescales=sampling, rng=np.random.default_rng(1))
        warm.learn(s_t[0], c[0, :2], s_tp1[0])
    lambda_rate = horde_steps / best_seconds(repeats, horde("constant", lam)) if lam > 0.0 else None
    horde_rate = horde_steps / best_seconds(repeats, horde("constant"))
    plain_rate = horde_steps / best_seconds(repeats, horde("constant", reference=True))
    autostep_rate = horde_steps / best_seconds(repeats, horde("autostep"))
    loop_rate = loop_steps / best_seconds(repeats, loop)
    return {
        "questions": questions,
        "gamma_t": sampling.size,
        "tilings": sum(config.tilings),
        "features": config.memory_size + 1,
        "horde_steps_per_s": horde_rate,
        "horde_plain_steps_per_s": plain_rate,
        "plain_ratio": plain_rate / loop_rate,
        "horde_autostep_steps_per_s": autostep_rate,
        "loop_steps_per_s": loop_rate,
        "ratio": horde_rate / loop_rate,
        "autostep_ratio": autostep_rate / loop_rate,
        "lam": lam,
        "horde_lambda_steps_per_s": lambda_rate,
        "lambda_ratio": None if lambda_rate is None else lambda_rate / loop_rate,
    }


PUBLISHED_TAUS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)  # the horde node's default publish_taus


def memory_bandwidth(megabytes: int = 256, repeats: int = 5) -> float:
    """Bytes per second a numpy copy of a large array moves (read plus write), the best of ``repeats``."""
    source = np.ones(megabytes * 2**20 // 8)
    target = np.empty_like(source)
    best = best_seconds(repeats, lambda: np.copyto(target, source))
    return 2 * source.nbytes / best


def tick_cost(
    *, questions: int, gammas: int, published: int, n_active: int, rows_learn: int, rows_publish: int
) -> dict:
    """A tick's bytes of weights moved and its flops (float64 weights, ``W[feature, question]``).

    Args:
      questions: Q.
      gammas: |Gamma_t|, the timescales learned per tick.
      published: G, the timescales predicted per tick.
      n_active: active features of one (state, gamma): tilings plus the bias.
      rows_learn: distinct rows the learning reads (of (S_t, gamma_k) and (S_{t+1}, gamma_k)).
      rows_publish: distinct rows the prediction at the published timescales reads.

    Returns:
      ``bytes``: each distinct row read once, the rows of S_t (about half of them) written once,
      the published rows read once; ``accesses_bytes``: the kernels' row accesses, were none cached;
      ``flops``: adds and multiplies per question (TD errors 2 K n, update K n, predictions G n).
    """
    row = 8 * questions
    return {
        "bytes": row * (rows_learn + rows_learn // 2 + rows_publish),
        "accesses_bytes": row * (2 * gammas * n_active + 2 * gammas * n_active + published * n_active),
        "flops": questions * (3 * gammas * n_active + published * n_active + 8 * gammas),
    }


def measure_cost(questions: int, *, ticks: int = 200, bandwidth: float) -> dict:
    """One node tick (learn, then predict at the published taus) timed against :func:`tick_cost`'s limit.

    Two learners alike, on the run kernels and on the plain ones, tick in alternation (which one
    first, turn about) on the same transitions, so both meet the same load; ``tick_s`` is the run
    kernels', ``plain_tick_s`` the plain kernels'.
    """
    from gamma_net_core.horde.learner import HordeLearner
    from gamma_net_core.linear import GammaNetConfig
    from gamma_net_core.timescales import TimescaleSampling

    config = GammaNetConfig(**ARM_CODER, step_size=0.1, bias_unit="scaled")
    sampling = TimescaleSampling(n_gamma=1, n_tau=29)
    learners = [
        HordeLearner(config, names=[f"q{i}" for i in range(questions)], timescales=sampling,
                     rng=np.random.default_rng(1), reference_kernels=reference)
        for reference in (False, True)
    ]  # fmt: skip
    s_t, c, s_tp1 = _data(ticks + 1, questions)
    gammas = 1.0 - 1.0 / np.asarray(PUBLISHED_TAUS)
    for learner in learners:
        learner.learn(s_t[0], c[0], s_tp1[0])  # compiled or loaded outside the timing
        learner.predict(s_tp1[0], gammas)
    seconds = np.empty((2, ticks))
    rows_learn = np.empty(ticks)
    for t in range(ticks):
        for i in (0, 1) if t % 2 == 0 else (1, 0):
            learner = learners[i]
            started = time.perf_counter()
            learner.learn(s_t[t + 1], c[t + 1], s_tp1[t + 1])
            learner.predict(s_tp1[t + 1], gammas)
            seconds[i, t] = time.perf_counter() - started
        rows_learn[t] = learner.last_active_features(sampling.size).size
    # The published rows: one state's features at each published gamma (the same count as learning's, per gamma).
    n_active = learner.coder.n_active
    rows_publish = min(n_active * gammas.size, learner.n_features)
    cost = tick_cost(
        questions=questions, gammas=sampling.size, published=gammas.size, n_active=n_active,
        rows_learn=int(np.median(rows_learn)), rows_publish=rows_publish,
    )  # fmt: skip
    tick, plain_tick = (float(np.median(s)) for s in seconds)
    limit = cost["bytes"] / bandwidth
    return {
        "questions": questions,
        "weights_mb": learner.n_features * questions * 8 / 1e6,
        "rows_learn": int(np.median(rows_learn)),
        "rows_publish": rows_publish,
        "tick_bytes": cost["bytes"],
        "tick_access_bytes": cost["accesses_bytes"],
        "tick_flops": cost["flops"],
        "limit_s": limit,
        "tick_s": tick,
        "tick_p99_s": float(np.percentile(seconds[0], 99)),
        "fraction_of_limit": limit / tick,
        "gflops": cost["flops"] / tick / 1e9,
        "plain_tick_s": plain_tick,
        "plain_fraction_of_limit": limit / plain_tick,
        "speedup": plain_tick / tick,
    }


def cost_model_table(rows: list[dict], bandwidth: float) -> Table:
    table = Table(
        f"cost model of a node tick (learn |Gamma_t| = 32, predict 7 taus; float64 weights; memory bandwidth "
        f"{bandwidth / 1e9:.1f} GB/s, numpy copy); run kernels, and the plain kernels in alternation",
        ["questions", "weights (MB)", "rows read (learn + publish)", "bytes / tick (MB)", "limit (ms)",
         "measured p50 (ms)", "fraction of limit", "plain kernels p50 (ms)", "plain fraction", "speed-up"],
        formats={"weights (MB)": "{:.1f}", "bytes / tick (MB)": "{:.2f}", "limit (ms)": "{:.3f}",
                 "measured p50 (ms)": "{:.3f}", "fraction of limit": "{:.2f}", "plain kernels p50 (ms)": "{:.3f}",
                 "plain fraction": "{:.2f}", "speed-up": "{:.1f}x"},
    )  # fmt: skip
    for r in rows:
        table.add(
            r["questions"], r["weights_mb"], f"{r['rows_learn']} + {r['rows_publish']}", r["tick_bytes"] / 1e6,
            r["limit_s"] * 1e3, r["tick_s"] * 1e3, r["fraction_of_limit"], r["plain_tick_s"] * 1e3,
            r["plain_fraction_of_limit"], r["speedup"],
        )  # fmt: skip
    return table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--questions", type=int, default=100, help="questions (issue 11: 100)")
    parser.add_argument("--horde-steps", type=int, default=300, help="steps timed for the Horde")
    parser.add_argument("--loop-steps", type=int, default=30, help="steps timed for the loop of single learners")
    parser.add_argument("--repeats", type=int, default=3, help="timings per learner; the best is kept")
    parser.add_argument("--core", type=int, default=None, help="the core to pin to (default: the first allowed)")
    parser.add_argument("--lam", type=float, default=0.0, help="also time TD(lambda) at this lambda in (0, 0.999]")
    parser.add_argument(
        "--cost-model", action="store_true", help="also a node tick's bytes, flops and memory-bandwidth limit"
    )
    parser.add_argument(
        "--cost-questions", default="100,300,1000,3000", help="questions of the cost model's ticks (comma-separated)"
    )


def run(args: argparse.Namespace) -> Report:
    from gamma_net_core.cli import UsageError
    from gamma_net_studies.bench.linear import loadavg, machine, pin_to_one_core

    for name in ("questions", "horde_steps", "loop_steps", "repeats"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be >= 1; got {getattr(args, name)}")
    # Refused before any array is made: numpy's own refusal ("Unable to allocate 224 GiB") is a traceback.
    needed = bytes_needed(
        questions=args.questions,
        steps=max(args.horde_steps, args.loop_steps),
        features=ARM_CODER["memory_size"] + 1,
    )
    memory = _memory_bytes()
    if memory is not None and needed > memory:
        raise UsageError(
            f"--questions {args.questions} needs about {needed / 2**30:,.1f} GiB (cumulants and Autostep's "
            f"per-feature arrays); this machine has {memory / 2**30:,.1f} GiB"
        )
    if not 0.0 <= args.lam <= 0.999:  # also refuses nan
        raise ValueError(f"--lam must be in [0, 0.999]; got {args.lam}")
    try:
        cost_questions = [int(q) for q in args.cost_questions.split(",")] if args.cost_model else []
    except ValueError:
        raise ValueError(
            f"--cost-questions must be whole numbers separated by commas; got {args.cost_questions!r}"
        ) from None
    if any(q < 1 for q in cost_questions):
        raise ValueError(f"--cost-questions must be >= 1 each; got {args.cost_questions!r}")
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    core = pin_to_one_core(args.core)
    try:
        r = measure(
            questions=args.questions,
            horde_steps=args.horde_steps,
            loop_steps=args.loop_steps,
            repeats=args.repeats,
            lam=args.lam,
        )
        bandwidth = memory_bandwidth() if cost_questions else None
        costs = [measure_cost(q, bandwidth=bandwidth) for q in cost_questions]
    finally:
        if allowed is not None:
            os.sched_setaffinity(0, allowed)
    table = Table(
        f"Horde learner steps per second, {r['questions']} questions x |Gamma_t| = {r['gamma_t']} "
        f"(one core: {core}; best of {args.repeats})",
        ["learner", "steps/s", "x loop"],
        formats={"steps/s": "{:,.1f}", "x loop": "{:.1f}x"},
    )
    table.add(f"loop of {r['questions']} LinearGammaNet.learn", r["loop_steps_per_s"], 1.0)
    table.add("HordeLearner.learn (constant alpha)", r["horde_steps_per_s"], r["ratio"])
    table.add("HordeLearner.learn (constant alpha, plain kernels)", r["horde_plain_steps_per_s"], r["plain_ratio"])
    table.add("HordeLearner.learn (Autostep)", r["horde_autostep_steps_per_s"], r["autostep_ratio"])
    if r["horde_lambda_steps_per_s"] is not None:
        table.add(f"HordeLearner.learn (TD(lambda), lam {r['lam']})", r["horde_lambda_steps_per_s"], r["lambda_ratio"])
    goals = Table("goals (issue 11)", ["goal", "measured", "met"])
    goals.add(f"Horde >= {GOAL_RATIO:.0f}x the loop", f"{r['ratio']:.1f}x", r["ratio"] >= GOAL_RATIO)
    goals.add(
        f"Horde >= {GOAL_STEPS_PER_SECOND:.0f} steps/s",
        f"{r['horde_steps_per_s']:,.1f}",
        r["horde_steps_per_s"] >= GOAL_STEPS_PER_SECOND,
    )
    if r["horde_lambda_steps_per_s"] is not None:
        rate = r["horde_lambda_steps_per_s"]
        goals.add(
            f"TD(lambda) Horde >= {GOAL_STEPS_PER_SECOND:.0f} steps/s", f"{rate:,.1f}", rate >= GOAL_STEPS_PER_SECOND
        )
    tables = [table, goals]
    if costs:
        tables.append(cost_model_table(costs, bandwidth))
    data = {"core": core, **r, "machine": machine()}
    if costs:
        data.update(memory_bandwidth_bytes_per_s=bandwidth, cost_model=costs, loadavg=loadavg())
    return Report(tables=tables, data=data)
