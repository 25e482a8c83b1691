"""`gamma-net square-wave`: the paper's square-wave study (section "Square-wave", Figure "Square Wave").

A linear Γ-net learns the returns of a square wave (period 100, ±1) from its phase, tile
coded with 20 tilings of width 1.0, 20 of 0.5 and 30 of 0.1 jointly with the timescale
inputs. Each run trains for ``steps`` steps (paper: 50k); its error at each probe tau is
the MSE of the online predictions V(S_t, gamma) against the exact return G_t(gamma) over
the last ``last`` steps (paper: 5k). Three comparisons, as in the paper's figure, each
against the reference configuration (gamma and tau inputs, Gamma_t of 6 drawn on both
scales, loss scaling on), which is run once and shared:

- inputs: timescale input gamma, tau / 100, or both;
- distribution: the 4 drawn timescales of Gamma_t all on the gamma scale, all on the tau
  scale, or 2 + 2 (tau in {1, 100} always included);
- scaling: loss scaling on (the weights learn f = (1 - gamma) V, predictions V = f / (1 - gamma)) or off.

The paper gives no step size for this experiment; the default, alpha = 0.5 / 70 active
features, is the largest round value that was stable for every series here: alpha = 0.7
diverged with the gamma input alone and 1.0 with either input alone (the summed updates of
the timescales in Gamma_t fall on shared tiles). Stability does not depend on loss scaling:
for a linear learner only the cumulant's size changes with it.
Runs are seeded from (seed, series, run) and spread over worker processes.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import pathlib
import time
from dataclasses import dataclass

import numpy as np

from gamma_net_core.cli import check, check_range, output_dir
from gamma_net_core.report import Report, Table, round_significant, write_json
from gamma_net_core.timescales import PROBE_TAUS

#: The paper's probe timescales (Table 1), as tau in steps.
#: Timescales shown in the predictions figures, as tau.
FIGURE_TAUS = (1.0, 5.0, 20.0, 60.0, 100.0)
#: Steps of run 0 shown in the predictions figures (the end of training).
FIGURE_STEPS = 300
#: Final steps whose errors are averaged by default (the paper's 5k of 50k).
DEFAULT_LAST = 5_000


@dataclass(frozen=True)
class Series:
    """One configuration of the study: how timescales enter, how Gamma_t is drawn, loss scaling."""

    key: str
    timescale_input: str
    scale: str
    loss_scaling: bool


#: Every distinct configuration, run once; the index is part of each run's seed.
SERIES = (
    Series("reference", "both", "both", True),
    Series("input_gamma", "gamma", "both", True),
    Series("input_tau", "tau", "both", True),
    Series("draws_gamma", "both", "gamma", True),
    Series("draws_tau", "both", "tau", True),
    Series("unscaled", "both", "both", False),
)

#: comparison -> (label in the figure, series key); the reference is drawn in black.
COMPARISONS = {
    "inputs": (("gamma", "input_gamma"), ("tau", "input_tau"), ("both", "reference")),
    "distribution": (("gamma scale", "draws_gamma"), ("tau scale", "draws_tau"), ("both scales", "reference")),
    "scaling": (("scaled", "reference"), ("unscaled", "unscaled")),
}
TITLES = {
    "inputs": "Square wave: timescale input",
    "distribution": "Square wave: Gamma_t distribution",
    "scaling": "Square wave: loss scaling",
}


@dataclass(frozen=True)
class Budget:
    """How much to run: runs per series, steps per run, the final steps that are scored."""

    runs: int = 100
    steps: int = 50_000
    last: int = 5_000
    seed: int = 0
    step_size: float = 0.5


def learner_config(series: Series, step_size: float):
    """The paper's square-wave learner for one series."""
    from gamma_net_core.linear import GammaNetConfig

    return GammaNetConfig(
        state_low=(0.0,),
        state_high=(100.0,),
        tilings=(20, 20, 30),
        tile_widths=(1.0, 0.5, 0.1),
        memory_size=0,
        bias=False,
        step_size=step_size,
        step_size_decay_steps=0,
        loss_scaling=series.loss_scaling,
        timescale_input=series.timescale_input,
        tau_scale=100.0,
    )


def sampling(series: Series):
    """Gamma_t: tau in {1, 100} plus 4 drawn on the series' scale(s) (6 in all)."""
    from gamma_net_core.timescales import TimescaleSampling

    return TimescaleSampling.split(4, series.scale, tau_min=1.0, tau_max=100.0)


def run_one(task: tuple[int, int, Budget, bool]) -> tuple[int, int, np.ndarray, np.ndarray | None]:
    """One run of one series: its MSE at each probe tau, and (if asked) its final predictions.

    Returns:
      (series index, run, mse [n_probe], predictions [FIGURE_STEPS, n_probe] or None).
    """
    from gamma_net_core.linear import LinearGammaNet
    from gamma_net_core.signals.square_wave import SquareWave
    from gamma_net_core.timescales import TimescaleSampler, gamma_from_tau

    index, run, budget, keep_predictions = task
    series = SERIES[index]
    coder_seed, sampler_seed = np.random.SeedSequence([budget.seed, index, run]).spawn(2)
    net = LinearGammaNet(learner_config(series, budget.step_size), rng=np.random.default_rng(coder_seed))
    sampler = TimescaleSampler(sampling(series), np.random.default_rng(sampler_seed))
    wave = SquareWave()
    phases_t, cumulants, phases_tp1 = wave.transitions(budget.steps)
    probes = gamma_from_tau(np.array(PROBE_TAUS))
    record_from = budget.steps - max(budget.last, FIGURE_STEPS)
    predictions = net.learn_recording(
        states_t=phases_t.astype(np.float64),
        cumulants=cumulants,
        states_tp1=phases_tp1.astype(np.float64),
        timescales=sampler,
        probe_gammas=probes,
        record_from=record_from,
    )
    scored = slice(budget.steps - budget.last, budget.steps)
    targets = wave.returns(probes)[phases_t[scored]]
    mse = np.mean((predictions[-budget.last :] - targets) ** 2, axis=0)
    tail = predictions[-FIGURE_STEPS:] if keep_predictions else None
    return index, run, mse, tail


def run_study(budget: Budget, *, workers: int = 2, progress: bool = True) -> dict:
    """Every series' runs, spread over ``workers`` processes.

    Returns:
      ``{"mse": {series key: [runs, n_probe]}, "predictions": {series key: [FIGURE_STEPS, n_probe]},
      "seconds": wall time}``.
    """
    from gamma_net_core.tasks import TaskRunner, progress_bar

    tasks = [(i, r, budget, r == 0) for i in range(len(SERIES)) for r in range(budget.runs)]
    mse = {s.key: np.full((budget.runs, len(PROBE_TAUS)), np.nan) for s in SERIES}
    predictions: dict[str, np.ndarray] = {}
    started = time.perf_counter()
    # Each worker process imports numba afresh and loads the cached kernels.
    with (
        TaskRunner(workers if workers > 1 else 0) as runner,
        progress_bar(len(tasks), unit="run", desc="square-wave runs", enabled=progress) as bar,
    ):
        for index, run, errors, tail in runner.map_unordered(run_one, tasks, bar=bar):
            mse[SERIES[index].key][run] = errors
            if tail is not None:
                predictions[SERIES[index].key] = tail
    return {"mse": mse, "predictions": predictions, "seconds": time.perf_counter() - started}


def write_outputs(study: dict, budget: Budget, out: pathlib.Path) -> tuple[list[Table], list[str], dict]:
    """Figures, the JSON of every number and the printed tables, from a finished study."""
    from gamma_net_core import config as config_lib
    from gamma_net_core.evaluation import compare
    from gamma_net_core.plots import compact_png, plot_comparison, plot_predictions
    from gamma_net_core.signals.square_wave import SquareWave
    from gamma_net_core.timescales import gamma_from_tau

    out.mkdir(parents=True, exist_ok=True)
    taus = np.array(PROBE_TAUS)
    files: list[str] = []
    tables: list[Table] = []
    comparisons = {}
    wave = SquareWave()
    figure_cols = [PROBE_TAUS.index(t) for t in FIGURE_TAUS]
    steps = np.arange(budget.steps - FIGURE_STEPS, budget.steps)
    true_returns = wave.returns(gamma_from_tau(np.array(FIGURE_TAUS)))[wave.phases(FIGURE_STEPS, start=steps[0])]
    for name, members in COMPARISONS.items():
        comparison = compare({label: study["mse"][key] for label, key in members}, taus)
        comparisons[name] = comparison
        reference = next(label for label, key in members if key == "reference")
        path = plot_comparison(comparison, out / f"{name}.png", title=TITLES[name], reference=reference)
        files.append(str(compact_png(path)))
        shown = {label: study["predictions"][key][:, figure_cols] for label, key in members}
        path = plot_predictions(
            steps,
            true_returns,
            shown,
            gamma_from_tau(np.array(FIGURE_TAUS)),
            out / f"{name}_predictions.png",
            title=f"{TITLES[name]}: run 0, last {FIGURE_STEPS} steps",
        )
        files.append(str(compact_png(path)))
        table = Table(
            f"{TITLES[name]}: mean MSE over runs by tau (normalized bar: mean | variance)",
            ["series", "bar mean", "bar var", *[f"tau={t:g}" for t in PROBE_TAUS]],
        )
        for i, label in enumerate(comparison.names):
            table.add(label, comparison.bar_mean[i], comparison.bar_var[i], *comparison.mean[i].tolist())
        tables.append(table)

    data = {
        "study": "square-wave",
        "budget": dataclasses.asdict(budget),
        "probe_taus": list(PROBE_TAUS),
        "gamma_t": {s.key: dataclasses.asdict(sampling(s)) for s in SERIES},
        "learners": {s.key: config_lib.to_mapping(learner_config(s, budget.step_size)) for s in SERIES},
        "seconds": study["seconds"],
        "steps_per_second": len(SERIES) * budget.runs * budget.steps / study["seconds"],
        "comparisons": {name: c.to_json() for name, c in comparisons.items()},
        "mse_by_run": {key: values for key, values in study["mse"].items()},
    }
    files.append(str(write_json(out / "square_wave.json", data, digits=4, compact=True)))
    data = round_significant(data)
    summary = Table("square-wave study", ["comparison", "best (lowest bar mean)", "runs", "steps", "seconds"])
    for name, c in comparisons.items():
        summary.add(name, c.best(), budget.runs, budget.steps, round(study["seconds"], 1))
    tables.append(summary)
    return tables, files, data


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=100, help="runs per series (paper: 100)")
    parser.add_argument("--steps", type=int, default=50_000, help="training steps per run (paper: 50k)")
    parser.add_argument(
        "--last",
        type=int,
        default=None,
        help=f"final steps whose errors are averaged (default {DEFAULT_LAST}, the paper's; at most --steps / 10)",
    )
    parser.add_argument("--seed", type=int, default=0, help="runs are seeded from (seed, series, run)")
    parser.add_argument(
        "--step-size",
        type=float,
        default=0.5,
        help="alpha before dividing by the 70 active features (0.7 diverged with the gamma input alone)",
    )
    parser.add_argument("--workers", type=int, default=2, help="worker processes (1: run in this process)")
    parser.add_argument("--out", default="runs/square_wave", help="folder for the figures and square_wave.json")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> Report:
    check_range("--runs", args.runs, low=1)
    check(args.steps >= FIGURE_STEPS, f"--steps must be >= {FIGURE_STEPS} (the predictions figure); got {args.steps}")
    last = min(DEFAULT_LAST, args.steps // 10) if args.last is None else args.last
    check(1 <= last <= args.steps, f"--last must be in [1, --steps {args.steps}]; got {last}")
    check_range("--seed", args.seed, low=0)
    check_range("--workers", args.workers, low=1)
    check_range("--step-size", args.step_size, above=0.0)
    output_dir("--out", args.out)
    budget = Budget(runs=args.runs, steps=args.steps, last=last, seed=args.seed, step_size=args.step_size)
    workers = min(args.workers, os.cpu_count() or 1, len(SERIES) * args.runs)
    study = run_study(budget, workers=workers, progress=not args.no_progress)
    tables, files, data = write_outputs(study, budget, pathlib.Path(args.out))
    return Report(tables=tables, files=files, data={"comparisons": data["comparisons"], "seconds": data["seconds"]})
