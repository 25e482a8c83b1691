"""`gamma-net horde train`: learn every question of a questions file from a recording, and score each.

The recording's topics are sampled as the horde node samples them live (the latest message of
each topic on the ``rate_hz`` clock, stale ticks skipped: :mod:`gamma_net_core.horde.sampling`).
One :class:`~gamma_net_core.horde.learner.HordeLearner` learns all questions in one pass with the
file's settings (as the node does, constant alpha unless the file adapts it); beside it, per
question and evaluation timescale, a fixed-timescale learner with the same settings and no
timescale input (the paper's baseline), trained on the same transitions.

Scores per question and timescale, against the exact return of the recorded cumulants (the
return stops where the question's termination holds; the recording's end, and any stale gap,
ends it too, so the last ``--tail-steps`` of each stretch are left unscored):

- ``final``: the paper's Table 2 measure, the cumulative absolute error over the recording of the
  final weights' predictions;
- ``online``: the mean absolute error of the predictions made at each step before learning from
  it (what a user sees on the robot while it learns).

An off-policy question (a ``policy:``) learns by TDC with rho of each transition's action, read from the
recording as the node reads it (counted behaviour estimates included, checkpointed in ``horde.npz``). The
recording's returns are the behaviour's, so such a question is scored against per-decision importance-weighted
returns (rho from the final estimates; unbiased for the target's value, noisy), and has no fixed-timescale
baseline (that would learn the behaviour's values).

Readouts (hyperbolic, windowed sums) are scored the same way against their exact returns. With
``--step-size-study`` the online and final errors of constant step sizes (``--alphas``) and of
Autostep are compared per question and timescale (docs/results.md).

Outputs in ``--out``: ``horde_train.json`` (every number), ``horde_errors.png`` (errors by tau,
Γ-net and baseline, per question), ``horde_predictions.png`` (predictions and returns over a
window), ``horde.npz`` (the learner, resumable by the node with the same questions file).
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import sys

import numpy as np

from gamma_net_core.paths import config_file
from gamma_net_core.report import Report, Table, write_json

#: Unscored steps at the end of each stretch, in units of the largest evaluated tau.
TAIL_TAUS = 5
#: Constant step sizes of the step-size study (the arm's alpha is 0.1).
STUDY_ALPHAS = (0.03, 0.1, 0.3, 1.0)


class Diverged(ValueError):
    """A learner whose weights would leave the finite range: reported in one line, not a traceback."""


@dataclasses.dataclass(frozen=True)
class Stream:
    """The learned transitions in order: t -> t + 1 for each t in ``index``."""

    index: np.ndarray  # [N] tick of S_t
    states_t: np.ndarray  # [N, n_inputs]
    states_tp1: np.ndarray
    cumulants: np.ndarray  # [N, Q] C_{t+1}
    continuations: np.ndarray  # [N, Q] of S_{t+1}
    segment_end: np.ndarray  # [N] bool: the last transition of a stretch
    policy: np.ndarray | None = None  # [N, 3, Q] the off-policy questions' readings at S_t (A_t taken there)


def stream_of(signals) -> Stream:
    idx = signals.transitions()
    if idx.shape[0] < 2:
        raise ValueError(f"the recording gives {idx.shape[0]} learnable transitions; need at least 2")
    end = np.ones(idx.shape[0], dtype=bool)
    end[:-1] = idx[1:] != idx[:-1] + 1
    return Stream(
        index=idx,
        states_t=signals.inputs[idx],
        states_tp1=signals.inputs[idx + 1],
        cumulants=signals.cumulants[idx + 1],
        continuations=signals.continuations[idx + 1],
        segment_end=end,
        policy=None if signals.policy is None else signals.policy[idx],
    )


def exact_returns(stream: Stream, gammas, coefficients=None, rhos=None) -> np.ndarray:
    """[N, Q, G] exact returns (or [N, Q] of a readout with ``coefficients``), each stretch's end terminal.

    Args:
      rhos: [N, Q] importance ratios (:func:`target_rhos`): an off-policy question's return is then the
        per-decision importance-weighted one, G_t = rho_t (C_{t+1} + gamma G_{t+1}), whose expectation under
        the behaviour is the target's value (noisy: a product of ratios). An on-policy question's rho is 1.
    """
    from gamma_net_core.returns import discounted_returns

    Q = stream.cumulants.shape[1]
    terminals = stream.segment_end[:, None] | (stream.continuations == 0.0)
    g = np.asarray(gammas, dtype=np.float64)
    out = np.empty((stream.cumulants.shape[0], Q, g.shape[0]))
    for q in range(Q):
        if rhos is None or np.all(rhos[:, q] == 1.0):
            out[:, q] = discounted_returns(stream.cumulants[:, q], g, terminals=terminals[:, q])
            continue
        after = np.zeros(g.shape[0])  # G_{t+1}
        for t in range(out.shape[0] - 1, -1, -1):
            if terminals[t, q]:
                after = np.zeros(g.shape[0])
            after = rhos[t, q] * (stream.cumulants[t, q] + g * after)
            out[t, q] = after
    return out if coefficients is None else out @ np.asarray(coefficients)


def target_rhos(horde, stream: Stream) -> np.ndarray | None:
    """[N, Q] each transition's rho with the learner's final behaviour estimates (None: no policies)."""
    from gamma_net_core.horde.policies import PolicyReadings

    if stream.policy is None:
        return None
    rhos = np.stack([horde.ratios(PolicyReadings(*r), count=False) for r in stream.policy])
    caps = np.array([np.inf if p is None else p.rho_max for p in horde.ratios.policies])
    return np.minimum(rhos, caps)


def scored_mask(stream: Stream, tail: int) -> np.ndarray:
    """[N] False for the last ``tail`` transitions of each stretch (their returns are cut short)."""
    mask = np.ones(stream.index.shape[0], dtype=bool)
    ends = np.flatnonzero(stream.segment_end)
    for e in ends:
        mask[max(0, e - tail + 1) : e + 1] = False
    return mask


def train_horde(spec, stream: Stream, gammas: np.ndarray, *, progress: bool = False):
    """One pass of a HordeLearner (``progress``: a bar on stderr, counting transitions).

    Returns:
      (learner, online [N, Q, G], final [N, Q, G], readouts {name: (online [N, Q], final [N, Q])}).
    """
    from tqdm import tqdm

    from gamma_net_core.horde.learner import HordeLearner
    from gamma_net_core.horde.policies import PolicyReadings

    horde = HordeLearner.from_spec(spec)
    N, Q = stream.cumulants.shape
    names = horde.readout_names
    weights = {r: horde.readout_weights(r) for r in names}
    all_gammas = np.concatenate([gammas] + [weights[r][0] for r in names])
    online = np.empty((N, Q, all_gammas.shape[0]))
    for n in tqdm(range(N), desc="learning", unit="step", file=sys.stderr, disable=not progress):
        online[n] = horde.predict(stream.states_t[n], all_gammas)
        # Off-policy questions: A_t is counted into the behaviour's estimates, then its rho weighs S_t -> S_{t+1}.
        rhos = None if stream.policy is None else horde.ratios(PolicyReadings(*stream.policy[n]))
        try:
            horde.learn(stream.states_t[n], stream.cumulants[n], stream.states_tp1[n], stream.continuations[n],
                        rhos=rhos)  # fmt: skip
        except FloatingPointError as exc:
            raise Diverged(f"transition {n} of {N}: {exc}") from None
    final = np.stack([horde.predict(s, all_gammas) for s in stream.states_t])
    G = gammas.shape[0]
    readouts, j = {}, G
    for r in names:
        c = weights[r][1]
        readouts[r] = (online[:, :, j : j + c.shape[0]] @ c, final[:, :, j : j + c.shape[0]] @ c)
        j += c.shape[0]
    return horde, online[:, :, :G], final[:, :, :G], readouts


def train_baselines(spec, stream: Stream, gammas: np.ndarray):
    """Fixed-timescale learners per question and gamma: (online [N, Q, G], final [N, Q, G]).

    An off-policy question has none (NaN): the baseline learns the behaviour's values, not the target's.
    """
    from gamma_net_core.linear import FixedTimescaleTD, fixed_timescale_config

    N, Q = stream.cumulants.shape
    online = np.full((N, Q, gammas.shape[0]), np.nan)
    final = np.full_like(online, np.nan)
    seeds = np.random.SeedSequence(spec.seed).spawn(Q * gammas.shape[0])
    for q in range(Q):
        if spec.questions[q].policy is not None:
            continue
        for k, g in enumerate(gammas):
            net = FixedTimescaleTD(
                fixed_timescale_config(spec.learner, g), rng=np.random.default_rng(seeds[q * len(gammas) + k])
            )
            online[:, q, k] = net.learn_recording(
                states_t=stream.states_t,
                cumulants=stream.cumulants[:, q],
                states_tp1=stream.states_tp1,
                terminals=stream.continuations[:, q] == 0.0,
                record_predictions=True,
            )
            final[:, q, k] = net.predict(stream.states_t)
    return online, final


def errors(predictions: np.ndarray, returns: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(cumulative absolute error, mean absolute error) over the scored steps, per trailing axes."""
    diff = np.abs(predictions[mask] - returns[mask])
    return diff.sum(axis=0), diff.mean(axis=0)


def step_size_study(spec, stream: Stream, gammas, returns, mask, alphas) -> dict:
    """Online and final mean absolute errors [Q, G] of each constant alpha and of Autostep."""
    from gamma_net_core.horde.questions import AdaptationConfig, replace_learner

    out = {}
    constant = dataclasses.replace(spec, adaptation=AdaptationConfig(method="constant"))
    autostep = dataclasses.replace(spec, adaptation=dataclasses.replace(spec.adaptation, method="autostep"))
    runs = [(f"alpha={a:g}", replace_learner(constant, step_size=float(a))) for a in alphas] + [("autostep", autostep)]
    for name, run_spec in runs:
        try:
            _, online, final, _ = train_horde(run_spec, stream, gammas)
        except Diverged as exc:
            # A step size that diverges loses to every one that does not, at every question and timescale.
            inf = np.full(returns.shape[1:], np.inf)
            out[name] = {"online": inf, "final": inf, "diverged": str(exc)}
            continue
        out[name] = {"online": errors(online, returns, mask)[1], "final": errors(final, returns, mask)[1]}
    return out


def plot_errors(path: pathlib.Path, names, taus, horde_final, base_final) -> pathlib.Path:
    from gamma_net_core.plots import compact_png, pyplot, save_figure

    plt = pyplot()
    fig, axes = plt.subplots(1, len(names), figsize=(3.2 * len(names), 3.0), squeeze=False)
    for q, name in enumerate(names):
        ax = axes[0, q]
        ax.plot(taus, horde_final[q], "o-", label="Γ-net")
        ax.plot(taus, base_final[q], "s--", label="fixed-timescale TD")
        ax.set_xscale("log")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("tau (steps)")
    axes[0, 0].set_ylabel("cumulative |error|")
    axes[0, 0].legend(fontsize=7)
    return compact_png(save_figure(fig, path))


def plot_predictions(path, names, taus, stream, final, returns, *, rate_hz: float, window: int) -> pathlib.Path:
    from gamma_net_core.plots import compact_png, pyplot, save_figure

    plt = pyplot()
    shown = [0, len(taus) - 1] if len(taus) > 1 else [0]
    fig, axes = plt.subplots(
        len(names), len(shown), figsize=(5.0 * len(shown), 1.9 * len(names)), squeeze=False, sharex=True
    )
    start = max(0, stream.states_t.shape[0] // 2 - window // 2)
    x = np.arange(start, min(start + window, stream.states_t.shape[0]))
    seconds = x / rate_hz
    for q, name in enumerate(names):
        for col, k in enumerate(shown):
            ax = axes[q, col]
            ax.plot(seconds, returns[x, q, k], "k-", lw=1.0, label="return")
            ax.plot(seconds, final[x, q, k], "-", lw=0.9, label="Γ-net")
            ax.set_title(f"{name}, tau = {taus[k]:g} steps", fontsize=8)
            ax.tick_params(labelsize=7)
    axes[0, 0].legend(fontsize=7)
    for col in range(len(shown)):
        axes[-1, col].set_xlabel("time in the recording (s)")
    fig.tight_layout()
    return compact_png(save_figure(fig, path))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--bag", required=True, help="a rosbag2 directory (or .mcap/.db3/.bag) holding the topics")
    parser.add_argument("--questions", default=None, help="the questions file (default: the shipped config/horde.yaml)")
    parser.add_argument("--out", required=True, help="folder for the JSON, the figures and the learner")
    parser.add_argument("--taus", type=float, nargs="+", default=None, help="evaluation taus (default: publish_taus)")
    parser.add_argument(
        "--tail-steps", type=int, default=None, help=f"unscored steps per stretch end (default {TAIL_TAUS} x max tau)"
    )
    parser.add_argument("--step-size-study", action="store_true", help="also compare constant alphas with Autostep")
    parser.add_argument(
        "--alphas", type=float, nargs="+", default=list(STUDY_ALPHAS), help="the study's constant alphas"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def run(args: argparse.Namespace) -> Report:
    from gamma_net_core.cli import output_dir
    from gamma_net_core.horde.questions import load_questions
    from gamma_net_core.horde.sampling import read_signals
    from gamma_net_core.timescales import validate_taus

    output_dir("--out", args.out)  # before the learning, not after it
    if args.questions is None:
        args.questions = str(config_file("horde"))
    spec = load_questions(args.questions)
    taus = validate_taus(spec.publish_taus if args.taus is None else args.taus, name="--taus")
    if np.max(taus) > spec.timescales.tau_max:
        raise ValueError(f"--taus {np.max(taus):g} is beyond the trained tau_max {spec.timescales.tau_max:g}")
    tail = round(TAIL_TAUS * float(np.max(taus))) if args.tail_steps is None else args.tail_steps
    if tail < 0:
        raise ValueError(f"--tail-steps must be >= 0; got {tail}")
    out = pathlib.Path(args.out)
    signals = read_signals(args.bag, spec)
    stream = stream_of(signals)
    mask = scored_mask(stream, tail)
    if not mask.any():
        raise ValueError(f"no step left to score: {stream.index.shape[0]} transitions, --tail-steps {tail}")
    gammas = 1.0 - 1.0 / taus
    horde, h_online, h_final, readouts = train_horde(spec, stream, gammas, progress=not args.no_progress)
    b_online, b_final = train_baselines(spec, stream, gammas)
    rhos = target_rhos(horde, stream)
    returns = exact_returns(stream, gammas, rhos=rhos)
    h_cum = errors(h_final, returns, mask)[0]
    b_cum = errors(b_final, returns, mask)[0]
    out.mkdir(parents=True, exist_ok=True)
    table, per_question = _question_table(
        spec.names, taus, errors(h_final, returns, mask), errors(b_final, returns, mask),
        errors(h_online, returns, mask)[1], errors(b_online, returns, mask)[1],
    )  # fmt: skip
    off_policy = [name for name, p in zip(spec.names, spec.policies) if p is not None]
    if off_policy:
        table.title += f"; off-policy {off_policy}: against importance-weighted returns, no baseline"
    tables = [table, _readout_table(horde, readouts, stream, mask, spec.names, per_question, rhos)]
    data = {
        "bag": str(args.bag),
        "questions_file": str(args.questions),
        "rate_hz": spec.rate_hz,
        "ticks": int(signals.times.shape[0]),
        "transitions": int(stream.index.shape[0]),
        "scored": int(mask.sum()),
        "tail_steps": tail,
        "messages": signals.messages,
        "skips": signals.skips,
        "taus": taus.tolist(),
        "questions": per_question,
    }
    if args.step_size_study:
        study = step_size_study(spec, stream, gammas, returns, mask, args.alphas)
        study_table, data["step_size_study"] = _step_size_table(study, spec.names, taus)
        tables.append(study_table)
    files = [
        plot_errors(out / "horde_errors.png", spec.names, taus, h_cum, b_cum),
        plot_predictions(
            out / "horde_predictions.png",
            spec.names,
            taus,
            stream,
            h_final,
            returns,
            rate_hz=spec.rate_hz,
            window=round(60 * spec.rate_hz),
        ),
        horde.save(out / "horde.npz"),
        write_json(out / "horde_train.json", data),
    ]
    return Report(tables=tables, data=data, files=[str(f) for f in files])


def _question_table(names, taus, horde_final, baseline_final, h_on, b_on) -> tuple[Table, dict]:
    """Table 2's measures per question and timescale, and the same numbers per question for the JSON."""
    (h_cum, h_mean), (b_cum, b_mean) = horde_final, baseline_final
    table = Table(
        "Per question and timescale: Table 2's cumulative |error| of the final weights, and the mean |error| online",
        ["question", "tau", "Γ-net final", "baseline final", "ratio", "Γ-net online", "baseline online"],
    )
    per_question = {}
    for q, name in enumerate(names):
        rows = []
        for k, tau in enumerate(taus):
            ratio = float(h_cum[q, k] / b_cum[q, k]) if b_cum[q, k] > 0 else float("nan")
            table.add(name, float(tau), h_cum[q, k], b_cum[q, k], ratio, h_on[q, k], b_on[q, k])
            rows.append(
                {"tau": float(tau), "gamma_net_final": h_cum[q, k], "baseline_final": b_cum[q, k], "ratio": ratio,
                 "gamma_net_online": h_on[q, k], "baseline_online": b_on[q, k],
                 "gamma_net_final_mean": h_mean[q, k], "baseline_final_mean": b_mean[q, k]}
            )  # fmt: skip
        per_question[name] = {"timescales": rows}
    return table, per_question


def _readout_table(horde, readouts: dict, stream: Stream, mask: np.ndarray, names, per_question: dict,
                   rhos=None) -> Table:  # fmt: skip
    """Each readout's errors against its exact returns (also put into ``per_question``)."""
    readout_table = Table("Readouts against their exact returns", ["question", "readout", "final", "online mean"])
    for r, (r_online, r_final) in readouts.items():
        rg, rc = horde.readout_weights(r)
        exact = exact_returns(stream, rg, rc, rhos=rhos)
        r_cum = errors(r_final, exact, mask)[0]
        r_on = errors(r_online, exact, mask)[1]
        for q, name in enumerate(names):
            readout_table.add(name, r, r_cum[q], r_on[q])
            per_question[name].setdefault("readouts", {})[r] = {"final": r_cum[q], "online": r_on[q]}
    return readout_table


def _step_size_table(study: dict, names, taus) -> tuple[Table, dict]:
    """The best constant alpha against Autostep per question and timescale, and its JSON."""
    study_table = Table(
        "Step sizes: mean |error| online (and final), best constant alpha vs Autostep",
        ["question", "tau", "best alpha", "its online", "Autostep online", "beats?", "best final", "Autostep final"],
    )
    constants = [m for m in study if m != "autostep"]
    rows = []
    for q, name in enumerate(names):
        for k, tau in enumerate(taus):
            best = min(constants, key=lambda m: study[m]["online"][q, k])
            best_final = min(study[m]["final"][q, k] for m in constants)
            auto = study["autostep"]
            beats = bool(auto["online"][q, k] < study[best]["online"][q, k])
            study_table.add(name, float(tau), best, study[best]["online"][q, k], auto["online"][q, k],
                            "yes" if beats else "no", best_final, auto["final"][q, k])  # fmt: skip
            rows.append({"question": name, "tau": float(tau), "best_alpha": best, "beats_online": beats})
    data = {
        "methods": {m: {k: (v if isinstance(v, str) else v.tolist()) for k, v in e.items()} for m, e in study.items()},
        "rows": rows,
        "autostep_beats_best_constant_everywhere": all(r["beats_online"] for r in rows),
    }
    return study_table, data
