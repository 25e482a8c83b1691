"""Run learners over the zoo's problems and measure their error against the true values.

The error of a learner on a problem at timescale tau is the relative RMSE over the problem's
evaluation states, weighted by the on-policy state distribution d:

    relative RMSE(tau) = sqrt(sum_s d(s) (v_hat(s, gamma) - v(s, gamma))^2) / sqrt(sum_s d(s) v(s, gamma)^2)

So predicting 0 everywhere scores 1.0 at every tau, an exact learner 0, and a score above 1 is
worse than predicting 0. Each (problem, seed) draws one stream that every learner learns from;
learners are fed it whole (``recording``) or one transition at a time (``online``).

Use::

    results = run_zoo(["random_walk_19"], ["linear", "td0_fixed"], steps=20_000, seeds=[0, 1])
    mean_errors(results)     # {(problem, learner, mode): [G] mean over seeds}
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from gamma_net_core.timescales import gamma_from_tau
from gamma_net_core.zoo import learners as learners_lib
from gamma_net_core.zoo import problems as problems_lib
from gamma_net_core.zoo.learners import ZooLearner
from gamma_net_core.zoo.problems import Problem, Truth

#: Timescales the zoo measures, in steps: the paper's probes (1, 2, 5, 10, 20, 40, 60, 80, 100) and between them.
TAUS = (1.0, 2.0, 3.0, 5.0, 7.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0)
#: Where on the stream a learner that has learning curves (``ZooLearner.curves``) is measured besides its end, as
#: fractions of the steps: the curve TD(lambda) is compared with TD(0) on.
CURVE_AT = (0.1, 1.0 / 3.0, 2.0 / 3.0)


@dataclass(frozen=True)
class Tier:
    """A named budget: which problems and learners, how long the streams, how many seeds."""

    name: str
    problems: tuple[str, ...]  # registry names (gamma_net_core.zoo.problems)
    learners: tuple[str, ...]  # registry names (gamma_net_core.zoo.learners)
    steps: int  # transitions per stream
    seeds: int  # seeds 0 .. seeds - 1
    modes: tuple[str, ...] = learners_lib.MODES  # ways of feeding a learner, where it has them
    taus: tuple[float, ...] = TAUS
    #: transitions the neural learner sees at most (a network on a CPU is slow); None: all
    neural_steps: int | None = None
    #: learners that also have a recording mode are fed online on the first this many seeds only (their
    #: online updates equal their recording's; those seeds check it, the rest of the budget goes to more
    #: seeds); None: every seed
    online_seeds: int | None = None
    #: fractions of ``steps`` where learning curves are measured besides the end (:data:`CURVE_AT`)
    curve_at: tuple[float, ...] = CURVE_AT


TIERS: dict[str, Tier] = {
    "small": Tier(
        name="small",
        problems=("random_walk_5", "rare_ring_10", "ar1_x", "cartpole"),
        learners=("linear", "linear_lam0.5", "td0_fixed", "horde", "neural"),
        steps=1500,
        seeds=1,
        taus=(1.0, 10.0, 100.0),
        neural_steps=300,
    ),
    "full": Tier(
        name="full",
        problems=tuple(name for name in problems_lib.PROBLEMS),
        learners=(
            "linear",
            "linear_tiles",
            "linear_lam0.5",
            "linear_lam0.9",
            "td0_fixed",
            "horde",
            "neural",
            "neural_tiles",
            "linear_decay",
            "td0_fixed_decay",
        ),
        steps=30_000,
        seeds=5,
        # NeuralConfig() learns from its 1,000th step, once every 8: 2,875 updates, about 8 s of CPU a run
        neural_steps=24_000,
        online_seeds=1,
    ),
}


@dataclass
class Result:
    """One learner's error on one problem and seed, fed one way."""

    problem: str
    learner: str
    mode: str
    seed: int
    taus: list[float]
    error: list[float]  # relative RMSE at each tau
    seconds: float  # wall time of training and predicting
    cpu_seconds: float  # processor time of this process for the same (what the budget is; wall time grows with load)
    note: str = ""  # why a run has no numbers (a learner that failed), else empty
    #: more measurements; ``curve``: the learning curve, ``{"steps": [C], "error": [C][G]}`` (its last point the end)
    extra: dict = field(default_factory=dict)


def relative_rmse(predictions: np.ndarray, truth: Truth) -> np.ndarray:
    """Relative RMSE [G] of ``predictions`` [N, G] against ``truth``, weighted by its state distribution.

    A tau where every true value is 0 scores the plain weighted RMSE (there is nothing to divide by).
    """
    predictions = np.asarray(predictions, dtype=np.float64)
    if predictions.shape != truth.values.shape:
        raise ValueError(f"predictions must be {truth.values.shape} like the true values; got {predictions.shape}")
    err = np.sqrt(truth.weights @ (predictions - truth.values) ** 2)
    scale = np.sqrt(truth.weights @ truth.values**2)
    return err / np.where(scale > 0.0, scale, 1.0)


def truth_error(truth: Truth) -> np.ndarray:
    """The relative RMSE [G] the truth has by its own Monte-Carlo noise (0 where exact): a floor for every learner."""
    if truth.stderr is None:
        return np.zeros(truth.taus.shape[0])
    scale = np.sqrt(truth.weights @ truth.values**2)
    return np.sqrt(truth.weights @ truth.stderr**2) / np.where(scale > 0.0, scale, 1.0)


def _seed(*parts) -> np.random.SeedSequence:
    return np.random.SeedSequence([zlib.crc32(str(p).encode()) for p in parts])


def run_zoo(
    problems: Sequence[str | Problem],
    learners: Sequence[str | ZooLearner],
    *,
    steps: int,
    seeds: Sequence[int] = (0,),
    taus: Sequence[float] = TAUS,
    modes: Sequence[str] = learners_lib.MODES,
    neural_steps: int | None = None,
    online_seeds: int | None = None,
    curve_at: Sequence[float] = CURVE_AT,
    workers: int = 1,
    progress: Callable[[str, int, int, list[Result]], None] | None = None,
) -> list[Result]:
    """Train every learner on every problem and seed, each way it can be fed; measure the relative RMSE.

    Args:
      problems: registry names or :class:`~gamma_net_core.zoo.problems.Problem` objects.
      learners: registry names or :class:`~gamma_net_core.zoo.learners.ZooLearner` objects.
      steps: transitions per stream.
      seeds: each seed draws one stream per problem and the learners' randomness (tile offsets, Gamma_t), both
        shared by every learner (common random numbers).
      taus: the timescales measured, in steps.
      modes: ``recording`` and / or ``online``.
      neural_steps: transitions a neural learner sees at most (None: all).
      online_seeds: feed ``online`` on the first this many seeds only (None: all); a learner that has no
        ``recording`` mode is fed online on every seed.
      curve_at: fractions of ``steps`` where a learner with learning curves is also measured (``Result.extra``).
      workers: processes working on (problem, seed) pairs side by side; the results do not depend on it.
      progress: called as ``progress(label, done, total, results)`` as each (problem, seed) pair finishes,
        with that pair's results (a long run can keep them as they come).

    Returns:
      One :class:`Result` per (problem, learner, mode, seed), in that order. A learner that fails on a
      problem (diverges, refuses its input) gives NaN errors and the reason in ``note``.
    """
    problem_objs = [problems_lib.make(p) if isinstance(p, str) else p for p in problems]
    learner_objs = [learners_lib.make(name) if isinstance(name, str) else name for name in learners]
    for mode in modes:
        if mode not in learners_lib.MODES:
            raise ValueError(f"unknown mode {mode!r}; known: {', '.join(learners_lib.MODES)}")
    if neural_steps is not None:
        for learner in learner_objs:
            if isinstance(learner, learners_lib.NeuralLearner) and learner.budget is None:
                learner.budget = neural_steps
    seeds = [int(s) for s in seeds]
    checkpoints = tuple(sorted({round(f * steps) for f in curve_at} - {0, steps}))
    if any(not 0.0 < f < 1.0 for f in curve_at):
        raise ValueError(f"curve_at must be fractions of the steps in (0, 1); got {tuple(curve_at)}")
    # seed by seed, so that the first results cover every problem
    jobs = [
        _Job(problem, learner_objs, steps, seed, tuple(float(t) for t in taus), tuple(modes),
             online_seeds is None or i < online_seeds, checkpoints)
        for i, seed in enumerate(seeds)
        for problem in problem_objs
    ]  # fmt: skip
    done: dict[int, list[Result]] = {}
    if workers <= 1 or len(jobs) <= 1:
        for k, job in enumerate(jobs):
            done[k] = job()
            if progress is not None:
                progress(f"{job.problem.name} seed {job.seed}", len(done), len(jobs), done[k])
    else:
        import concurrent.futures
        import multiprocessing

        # spawn, not fork: a forked torch or numba runtime may hang in the child
        context = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(
            min(workers, len(jobs)), mp_context=context, initializer=one_thread
        ) as pool:
            futures = {pool.submit(job): k for k, job in enumerate(jobs)}
            for future in concurrent.futures.as_completed(futures):
                k = futures[future]
                done[k] = future.result()
                if progress is not None:
                    progress(f"{jobs[k].problem.name} seed {jobs[k].seed}", len(done), len(jobs), done[k])
    order = sorted(range(len(jobs)), key=lambda k: (problem_objs.index(jobs[k].problem), jobs[k].seed))
    return [r for k in order for r in done[k]]


@dataclass
class _Job:
    """Every learner on one problem and seed (one stream): the unit a worker process runs."""

    problem: Problem
    learners: list[ZooLearner]
    steps: int
    seed: int
    taus: tuple[float, ...]
    modes: tuple[str, ...]
    online: bool
    checkpoints: tuple[int, ...] = ()  # steps where a learner with curves is measured besides the end

    def __call__(self) -> list[Result]:
        taus = np.asarray(self.taus)
        gammas = gamma_from_tau(taus)
        problem = self.problem
        truth = problem.truth(taus)
        data = problem.stream(self.steps, np.random.default_rng(_seed("stream", problem.name, self.seed)))
        results = []
        for learner in self.learners:
            for mode in learner.modes:
                # a learner fed only online (the Horde) keeps every seed
                if mode not in self.modes or (mode == "online" and not self.online and "recording" in learner.modes):
                    continue
                # common random numbers: every learner gets the same tile offsets and draws, so differences are theirs
                rng = np.random.default_rng(_seed("learner", problem.name, self.seed))
                started, cpu = time.perf_counter(), time.process_time()
                note = ""
                curve: dict[int, list[float]] = {}
                options = {}
                if learner.curves and self.checkpoints:

                    def at_checkpoint(step, predict, curve=curve):
                        curve[int(step)] = relative_rmse(predict(truth.obs, gammas), truth).tolist()

                    options = {"checkpoints": self.checkpoints, "at_checkpoint": at_checkpoint}
                try:
                    predict = learner.train(problem, data, mode=mode, rng=rng, gammas=gammas, **options)
                    error = relative_rmse(predict(truth.obs, gammas), truth)
                except (FloatingPointError, ValueError, RuntimeError) as exc:
                    error = np.full(taus.shape[0], np.nan)
                    note = f"{type(exc).__name__}: {exc}"[:300]
                seconds = round(time.perf_counter() - started, 3)
                cpu = round(time.process_time() - cpu, 3)
                extra = {}
                if options and not note:
                    curve[int(data.steps)] = error.tolist()
                    extra["curve"] = {"steps": sorted(curve), "error": [curve[k] for k in sorted(curve)]}
                results.append(Result(problem.name, learner.name, mode, self.seed, taus.tolist(), error.tolist(),
                                      seconds, cpu, note, extra))  # fmt: skip
        return results


def one_thread() -> None:
    """One thread for torch in this process: the zoo's networks are small, and worker processes share the cores."""
    import torch

    torch.set_num_threads(1)


def mean_errors(results: Sequence[Result]) -> dict[tuple[str, str, str], np.ndarray]:
    """The mean over seeds of each (problem, learner, mode)'s errors [G] (NaN where a seed failed)."""
    groups: dict[tuple[str, str, str], list[list[float]]] = {}
    for r in results:
        groups.setdefault((r.problem, r.learner, r.mode), []).append(r.error)
    return {key: np.mean(np.asarray(rows, dtype=np.float64), axis=0) for key, rows in groups.items()}


def mean_curves(results: Sequence[Result]) -> dict[tuple[str, str, str], tuple[np.ndarray, np.ndarray]]:
    """The mean over seeds of each (problem, learner, mode)'s learning curve: (steps [C], errors [C, G]), for
    those that have one on every seed."""
    groups: dict[tuple[str, str, str], list[Result]] = {}
    for r in results:
        groups.setdefault((r.problem, r.learner, r.mode), []).append(r)
    out = {}
    for key, runs in groups.items():
        curves = [r.extra.get("curve") for r in runs]
        if all(c is not None and c["steps"] == curves[0]["steps"] for c in curves):
            steps = np.asarray(curves[0]["steps"])
            out[key] = (steps, np.mean(np.asarray([c["error"] for c in curves], dtype=np.float64), axis=0))
    return out


def run_tier(tier: Tier | str, *, seeds: int | None = None, workers: int = 1, progress=None) -> list[Result]:
    """:func:`run_zoo` on a :data:`TIERS` budget (``seeds`` overrides its count)."""
    if isinstance(tier, str):
        if tier not in TIERS:
            raise ValueError(f"unknown zoo tier {tier!r}; known: {', '.join(TIERS)}")
        tier = TIERS[tier]
    return run_zoo(
        tier.problems, tier.learners, steps=tier.steps, seeds=range(seeds or tier.seeds), taus=tier.taus,
        modes=tier.modes, neural_steps=tier.neural_steps, online_seeds=tier.online_seeds, curve_at=tier.curve_at,
        workers=workers, progress=progress,
    )  # fmt: skip
