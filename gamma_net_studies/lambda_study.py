"""`gamma-net lambda-study`: TD(lambda) and TD(Delta) beside the Γ-net and the fixed-timescale baselines.

Learning curves: the error of each learner's current predictions against the exact returns,
measured every ``steps / evaluations`` steps while it learns one stream, per probe tau:

    error(tau) = mean_t |V(S_t, gamma(tau)) - G_t(gamma(tau))| / mean_t |G_t(gamma(tau))|

over every state of the stream but the last 5 tau_max steps (whose returns the stream's end
truncates; the last half on a stream shorter than 10 tau_max). Three domains, each at its paper settings:

- square wave (period 100; the paper's tiling, alpha 0.5 / 70, Gamma_t of 6, tau in [1, 100]);
- the simulated arm (what `gamma-net arm simulate` records, generated here in memory: both joint
  positions in, the shoulder's speed as cumulant; the arm learner of ``config/arm.yaml``, alpha 0.1
  constant, Gamma_t of 32); scored at the paper's probe taus, as Table 2;
- the Horde of ``config/horde.yaml`` on the same arm stream: its four questions, among them the
  event question (the elbow's speed until the elbow passes 2.0 rad), whose return stops there.

Learners: the Γ-net with TD(0) on drawn Gamma_t (the paper's Algorithm 1), with TD(0) on the fixed
ladder only (a control), and with TD(lambda) for each ``--lams`` in both views: the forward view, a
Γ-net's default (truncated lambda-returns on the draws, :mod:`gamma_net_core.linear.lambda_return`),
and the backward view (traces on the fixed ladder, TD(0) on a draw beside it,
:mod:`gamma_net_core.linear.traces`); the default's lambda 0.1 is the control for the reach, returns
or traces about one step long. Per probe tau a fixed-timescale TD(0) learner (the paper's baseline),
and two TD(Delta) learners on the ladder of the probe taus (:mod:`gamma_net_core.linear.td_delta`):
one setting for every component (which is fixed-timescale TD(0), by construction) and per-component
settings (:data:`DELTA_LAMBDA`); for the Horde, TD(0), the ladder control and the same lambdas in the
backward view, the only one a Horde has. Each learner's wall time is kept (steps per second on a
loaded machine: a relative cost only).
Writes ``lambda_study.json`` and one PNG of learning curves per domain.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import pathlib
import time
import zlib
from typing import NamedTuple

import numpy as np

from gamma_net_core.report import Report, Table

PROBE_TAUS = (1.0, 2.0, 5.0, 10.0, 20.0, 40.0, 60.0, 80.0, 100.0)
#: A mean error above this (errors ten times the returns' size) is reported as unstable, not as a number.
UNSTABLE = 10.0
#: Taus drawn in each figure's panels.
FIGURE_TAUS = (5.0, 20.0, 100.0)
REPO = pathlib.Path(__file__).resolve().parents[1]


@dataclasses.dataclass(frozen=True)
class Budget:
    """How much to run (small enough for a loaded 2-core machine by default)."""

    square_steps: int = 20_000
    circuits: int = 20
    evaluations: int = 10
    #: 0.1 is the control: returns (or traces) about one step long, so what it gains over TD(0) is not the reach
    #: (in the backward view, its larger step: docs/results.md)
    lams: tuple[float, ...] = (0.1, 0.5, 0.9)
    seed: int = 0


def _errors(predictions: np.ndarray, returns: np.ndarray) -> np.ndarray:
    """[G]: mean |prediction - return| / mean |return| per timescale over the scored steps."""
    return np.mean(np.abs(predictions - returns), axis=0) / np.maximum(np.mean(np.abs(returns), axis=0), 1e-12)


def _scored(steps: int) -> int:
    """Steps whose returns are scored: all but the last 5 tau_max (truncated by the end; half on a tiny run)."""
    return steps - min(5 * int(max(PROBE_TAUS)), steps // 2)


def _chunks(steps: int, evaluations: int) -> list[tuple[int, int]]:
    edges = np.linspace(0, steps, evaluations + 1).astype(int)
    return [(int(a), int(b)) for a, b in itertools.pairwise(edges) if b > a]


class Variant(NamedTuple):
    """One Γ-net (or Horde) run: its lambda and view, or TD(0) on the fixed ladder alone (the control)."""

    name: str
    lam: float
    view: str
    only_ladder: bool


def _variants(budget: Budget, learner: str, views: tuple[str, ...]) -> list[Variant]:
    """TD(0) on drawn Gamma_t (the paper's), TD(0) on the fixed ladder only (the control that shows what
    training only the rungs costs between them), then each lambda in each of ``views``: the forward view
    (lambda-returns on the draws) and the backward view (traces on the ladder at alpha (1 - lambda), TD(0)
    on a draw beside it: about twice TD(0)'s step). A small lambda (the default's 0.1) is the control for
    the reach."""
    out = [
        Variant(f"{learner} TD(0)", 0.0, "forward", False),
        Variant(f"{learner} TD(0), fixed ladder", 0.0, "forward", True),
    ]
    for view in views:
        suffix = "" if view == "forward" or len(views) == 1 else ", backward view"
        out += [Variant(f"{learner} TD(λ={lam}){suffix}", lam, view, False) for lam in budget.lams]
    return out


#: TD(Delta)'s per-component settings in the study (Romoff et al. 2019: each difference its own horizon and
#: step): D_0 by TD(0) at alpha, every difference by TD(DELTA_LAMBDA) at alpha (1 - DELTA_LAMBDA).
DELTA_LAMBDA = 0.9


def _rng_of(seed: int, name: str) -> np.random.Generator:
    """A learner's own generator (tile offsets, draws), from the study's seed and its name.

    Its own, so that adding or leaving out a learner (``--lams``) changes no other learner's numbers:
    drawn in turn from one generator, the arm's TD(lambda) means moved by up to 0.02 when a lambda was
    added before them, which is the size of the differences the study reports.
    """
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def linear_curves(stream: dict, config, sampling, budget: Budget) -> dict:
    """Learning curves [evaluations, G] and seconds of every linear learner on one stream.

    Args:
      stream: ``states_t``, ``cumulants``, ``states_tp1`` [T, ...], ``returns`` [T, G] at the probe taus.
      config: the Γ-net's :class:`~gamma_net_core.linear.GammaNetConfig` (TD(0); lambdas are set here).
      sampling: its Gamma_t sampling.
    """
    from gamma_net_core.linear import FixedTimescaleTD, LinearGammaNet, fixed_timescale_config, uses_ladder
    from gamma_net_core.linear.td_delta import TDDelta
    from gamma_net_core.timescales import TimescaleSampler

    gammas = 1.0 - 1.0 / np.array(PROBE_TAUS)
    s_t, c, s_tp1, returns = stream["states_t"], stream["cumulants"], stream["states_tp1"], stream["returns"]
    T = c.shape[0]
    scored = slice(0, returns.shape[0])
    chunks = _chunks(T, budget.evaluations)
    learners = {}
    for name, lam, view, only_ladder in _variants(budget, "Γ-net", ("forward", "backward")):
        cfg = dataclasses.replace(config, lam=lam, lambda_view=view)
        rng = _rng_of(budget.seed, name)
        net = LinearGammaNet(cfg, rng=np.random.default_rng(rng.integers(2**32)))
        # The ladder for the control (TD(0) on it alone, nothing drawn) and for the backward view's traces.
        sampler = TimescaleSampler(sampling, np.random.default_rng(rng.integers(2**32)), fixed=uses_ladder(cfg))

        def learn(a, b, net=net, sampler=sampler, only_ladder=only_ladder):
            timescales = np.broadcast_to(sampler.ladder, (b - a, sampler.ladder.size)) if only_ladder else sampler
            net.learn_recording(states_t=s_t[a:b], cumulants=c[a:b], states_tp1=s_tp1[a:b], timescales=timescales)

        learners[name] = (learn, lambda net=net: net.predict(s_t[scored], gammas))
    rng = _rng_of(budget.seed, "fixed-timescale TD(0)")
    fixed = [
        FixedTimescaleTD(fixed_timescale_config(config, g), rng=np.random.default_rng(rng.integers(2**32)))
        for g in gammas
    ]

    def learn_fixed(a, b):
        for base in fixed:
            base.learn_recording(states_t=s_t[a:b], cumulants=c[a:b], states_tp1=s_tp1[a:b])

    learners["fixed-timescale TD(0)"] = (learn_fixed, lambda: np.column_stack([b.predict(s_t[scored]) for b in fixed]))
    own_lams = np.full(gammas.shape[0], DELTA_LAMBDA)
    own_lams[0] = 0.0
    own_steps = config.step_size * (1.0 - own_lams)
    for name, settings in (("TD(Δ)", {}), ("TD(Δ), per-component λ, α", {"lams": own_lams, "step_sizes": own_steps})):
        delta = TDDelta(dataclasses.replace(config, lam=0.0), gammas, rng=_rng_of(budget.seed, name), **settings)
        learners[name] = (
            lambda a, b, delta=delta: delta.learn_recording(states_t=s_t[a:b], cumulants=c[a:b], states_tp1=s_tp1[a:b]),
            lambda delta=delta: delta.predict(s_t[scored]),
        )
    out = {}
    for name, (learn, predict) in learners.items():
        curve, seconds, failed = [], 0.0, None
        for a, b in chunks:
            started = time.perf_counter()
            try:
                learn(a, b)
            except FloatingPointError as exc:  # a learner that diverges is reported, not hidden
                failed = f"diverged at step {a}..{b}: {exc}"
                break
            seconds += time.perf_counter() - started
            curve.append(_errors(predict(), returns).tolist())
        out[name] = {"steps": [b for _, b in chunks[: len(curve)]], "errors": curve, "seconds": seconds,
                     "failed": failed}  # fmt: skip
    return out


def square_wave_stream(steps: int) -> dict:
    from gamma_net_core.returns import discounted_returns
    from gamma_net_core.signals.square_wave import SquareWave

    phases_t, cumulants, phases_tp1 = SquareWave().transitions(steps)
    returns = discounted_returns(cumulants, 1.0 - 1.0 / np.array(PROBE_TAUS))
    keep = _scored(steps)
    return {
        "states_t": phases_t.astype(np.float64)[:, None],
        "cumulants": cumulants,
        "states_tp1": phases_tp1.astype(np.float64)[:, None],
        "returns": returns[:keep],
    }


def arm_recording(circuits: int, seed: int):
    """The simulated operator's recording (as `gamma-net arm simulate` makes it, in memory) and its settings."""
    from gamma_net_core.signals.arm_recording import simulate_arm
    from gamma_net_studies.arm_simulate import load_settings

    settings = load_settings(str(REPO / "config" / "arm.yaml"))
    return simulate_arm(circuits=circuits, rng=np.random.default_rng(seed), **settings)


def arm_stream(recording) -> tuple[dict, object, object]:
    """The predictor's inputs (both joints, normalized as config/arm.yaml says), shoulder speed, exact returns."""
    from gamma_net_core.config import load_config
    from gamma_net_core.linear import GammaNetConfig
    from gamma_net_core.returns import discounted_returns
    from gamma_net_core.timescales import TimescaleSampling

    params = REPO / "config" / "arm.yaml"
    config = load_config(GammaNetConfig, params, "predictor", "learner")
    sampling = load_config(TimescaleSampling, params, "predictor", "timescales")
    low, high = np.array([-1.4, 1.1]), np.array([-0.1, 2.3])  # config/arm.yaml's joints input_low / input_high
    inputs = np.clip((recording.position - low) / (high - low), 0.0, 1.0)
    speed = np.abs(recording.velocity[:, 0])
    returns = discounted_returns(speed[1:], 1.0 - 1.0 / np.array(PROBE_TAUS))
    keep = _scored(speed.shape[0] - 1)
    stream = {"states_t": inputs[:-1], "cumulants": speed[1:], "states_tp1": inputs[1:], "returns": returns[:keep]}
    return stream, config, sampling


def horde_curves(recording, budget: Budget) -> dict:
    """Learning curves [evaluations, Q, G] of config/horde.yaml's questions for TD(0) and each lambda."""
    from gamma_net_core.horde.learner import HordeLearner
    from gamma_net_core.horde.questions import load_questions
    from gamma_net_core.returns import discounted_returns
    from gamma_net_core.timescales import ladder

    spec = load_questions(REPO / "config" / "horde.yaml")
    joints = {"shoulder": 0, "elbow": 1}
    inputs = recording.position[:, [joints["shoulder"], joints["elbow"]]]
    T = inputs.shape[0] - 1
    columns = {"velocity": recording.velocity, "effort": recording.effort, "position": recording.position}
    cumulants = np.empty((T + 1, len(spec.questions)))
    continuations = np.ones_like(cumulants)
    for q, question in enumerate(spec.questions):
        kind, joint = question.cumulant.field.rstrip("]").split("[")
        cumulants[:, q] = [question.cumulant.apply(v) for v in columns[kind][:, joints[joint]]]
        if question.termination is not None:
            kind, joint = question.termination.field.rstrip("]").split("[")
            continuations[:, q] = [question.termination.continuation(v) for v in columns[kind][:, joints[joint]]]
    gammas = 1.0 - 1.0 / np.array(PROBE_TAUS)
    keep = _scored(T)
    returns = np.stack(
        [discounted_returns(cumulants[1:, q], gammas, terminals=continuations[1:, q] == 0.0)[:keep]
         for q in range(cumulants.shape[1])], axis=1,
    )  # fmt: skip  # [keep, Q, G]
    chunks = _chunks(T, budget.evaluations)
    out = {"questions": list(spec.names)}
    ladder_gammas = ladder(spec.timescales)
    for name, lam, _, only_ladder in _variants(budget, "Horde", ("backward",)):
        learner = dataclasses.replace(spec.learner, lam=lam, lambda_view="backward")
        horde = HordeLearner.from_spec(dataclasses.replace(spec, learner=learner))
        curve, seconds, failed = [], 0.0, None
        for a, b in chunks:
            started = time.perf_counter()
            try:
                for t in range(a, b):
                    # The control trains the ladder alone; None: Gamma_t from the Horde's sampler (with lam > 0
                    # the ladder, then a draw).
                    g = ladder_gammas if only_ladder else None
                    horde.learn(inputs[t], cumulants[t + 1], inputs[t + 1], continuations[t + 1], gammas=g)
            except FloatingPointError as exc:
                failed = f"diverged at step {t}: {exc}"
                break
            seconds += time.perf_counter() - started
            predicted = np.stack([horde.predict(x, gammas) for x in inputs[:keep]])  # [keep, Q, G]
            curve.append([_errors(predicted[:, q], returns[:, q]).tolist() for q in range(returns.shape[1])])
        out[name] = {"steps": [b for _, b in chunks[: len(curve)]], "errors": curve, "seconds": seconds,
                     "failed": failed}  # fmt: skip
    return out


def plot_curves(path: pathlib.Path, title: str, curves: dict, *, question: int | None = None) -> pathlib.Path:
    """One panel per tau in FIGURE_TAUS plus the mean over the probe taus: error vs steps, one line per learner."""
    from gamma_net_core.plots import compact_png, pyplot

    plt = pyplot()
    taus = list(PROBE_TAUS)
    fig, axes = plt.subplots(1, len(FIGURE_TAUS) + 1, figsize=(4 * (len(FIGURE_TAUS) + 1) + 2.6, 3.4), sharex=True)
    colours: dict[str, str] = {}
    for name, run in curves.items():
        if not isinstance(run, dict) or not run["errors"]:
            continue
        errors = np.array(run["errors"])
        if question is not None:
            errors = errors[:, question]
        # One colour per learner, a view's two lines alike: the backward view dashed beside the forward view.
        base = name.removesuffix(", backward view")
        style = {"color": colours.setdefault(base, f"C{len(colours) % 10}"), "ls": "--" if base != name else "-"}
        if errors[-1].mean() > UNSTABLE:
            name += " (unstable: off the chart)"
        for ax, tau in zip(axes, FIGURE_TAUS):
            ax.plot(run["steps"], errors[:, taus.index(tau)], label=name, **style)
        axes[-1].plot(run["steps"], errors.mean(axis=1), label=name, **style)
    for ax, tau in zip(axes, FIGURE_TAUS):
        ax.set_title(f"τ = {tau:g}")
    axes[-1].set_title("mean over the 9 probe τ")
    for ax in axes:
        ax.set_xlabel("steps")
        ax.locator_params(axis="x", nbins=4)
        ax.set_yscale("log")
        ax.set_ylim(1e-3, 3.0)  # above 1 a learner is worse than predicting 0
    axes[0].set_ylabel("|V − G| / |G| (mean)")
    axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return compact_png(path)


def run_study(budget: Budget, out: pathlib.Path) -> tuple[dict, list[pathlib.Path]]:
    from gamma_net_studies.square_wave import SERIES, learner_config, sampling

    data: dict = {"budget": dataclasses.asdict(budget), "probe_taus": list(PROBE_TAUS)}
    reference = SERIES[0]
    data["square_wave"] = linear_curves(
        square_wave_stream(budget.square_steps), learner_config(reference, 0.5), sampling(reference), budget
    )
    recording = arm_recording(budget.circuits, budget.seed)
    stream, config, arm_sampling = arm_stream(recording)
    data["arm"] = linear_curves(stream, config, arm_sampling, budget)
    data["arm_steps"] = int(stream["cumulants"].shape[0])
    data["horde"] = horde_curves(recording, budget)
    files = [
        plot_curves(out / "lambda_square_wave.png", "square wave: TD(λ), TD(Δ), Γ-net, fixed timescales",
                    data["square_wave"]),
        plot_curves(out / "lambda_arm.png", "simulated arm, shoulder speed", data["arm"]),
        plot_curves(out / "lambda_horde_event.png", "Horde: elbow speed until past 2 rad (the event question)",
                    data["horde"], question=data["horde"]["questions"].index("elbow_speed_until_past_2rad")),
    ]  # fmt: skip
    return data, files


def final_table(title: str, curves: dict, *, question: int | None = None) -> Table:
    columns = [f"τ {t:g}" for t in PROBE_TAUS]
    formats = {**dict.fromkeys(columns, "{:.3f}"), "mean": "{:.3f}", "steps/s": "{:,.0f}"}
    table = Table(title, ["learner", *columns, "mean", "steps/s"], formats=formats)
    for name, run in curves.items():
        if not isinstance(run, dict) or "errors" not in run:
            continue
        if not run["errors"]:
            table.add(name, *["diverged"] * (len(PROBE_TAUS) + 1), 0.0)
            continue
        last = np.array(run["errors"][-1] if question is None else run["errors"][-1][question])
        rate = run["steps"][-1] / run["seconds"] if run["seconds"] > 0 else float("nan")
        if last.mean() > UNSTABLE:
            table.add(name, *["unstable"] * (len(PROBE_TAUS) + 1), rate)
            continue
        table.add(name, *last.tolist(), float(last.mean()), rate)
    return table


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="folder for lambda_study.json and the figures")
    parser.add_argument("--square-steps", type=int, default=Budget.square_steps, help="square-wave steps")
    parser.add_argument(
        "--circuits", type=int, default=Budget.circuits, help="simulated arm circuits (~420 steps each)"
    )
    parser.add_argument("--evaluations", type=int, default=Budget.evaluations, help="points on each learning curve")
    parser.add_argument("--lams", type=float, nargs="+", default=list(Budget.lams), help="lambdas in (0, 0.999]")
    parser.add_argument("--seed", type=int, default=0, help="seeds the arm recording, tile offsets and Gamma_t draws")


def run(args: argparse.Namespace) -> Report:
    import json

    from gamma_net_core.cli import check, check_range, output_dir

    check_range("--square-steps", args.square_steps, low=1000)
    check_range("--circuits", args.circuits, low=1)
    check_range("--evaluations", args.evaluations, low=1)
    check_range("--seed", args.seed, low=0)
    for lam in args.lams:
        check(0.0 < lam <= 0.999, f"--lams must each be in (0, 0.999]; got {lam}")
    out = output_dir("--out", args.out)
    budget = Budget(square_steps=args.square_steps, circuits=args.circuits, evaluations=args.evaluations,
                    lams=tuple(args.lams), seed=args.seed)  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    data, files = run_study(budget, out)
    (out / "lambda_study.json").write_text(json.dumps(data, indent=1))
    event = data["horde"]["questions"].index("elbow_speed_until_past_2rad")
    tables = [
        final_table(f"square wave, after {budget.square_steps} steps: error at each probe τ", data["square_wave"]),
        final_table(f"simulated arm ({budget.circuits} circuits, {data['arm_steps']} steps), shoulder speed",
                    data["arm"]),
        final_table("Horde, event question (elbow speed until past 2 rad)", data["horde"], question=event),
    ]  # fmt: skip
    for q, name in enumerate(data["horde"]["questions"]):
        if q != event:
            tables.append(final_table(f"Horde, {name}", data["horde"], question=q))
    return Report(tables=tables, data=data, files=[str(f) for f in [*files, out / "lambda_study.json"]])
