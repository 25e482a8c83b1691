"""`gamma-net zoo`: score learners at their defaults on prediction problems with known values.

Prints, per problem and learner, the relative RMSE (1.0: no better than predicting 0) at a few
timescales and over three bands of tau, beside the fixed-gamma TD(0) baseline trained on each tau
alone; writes ``zoo.json`` (every seed's error at every tau) and ``zoo.png`` (error against tau, one
panel per problem) in ``--out``. See docs/zoo.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

import numpy as np

from gamma_net_core.report import Report, Table, write_json
from gamma_net_core.zoo import learners as learners_lib
from gamma_net_core.zoo import problems as problems_lib
from gamma_net_core.zoo import runner

#: Timescale bands of the table, in steps: short, middle, long.
BANDS = (("tau 1-5", 1.0, 5.0), ("tau 7-20", 7.0, 20.0), ("tau 30-100", 30.0, 100.0))
#: The baseline every learner is shown beside.
BASELINE = "td0_fixed"
#: The issue's bars for the default linear Γ-net, at every tau: at most this times the baseline's error ...
RATIO_BAR = 1.5
#: ... and below this error.
ERROR_BAR = 0.5
#: The Γ-net held to the bars, and TD(lambda)'s pair: lambda 0.9 against TD(0), on the learning curve at
#: tau >= LONG_TAU no worse (mean over the curve's points), at the end within RATIO_BAR at every tau.
GAMMA_NET, LAMBDA_NET, LONG_TAU = "linear", "linear_lam0.9", 30.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", required=True, help="folder for zoo.json and zoo.png (and zoo-partial.jsonl while it runs)"
    )
    parser.add_argument("--tier", default="small", choices=sorted(runner.TIERS), help="budget (default: small)")
    parser.add_argument("--seeds", type=int, default=None, help="seeds 0 .. N-1 (default: the tier's)")
    parser.add_argument("--steps", type=int, default=None, help="transitions per stream (default: the tier's)")
    parser.add_argument("--problems", nargs="+", default=None, help="registered problems (default: the tier's)")
    parser.add_argument("--learners", nargs="+", default=None, help="registered learners (default: the tier's)")
    parser.add_argument("--workers", type=int, default=1, help="processes side by side (default 1; 2 on 2 cores)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def run(args: argparse.Namespace) -> Report:
    from gamma_net_core.cli import UsageError, check_range, output_dir

    tier = runner.TIERS[args.tier]
    check_range("--seeds", args.seeds, low=1)
    check_range("--steps", args.steps, low=10)
    check_range("--workers", args.workers, low=1, high=64)
    problems = tuple(args.problems or tier.problems)
    learners = tuple(args.learners or tier.learners)
    for name in problems:
        if name not in problems_lib.PROBLEMS:
            raise UsageError(f"--problems: unknown zoo problem {name!r}; known: {', '.join(problems_lib.PROBLEMS)}")
    for name in learners:
        if name not in learners_lib.LEARNERS:
            raise UsageError(f"--learners: unknown zoo learner {name!r}; known: {', '.join(learners_lib.LEARNERS)}")
    out = output_dir("--out", args.out)
    tier = dataclasses.replace(
        tier, problems=problems, learners=learners, steps=args.steps or tier.steps, seeds=args.seeds or tier.seeds
    )
    from tqdm import tqdm

    out.mkdir(parents=True, exist_ok=True)
    partial = out / "zoo-partial.jsonl"
    partial.unlink(missing_ok=True)
    runner.one_thread()
    with tqdm(total=len(problems) * tier.seeds, desc="zoo", unit="stream", file=sys.stderr,
              disable=args.no_progress) as bar:  # fmt: skip

        def progress(label: str, done: int, total: int, results) -> None:
            # kept as they come: a long run stopped part way still has its finished streams
            with partial.open("a") as f:
                for r in results:
                    f.write(json.dumps(dataclasses.asdict(r)) + "\n")
            bar.set_postfix_str(label)
            bar.update(done - bar.n)

        results = runner.run_tier(tier, workers=args.workers, progress=progress)
    truth_floor = {name: runner.truth_error(problems_lib.make(name).truth(tier.taus)) for name in problems}
    data = {
        "tier": dataclasses.asdict(tier),
        "taus": list(tier.taus),
        "truth_error": {name: floor.tolist() for name, floor in truth_floor.items()},
        "results": [dataclasses.asdict(r) for r in results],
        "mean": _means_json(results),
        "online_minus_recording": door_differences(results),
        "checks": (found := checks(results, tier.taus)),
    }
    json_path = write_json(out / "zoo.json", data)
    partial.unlink(missing_ok=True)
    figure = plot_zoo(results, tier.taus, out / "zoo.png", title=f"zoo, tier {tier.name}: error against tau")
    tables = [error_table(results, tier.taus, truth_floor), summary_table(results, tier.taus)]
    if found["problems"]:
        tables.append(checks_table(found))
    failed = [r for r in results if r.note]
    doors = data["online_minus_recording"]
    summary = _summary(results, tier.taus)
    if doors:
        summary += "; online vs recording, largest error difference: " + ", ".join(
            f"{k} {v:.2g}" for k, v in doors.items()
        )
    if failed:
        summary += f"; {len(failed)} runs failed (see 'note' in zoo.json), e.g. {failed[0].learner} on " \
                   f"{failed[0].problem}: {failed[0].note[:120]}"  # fmt: skip
    if found["passed"]:
        summary += "; checks passed: " + ", ".join(f"{k} {v}" for k, v in found["passed"].items())
    return Report(tables=tables, data={"tier": tier.name, "mean": data["mean"], "online_minus_recording": doors,
                                       "checks": found},
                  files=[str(json_path), str(figure)], summary=summary)  # fmt: skip


def _means_json(results) -> list[dict]:
    return [
        {"problem": p, "learner": lrn, "mode": m, "error": v.tolist()}
        for (p, lrn, m), v in runner.mean_errors(results).items()
    ]


def _band(taus, errors: np.ndarray, low: float, high: float) -> float:
    taus = np.asarray(taus)
    inside = (taus >= low) & (taus <= high)
    return float(np.mean(errors[inside])) if inside.any() else float("nan")


def _at(taus, errors: np.ndarray, tau: float) -> float:
    taus = np.asarray(taus)
    hit = np.flatnonzero(np.isclose(taus, tau))
    return float(errors[hit[0]]) if hit.size else float("nan")


def error_table(results, taus, truth_floor: dict[str, np.ndarray] | None = None) -> Table:
    """Mean over seeds of the relative RMSE, per problem, learner and mode, at a few taus and in the bands.

    ``truth_floor``: a problem's own Monte-Carlo error (:func:`~gamma_net_core.zoo.runner.truth_error`), shown
    as a row "(truth noise)" where it is not 0.
    """
    shown = [t for t in (1.0, 10.0, 30.0, 100.0) if np.isclose(np.asarray(taus), t).any()]
    table = Table(
        "relative RMSE, mean over seeds (0: exact; 1: no better than predicting 0)",
        ["problem", "learner", "mode", "seeds", *[f"tau {t:g}" for t in shown], *[b[0] for b in BANDS]],
        formats={c: "{:.3f}" for c in [*[f"tau {t:g}" for t in shown], *[b[0] for b in BANDS]]},
    )
    floor = truth_floor or {}
    seeds = _seed_counts(results)
    previous = None
    for (problem, learner, mode), errors in runner.mean_errors(results).items():
        if problem != previous and np.any(floor.get(problem, 0.0)):
            noise = floor[problem]
            table.add(problem, "(truth noise)", "-", "-", *[_at(taus, noise, t) for t in shown],
                      *[_band(taus, noise, lo, hi) for _, lo, hi in BANDS])  # fmt: skip
        previous = problem
        table.add(problem, learner, mode, seeds[(problem, learner, mode)], *[_at(taus, errors, t) for t in shown],
                  *[_band(taus, errors, lo, hi) for _, lo, hi in BANDS])  # fmt: skip
    return table


def _seed_counts(results) -> dict[tuple[str, str, str], int]:
    counts: dict[tuple[str, str, str], int] = {}
    for r in results:
        counts[(r.problem, r.learner, r.mode)] = counts.get((r.problem, r.learner, r.mode), 0) + 1
    return counts


def summary_table(results, taus) -> Table:
    """Per learner and mode, over problems: the median band errors, and on how many problems it beats the baseline."""
    means = runner.mean_errors(results)
    baseline = {p: v for (p, lrn, m), v in means.items() if lrn == BASELINE}
    rows: dict[tuple[str, str], list[tuple[str, np.ndarray]]] = {}
    for (problem, learner, mode), errors in means.items():
        rows.setdefault((learner, mode), []).append((problem, errors))
    columns = [
        "learner",
        "mode",
        "seeds",
        *[f"median {b[0]}" for b in BANDS],
        "worst tau 30-100",
        f"long: within 1.5x {BASELINE}",
        f"every tau: within {RATIO_BAR:g}x {BASELINE}",
        f"every tau: below {ERROR_BAR:g}",
    ]
    table = Table(
        "over problems: median band error; the worst problem's long-band error; problems where the long band is "
        f"within 1.5 x the {BASELINE} baseline's",
        columns,
        formats={c: "{:.3f}" for c in columns[3:-3]},
    )
    seeds = _seed_counts(results)
    for (learner, mode), entries in rows.items():
        bands = np.array([[_band(taus, e, lo, hi) for _, lo, hi in BANDS] for _, e in entries])
        long = bands[:, -1]
        worst = entries[int(np.nanargmax(long))][0] if np.isfinite(long).any() else "-"
        near = [
            _band(taus, e, *BANDS[-1][1:]) <= 1.5 * _band(taus, baseline[p], *BANDS[-1][1:])
            for p, e in entries
            if p in baseline
        ]
        every_near = [bool(np.all(e <= RATIO_BAR * baseline[p])) for p, e in entries if p in baseline]
        every_low = [bool(np.all(e < ERROR_BAR)) for _, e in entries]
        fewest = min(seeds[(p, learner, mode)] for p, _ in entries)
        table.add(learner, mode, fewest, *np.nanmedian(bands, axis=0).tolist(),
                  f"{np.nanmax(long):.3f} ({worst})" if np.isfinite(long).any() else "nan",
                  f"{sum(near)}/{len(near)}", f"{sum(every_near)}/{len(every_near)}",
                  f"{sum(every_low)}/{len(every_low)}")  # fmt: skip
    return table


def _worst(values: np.ndarray, taus) -> tuple[float, float]:
    """The largest of ``values`` [G] (NaN counts as largest) and its tau."""
    values = np.asarray(values, dtype=np.float64)
    k = int(np.argmax(np.where(np.isnan(values), np.inf, values)))
    return float(values[k]), float(np.asarray(taus)[k])


def _ratio(errors: np.ndarray, reference: np.ndarray) -> np.ndarray:
    # a reference of exactly 0 (a learner exact at a tau) makes any error an infinite ratio, and 0 / 0 one
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((errors == 0.0) & (reference == 0.0), 1.0, errors / reference)


def checks(results, taus) -> dict:
    """The issue's bars, per problem, on the mean over seeds fed as a recording.

    - ``linear`` (the default linear Γ-net): at every tau at most :data:`RATIO_BAR` times the fixed-gamma
      baseline's error, and below :data:`ERROR_BAR`;
    - ``linear_lam0.9`` against ``linear`` (TD(0)): at every tau >= :data:`LONG_TAU` the mean over the
      learning curve's points (the end included) no larger, and at the end at most :data:`RATIO_BAR` times
      at every tau.

    Returns:
      ``{"problems": {problem: {check: {"value", "tau", "pass"}, ...}}, "passed": {check: "k/n"}}``; a check
      whose learners were not run is left out.
    """
    means = runner.mean_errors(results)
    curves = runner.mean_curves(results)
    taus = np.asarray(taus, dtype=np.float64)
    long = taus >= LONG_TAU
    problems: dict[str, dict] = {}
    for problem in dict.fromkeys(r.problem for r in results):
        row: dict[str, dict] = {}
        base = means.get((problem, BASELINE, "recording"))
        net = means.get((problem, GAMMA_NET, "recording"))
        if base is not None:
            value, tau = _worst(base, taus)
            row[f"{BASELINE} error"] = {"value": value, "tau": tau, "pass": bool(value < ERROR_BAR)}
        if base is not None and net is not None:
            value, tau = _worst(_ratio(net, base), taus)
            row[f"{GAMMA_NET} / {BASELINE}"] = {"value": value, "tau": tau, "pass": bool(value <= RATIO_BAR)}
        if net is not None:
            value, tau = _worst(net, taus)
            row[f"{GAMMA_NET} error"] = {"value": value, "tau": tau, "pass": bool(value < ERROR_BAR)}
        lam, td0 = curves.get((problem, LAMBDA_NET, "recording")), curves.get((problem, GAMMA_NET, "recording"))
        if lam is not None and td0 is not None and np.array_equal(lam[0], td0[0]) and long.any():
            ratio = _ratio(lam[1].mean(axis=0), td0[1].mean(axis=0))
            value, tau = _worst(np.where(long, ratio, -np.inf), taus)
            row[f"{LAMBDA_NET} curve"] = {"value": value, "tau": tau, "pass": bool(value <= 1.0)}
            value, tau = _worst(_ratio(lam[1][-1], td0[1][-1]), taus)
            row[f"{LAMBDA_NET} end"] = {"value": value, "tau": tau, "pass": bool(value <= RATIO_BAR)}
        if row:
            problems[problem] = row
    names = list(dict.fromkeys(name for row in problems.values() for name in row))
    passed = {
        name: f"{sum(row[name]['pass'] for row in problems.values() if name in row)}/"
        f"{sum(name in row for row in problems.values())}"
        for name in names
    }
    return {"problems": problems, "passed": passed}


def checks_table(found: dict) -> Table:
    """:func:`checks` as a table: per problem, each check's worst value over tau, at which tau, pass or FAIL."""
    names = list(found["passed"])
    bars = {
        f"{BASELINE} error": f"< {ERROR_BAR:g}",
        f"{GAMMA_NET} / {BASELINE}": f"<= {RATIO_BAR:g}",
        f"{GAMMA_NET} error": f"< {ERROR_BAR:g}",
        f"{LAMBDA_NET} curve": f"<= 1 at tau >= {LONG_TAU:g}",
        f"{LAMBDA_NET} end": f"<= {RATIO_BAR:g}",
    }
    table = Table(
        f"checks, worst over tau (at tau): {GAMMA_NET} within {RATIO_BAR:g}x {BASELINE} and below {ERROR_BAR:g} at "
        f"every tau; {LAMBDA_NET} / {GAMMA_NET} over the learning curve at tau >= {LONG_TAU:g} and at the end",
        ["problem", *[f"{name} ({bars.get(name, '')})" for name in names]],
    )
    for problem, row in found["problems"].items():
        cells = []
        for name in names:
            check = row.get(name)
            cells.append(
                "-"
                if check is None
                else f"{check['value']:.2f} ({check['tau']:g}) {'pass' if check['pass'] else 'FAIL'}"
            )
        table.add(problem, *cells)
    table.add("passed", *[found["passed"][name] for name in names])
    return table


def door_differences(results) -> dict[str, float]:
    """Per learner fed both ways: the largest difference between its online and recording errors on a seed
    fed both ways (the same updates: 0 up to rounding)."""
    by = {(r.problem, r.learner, r.mode, r.seed): np.asarray(r.error, dtype=np.float64) for r in results}
    out: dict[str, float] = {}
    for (problem, learner, mode, seed), online in by.items():
        recording = by.get((problem, learner, "recording", seed))
        if mode == "online" and recording is not None:
            diff = float(np.nanmax(np.abs(online - recording))) if np.isfinite(online).any() else float("nan")
            out[learner] = max(out.get(learner, 0.0), diff)
    return out


def _summary(results, taus) -> str:
    means = runner.mean_errors(results)
    worst = max(((v, k) for k, v in means.items() if k[1] != BASELINE and np.isfinite(v).any()),
                key=lambda x: np.nanmax(x[0]), default=None)  # fmt: skip
    if worst is None:
        return "zoo: no learner gave numbers"
    errors, (problem, learner, mode) = worst
    k = int(np.nanargmax(errors))
    return (
        f"zoo: {len(results)} runs; the largest error is {learner} ({mode}) on {problem}: "
        f"{errors[k]:.3g} at tau {taus[k]:g}"
    )


def plot_zoo(results, taus, path, *, title: str, mode: str = "recording"):
    """Error against tau, one panel per problem: each learner's mean over seeds (online where it has no
    recording mode), the baseline in black, predicting 0 as the dotted line at 1."""
    from gamma_net_core.plots import pyplot, save_figure

    plt = pyplot()
    means = runner.mean_errors(results)
    problems = list(dict.fromkeys(r.problem for r in results))
    learners = list(dict.fromkeys(r.learner for r in results))
    cols = min(4, len(problems))
    rows = -(-len(problems) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.8 * rows), squeeze=False, sharex=True)
    taus = np.asarray(taus)
    for ax, problem in zip(axes.flat, problems):
        for i, learner in enumerate(learners):
            errors = means.get((problem, learner, mode), means.get((problem, learner, "online")))
            if errors is None:
                continue
            base = learner == BASELINE
            ax.plot(taus, errors, "o-" if not base else "s--", markersize=2.5, linewidth=1.6 if base else 1.0,
                    color="black" if base else f"C{i}", label=learner)  # fmt: skip
        ax.axhline(1.0, color="gray", linestyle=":", linewidth=1.0)
        ax.set_xscale("log")
        ax.set_xticks([1, 10, 100], ["1", "10", "100"])
        ax.set_ylim(0.0, 2.0)
        ax.set_title(problem, fontsize=9, loc="left")
        ax.grid(alpha=0.3)
    for ax in axes.flat[len(problems) :]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("tau (steps)")
    for ax in axes[:, 0]:
        ax.set_ylabel("relative RMSE")
    axes.flat[0].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.suptitle(title + " (clipped at 2; dotted: predicting 0)", y=1.0 + 0.06 / rows)
    return save_figure(fig, path)
