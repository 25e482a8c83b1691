"""`gamma-net arm train`: the paper's robot-arm study (section "Predictions on a Robot Arm", Table 2).

A JointState recording (a user's rosbag2 / rosbag1, or, without ``--bag``, a 50-circuit
recording of the simulated operator) is read through the same joint selector as the
predictor node; the learners are built from the same YAML groups as that node
(``config/arm.yaml``, section ``predictor``: ``joints``, ``learner``, ``timescales``).

Data. Sample t of the recording gives the normalized joint positions (S_t) and the
shoulder's speed measured in that message. The transition out of S_t is
(S_t, C_{t+1}, S_{t+1}) with C_{t+1} the speed in message t + 1 (``returns.py``'s
convention, ``cumulants[t]`` is C_{t+1}): T samples give T - 1 transitions.

Training, per seed (a seed draws the tile offsets and the Gamma_t sequence): one linear
Γ-net (state + gamma + tau/100 inputs, 32 timescales per step) and one fixed-timescale
baseline per evaluation gamma (the same settings, no timescale input), one pass over the
recording with :meth:`~gamma_net_core.linear.LinearGammaNet.learn_recording`. The one
difference from the node's YAML: the paper decayed alpha linearly to zero over its
recording, so ``step_size_decay_steps`` is set to the number of transitions
(``--no-decay`` keeps the YAML's constant alpha, as the online node learns).

Evaluation (Table 2: "cumulative absolute error over the entire dataset after training"):
the final weights predict at every S_t; the true return G_t(gamma) is the exact discounted
sum of the recording's cumulants with the recording's end as terminal. Near the end that
return is truncated (the arm kept moving; the predictors rightly predict more), so the
table scores every step except the last ``--tail-steps`` (default 5 tau_max = 500 steps,
where gamma^500 < 0.7% for gamma = 0.99); the error over every step, tail included, is
reported beside it. Errors are in cumulant units (rad/s summed over steps); the paper's
units are unknown, so the ratio Γ-net / baseline is what compares with the paper.

Outputs in ``--out``: ``arm_train.json`` (every number), ``predictions.png`` (the paper's
Robot Arm figure: Γ-net, baseline and return at each evaluation gamma over a 25 s window,
scaled by 1 - gamma), ``table2.png`` (errors and ratios by gamma, each seed), and
``gamma_net.npz``: seed 0's Γ-net, saved with the YAML's learner configuration (constant
alpha) so the predictor node, or ``LinearGammaNet.load(path, config=...)``, resumes from it.
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import os
import pathlib
import sys
import time
from dataclasses import dataclass

import numpy as np

from gamma_net_core.cli import check, check_range, output_dir
from gamma_net_core.config import load_section
from gamma_net_core.paths import config_file
from gamma_net_core.report import Report, Table, write_json

#: The section of config/arm.yaml the predictor node reads, and so does this study.
NODE = "predictor"
#: Table 2's evaluation discounts.
EVAL_GAMMAS = (0.9, 0.9666, 0.98333, 0.99)
#: The paper's Table 2: gamma -> (Γ-net, baseline) cumulative absolute error.
PAPER_TABLE2 = {0.9: (1025.0, 1124.0), 0.9666: (602.0, 822.0), 0.98333: (379.0, 440.0), 0.99: (273.0, 253.0)}
#: The figure's timescales: tau = 10, 30, 60, 100 steps, 0.33, 1.0, 2.0 and 3.3 s at 30 Hz. The paper's
#: panels are labelled 0.9, 0.9666, 0.99 but its caption says ~0.33, 1.0, 2.0 s (2.0 s is 0.98333): all four.
FIGURE_GAMMAS = EVAL_GAMMAS
#: The unscored tail, in units of the largest evaluation tau.
TAIL_TAUS = 5
BAG_NAME = "joint_states"
JSON_NAME = "arm_train.json"
CHECKPOINT_NAME = "gamma_net.npz"


# ----------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Transitions:
    """A recording as the learners see it: T samples, N = T - 1 transitions.

    Attributes:
      stamps: [N] s, the time stamp of S_t's message (the bag's clock).
      states_t: [N, n_inputs] S_t, inputs normalized to [0, 1].
      cumulants: [N] C_{t+1}, the signal measured in the sample after S_t.
      states_tp1: [N, n_inputs] S_{t+1}.
      episode_ends: [N] bool or None: S_{t+1} is its episode's last sample (the next starts an
        episode), so a true return from S_t stops there.
    """

    stamps: np.ndarray
    states_t: np.ndarray
    cumulants: np.ndarray
    states_tp1: np.ndarray
    episode_ends: np.ndarray | None = None

    @property
    def steps(self) -> int:
        return int(self.cumulants.shape[0])


def transitions(stamps, inputs, cumulants, episode_starts=None) -> Transitions:
    """Pair each sample's inputs with the next sample's cumulant (``JointData`` fields in, C_{t+1} out).

    Args:
      stamps: [T] s; inputs: [T, n] normalized; cumulants: [T], the signal measured in sample t.
      episode_starts: [T] bool or None; no transition is made into a sample that starts an episode
        (after a replay restart or a pause), as the predictor node learns none across it.

    Raises:
      ValueError: fewer than 2 samples, or arrays of different lengths.
    """
    stamps = np.asarray(stamps, dtype=np.float64)
    inputs = np.asarray(inputs, dtype=np.float64)
    cumulants = np.asarray(cumulants, dtype=np.float64)
    T = stamps.shape[0]
    if inputs.ndim != 2 or inputs.shape[0] != T or cumulants.shape != (T,):
        raise ValueError(f"stamps {stamps.shape}, inputs {inputs.shape}, cumulants {cumulants.shape} must share T")
    if T < 2:
        raise ValueError(f"a recording needs at least 2 usable samples for one transition; got {T}")
    keep = np.ones(T - 1, dtype=bool)
    ends = None
    if episode_starts is not None:
        starts = np.asarray(episode_starts, dtype=bool)
        if starts.shape != (T,):
            raise ValueError(f"episode_starts {starts.shape} must have the {T} samples' length")
        keep = ~starts[1:]
        # Transition t -> t+1 ends its episode when sample t+2 starts the next one.
        ends = np.append(starts[2:], False)[keep]
    return Transitions(
        stamps=stamps[:-1][keep],
        states_t=np.ascontiguousarray(inputs[:-1][keep]),
        cumulants=np.ascontiguousarray(cumulants[1:][keep]),
        states_tp1=np.ascontiguousarray(inputs[1:][keep]),
        episode_ends=ends,
    )


def true_returns(cumulants, gammas, episode_ends=None) -> np.ndarray:
    """G_t(gamma) from every transition's S_t, the recording's end as terminal: [N, G].

    ``cumulants[t]`` is C_{t+1}; G_t = C_{t+1} + gamma C_{t+2} + ..., cut after the last sample
    and after each episode's last sample (``episode_ends``, [N] bool, as :func:`transitions` gives).
    """
    from gamma_net_core.returns import discounted_returns

    return discounted_returns(cumulants, gammas, terminals=episode_ends)


def default_tail_steps(gammas=EVAL_GAMMAS) -> int:
    """Steps at the end left unscored: TAIL_TAUS times the largest tau (500 for gamma = 0.99)."""
    return round(TAIL_TAUS / (1.0 - max(gammas)))


# ----------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class StudySettings:
    """What every seed's run shares."""

    learner: object  # GammaNetConfig, as trained (alpha decayed over the data unless --no-decay)
    node_learner: object  # GammaNetConfig from the YAML (the checkpoint is saved with it)
    sampling: object  # TimescaleSampling
    gammas: tuple[float, ...]
    tail: int  # unscored steps at the end
    window: tuple[int, int]  # [start, stop) steps of the figure
    seed: int
    joints: object = None  # JointsConfig: recorded in the checkpoint, so the predictor node can resume it
    max_gap: float = 1.0  # the predictor node's episode gap, recorded likewise


def load_learners(params: pathlib.Path):
    """(GammaNetConfig, TimescaleSampling, JointsConfig): the predictor node's groups in ``params``."""
    from gamma_net_core.config import load_config
    from gamma_net_core.data.joints import JointsConfig
    from gamma_net_core.linear import GammaNetConfig
    from gamma_net_core.timescales import TimescaleSampling

    node = load_config(GammaNetConfig, params, NODE, "learner")
    sampling = load_config(TimescaleSampling, params, NODE, "timescales")
    joints = load_config(JointsConfig, params, NODE, "joints")
    return node, sampling, joints


def study_learner(node, *, steps: int, decay: bool):
    """The node's learner with alpha decayed linearly to zero over ``steps`` updates (the paper's), or as is."""
    return dataclasses.replace(node, step_size_decay_steps=steps) if decay else node


def baseline_config(learner, gamma: float):
    """The fixed-timescale baseline of ``learner`` (:func:`gamma_net_core.linear.fixed_timescale_config`)."""
    from gamma_net_core.linear import fixed_timescale_config

    return fixed_timescale_config(learner, gamma)


# ----------------------------------------------------------------------------- one seed


def _seeds(seed: int, run: int, n_baselines: int) -> list[np.random.SeedSequence]:
    """Independent streams of one run: Γ-net tiles, its Gamma_t draws, each baseline's tiles."""
    return np.random.SeedSequence([seed, run]).spawn(2 + n_baselines)


_WARM = False


def _warm_up() -> float:
    """Load (or compile) the numba kernels once per process, so a seed's timing is its training alone."""
    global _WARM
    if _WARM:
        return 0.0
    from gamma_net_core.linear import FixedTimescaleConfig, FixedTimescaleTD, GammaNetConfig, LinearGammaNet

    started = time.perf_counter()
    s = np.full((4, 2), 0.5)
    c = np.ones(4)
    net = LinearGammaNet(GammaNetConfig(tilings=(2,)), rng=np.random.default_rng(0))
    net.learn_recording(states_t=s, cumulants=c, states_tp1=s, timescales=np.full((4, 2), 0.5))
    net.predict(s, [0.5])
    base = FixedTimescaleTD(FixedTimescaleConfig(tilings=(2,)), rng=np.random.default_rng(0))
    base.learn_recording(states_t=s, cumulants=c, states_tp1=s)
    base.predict(s)
    _WARM = True
    return time.perf_counter() - started


def train_seed(task: tuple) -> dict:
    """Train and evaluate one seed's Γ-net and baselines.

    Args:
      task: (run, Transitions, returns [N, G], StudySettings, checkpoint path or None).

    Returns:
      ``{"run", "gamma_net" [G], "baseline" [G] (errors on the scored steps), "gamma_net_all",
      "baseline_all" [G] (every step), "seconds": {...}, "update_count", and for run 0 "window":
      the predictions [window, G] shown in the figure}``.
    """
    from gamma_net_core.evaluation import cumulative_absolute_error
    from gamma_net_core.linear import FixedTimescaleTD, LinearGammaNet
    from gamma_net_core.timescales import TimescaleSampler

    run, data, returns, settings, checkpoint = task
    warm = _warm_up()
    gammas = np.array(settings.gammas)
    streams = _seeds(settings.seed, run, len(gammas))
    net = LinearGammaNet(settings.learner, rng=np.random.default_rng(streams[0]))
    sampler = TimescaleSampler(settings.sampling, np.random.default_rng(streams[1]))
    started = time.perf_counter()
    net.learn_recording(
        states_t=data.states_t, cumulants=data.cumulants, states_tp1=data.states_tp1, timescales=sampler
    )
    gamma_net_s = time.perf_counter() - started
    started = time.perf_counter()
    baselines = []
    for gamma, stream in zip(gammas, streams[2:]):
        base = FixedTimescaleTD(baseline_config(settings.learner, gamma), rng=np.random.default_rng(stream))
        base.learn_recording(states_t=data.states_t, cumulants=data.cumulants, states_tp1=data.states_tp1)
        baselines.append(base)
    baselines_s = time.perf_counter() - started
    started = time.perf_counter()
    predicted = {
        "gamma_net": net.predict(data.states_t, gammas),
        "baseline": np.column_stack([b.predict(data.states_t) for b in baselines]),
    }
    scored = data.steps - settings.tail
    result: dict = {"run": run}
    for name, values in predicted.items():
        result[name] = cumulative_absolute_error(values[:scored], returns[:scored])
        result[f"{name}_all"] = cumulative_absolute_error(values, returns)
    evaluate_s = time.perf_counter() - started
    result["seconds"] = {
        "warm_up": warm,
        "gamma_net": gamma_net_s,
        "baselines": baselines_s,
        "train": gamma_net_s + baselines_s,
        "evaluate": evaluate_s,
    }
    result["update_count"] = net.update_count
    if run == 0:
        start, stop = settings.window
        result["window"] = {name: values[start:stop] for name, values in predicted.items()}
    if checkpoint is not None:
        save_resumable(
            net,
            settings.node_learner,
            checkpoint,
            joints=settings.joints,
            timescales=settings.sampling,
            max_gap=settings.max_gap,
        )
    return result


def save_resumable(net, config, path: pathlib.Path, *, joints, timescales, max_gap: float) -> pathlib.Path:
    """Save ``net`` as the predictor node's checkpoint: its settings from the YAML, so it resumes learning.

    The study decays alpha to zero over the recording; a checkpoint saved with that schedule would
    never learn again once resumed, so the learner is saved with ``config`` (the node's constant
    alpha) and differs from the trained one in its step-size schedule only; anything else that
    differs is refused. The file is an :class:`~gamma_net_core.online.OnlineGammaNet` checkpoint
    (with the joint selection, Gamma_t sampling and episode gap the node checks on resume):
    ``checkpoint_path`` of the `predictor` node can point at it.
    """
    from gamma_net_core.config import to_mapping
    from gamma_net_core.linear import LinearGammaNet
    from gamma_net_core.online import OnlineGammaNet

    trained, wanted = to_mapping(net.config), to_mapping(config)
    differ = sorted(k for k in trained if trained[k] != wanted[k] and k != "step_size_decay_steps")
    if differ:
        raise ValueError(f"the checkpoint's configuration differs from the trained one in {differ}")
    resumable = LinearGammaNet.from_arrays(
        config, net.to_state_dict(), update_count=net.update_count, source="the trained Γ-net"
    )
    online = OnlineGammaNet(
        joints=joints,
        learner=config,
        timescales=timescales,
        rng=np.random.default_rng(0),
        max_gap=max_gap,
        _net=resumable,
    )
    return online.save(path)


# ----------------------------------------------------------------------------- the study


def run_study(
    data: Transitions,
    settings: StudySettings,
    *,
    seeds: int,
    workers: int,
    checkpoint: pathlib.Path | None,
    progress: bool = True,
) -> dict:
    """Every seed, spread over ``workers`` processes.

    Args:
      data, settings: the recording's transitions and what every seed shares.
      seeds: runs 0 .. seeds - 1, each seeded from (settings.seed, run).
      workers: processes (1: in this one).
      checkpoint: where run 0's Γ-net is saved (see :func:`save_resumable`); None: not saved.

    Returns:
      ``{"returns": [N, G], "runs": [per-seed dicts by run], "seconds": wall time}``.
    """
    from tqdm import tqdm

    returns = true_returns(data.cumulants, settings.gammas, data.episode_ends)
    tasks = [(run, data, returns, settings, checkpoint if run == 0 else None) for run in range(seeds)]
    results: list[dict | None] = [None] * seeds
    started = time.perf_counter()
    pool = None
    bar = tqdm(total=seeds, desc="arm seeds", unit="seed", file=sys.stderr, disable=not progress)
    try:
        if workers <= 1:
            outcomes = map(train_seed, tasks)
        else:
            # spawn: each worker imports numba afresh and loads the cached kernels (fork is unsafe with threads).
            pool = multiprocessing.get_context("spawn").Pool(workers)
            outcomes = pool.imap_unordered(train_seed, tasks)
        for result in outcomes:
            results[result["run"]] = result
            bar.update()
        if pool is not None:
            pool.close()
            pool.join()
    finally:
        bar.close()
        if pool is not None:
            pool.terminate()
    return {"returns": returns, "runs": results, "seconds": time.perf_counter() - started}


def summarize(study: dict, settings: StudySettings) -> dict:
    """Per-gamma errors over seeds: each seed's, mean, sample std, the ratio Γ-net / baseline, and references.

    ``constant`` holds the errors of two predictors that ignore the state: the mean of the true
    return over the scored steps (the best constant, known only in hindsight) and zero. A learner
    above the first has learned less about the return than its average.
    """
    runs = study["runs"]
    gammas = np.array(settings.gammas)
    out: dict = {"gammas": list(settings.gammas), "taus": (1.0 / (1.0 - gammas)).tolist()}
    for key in ("gamma_net", "baseline", "gamma_net_all", "baseline_all"):
        e = np.array([r[key] for r in runs])  # [seeds, G]
        out[key] = {
            "by_seed": e,
            "mean": e.mean(0),
            "std": e.std(0, ddof=1) if len(runs) > 1 else np.zeros(len(gammas)),
            "scaled_mean": e.mean(0) * (1.0 - gammas),
        }
    for suffix in ("", "_all"):
        ratio = out[f"gamma_net{suffix}"]["by_seed"] / out[f"baseline{suffix}"]["by_seed"]
        out[f"ratio{suffix}"] = {
            "by_seed": ratio,
            "mean": ratio.mean(0),
            "min": ratio.min(0),
            "max": ratio.max(0),
            "of_means": out[f"gamma_net{suffix}"]["mean"] / out[f"baseline{suffix}"]["mean"],
            "gamma_net_wins": (ratio < 1.0).sum(0),
        }
    # Context for the learners' errors: the best constant (the mean return, known in hindsight) and zero.
    scored = study["returns"][: study["returns"].shape[0] - settings.tail]
    out["constant"] = {"mean": np.abs(scored - scored.mean(0)).sum(0), "zero": np.abs(scored).sum(0)}
    paper = np.array([PAPER_TABLE2.get(g, (np.nan, np.nan)) for g in settings.gammas])
    out["paper"] = {"gamma_net": paper[:, 0], "baseline": paper[:, 1], "ratio": paper[:, 0] / paper[:, 1]}
    return out


# ----------------------------------------------------------------------------- outputs


def _tables(summary: dict, recording: dict, skips: dict, timing: dict, settings: StudySettings, seeds: int):
    rec = Table("recording", ["quantity", "value"], formats={"value": "{:.5g}"})
    for key, value in recording.items():
        rec.add(key, value)
    skip_table = Table("messages skipped, by kind (never reach the learners)", ["kind", "count"])
    for kind, count in skips.items():
        skip_table.add(kind, count)
    skip_table.add("total", sum(skips.values()))

    n = seeds
    table2 = Table(
        f"Table 2: cumulative absolute error after training ({n} seeds: mean ± sample std; last {settings.tail} "
        "steps unscored), next to the paper's",
        [
            "gamma",
            "tau",
            "Γ-net",
            "± std",
            "baseline",
            "± std",
            "ratio Γ/base",
            "ratio min",
            "ratio max",
            "Γ-net better (seeds)",
            "mean-return constant",
            "paper Γ-net",
            "paper baseline",
            "paper ratio",
        ],
        formats={
            "gamma": "{:g}",
            "tau": "{:.4g}",
            "ratio Γ/base": "{:.3f}",
            "ratio min": "{:.3f}",
            "ratio max": "{:.3f}",
            "paper ratio": "{:.3f}",
        },
    )
    g, b, r, p = summary["gamma_net"], summary["baseline"], summary["ratio"], summary["paper"]
    for k, gamma in enumerate(settings.gammas):
        table2.add(
            gamma,
            summary["taus"][k],
            g["mean"][k],
            g["std"][k],
            b["mean"][k],
            b["std"][k],
            r["mean"][k],
            r["min"][k],
            r["max"][k],
            f"{int(r['gamma_net_wins'][k])}/{n}",
            summary["constant"]["mean"][k],
            p["gamma_net"][k],
            p["baseline"][k],
            p["ratio"][k],
        )
    other = Table(
        "the same errors scaled by (1 - gamma) (the trend over gamma compares with the paper's), and over every "
        "step (the return truncated at the recording's end)",
        ["gamma", "Γ-net × (1-γ)", "baseline × (1-γ)", "Γ-net, every step", "baseline, every step", "ratio"],
        formats={"gamma": "{:g}", "ratio": "{:.3f}"},
    )
    ga, ba, ra = summary["gamma_net_all"], summary["baseline_all"], summary["ratio_all"]
    for k, gamma in enumerate(settings.gammas):
        other.add(gamma, g["scaled_mean"][k], b["scaled_mean"][k], ga["mean"][k], ba["mean"][k], ra["mean"][k])
    speed = Table(
        "seconds per seed (in its worker process; numba kernels loaded beforehand)",
        ["quantity", "mean", "max"],
        formats={"mean": "{:.3f}", "max": "{:.3f}"},
    )
    for key in ("gamma_net", "baselines", "train", "evaluate", "warm_up"):
        values = np.array(timing["by_seed"][key])
        speed.add({"train": "train (Γ-net + baselines)"}.get(key, key), float(values.mean()), float(values.max()))
    speed.add("study wall time (all seeds)", timing["wall"], timing["wall"])
    return [rec, skip_table, table2, other, speed]


def plot_table2(path: pathlib.Path, summary: dict, gammas) -> pathlib.Path:
    """Errors by gamma (mean, each seed) and the ratio Γ-net / baseline against the paper's."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = np.arange(len(gammas))
    labels = [f"{g:g}" for g in gammas]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained")
    for i, (key, name, color) in enumerate((("gamma_net", "Γ-net", "C1"), ("baseline", "baseline", "C2"))):
        e = summary[key]
        offset = -0.18 if i == 0 else 0.18
        ax.bar(x + offset, e["mean"], 0.36, color=color, label=name, alpha=0.85)
        for row in e["by_seed"]:
            ax.plot(x + offset, row, "k.", markersize=3)
    ax.plot(x, summary["constant"]["mean"], "_", color="k", markersize=28, mew=2, label="mean-return constant")
    ax.set_xticks(x, labels)
    ax.set_xlabel("γ")
    ax.set_ylabel("cumulative |prediction − return|")
    ax.set_title("error after training (bars: mean; dots: seeds)", fontsize=9)
    ax.legend(fontsize=8)
    ratio = summary["ratio"]
    for row in ratio["by_seed"]:
        bx.plot(x, row, ".", color="C1", alpha=0.6, markersize=5)
    bx.plot(x, ratio["mean"], "o-", color="C1", label="this study (mean; dots: seeds)")
    bx.plot(x, summary["paper"]["ratio"], "s--", color="k", label="paper (Table 2)")
    bx.axhline(1.0, color="0.5", lw=1)
    bx.set_xticks(x, labels)
    bx.set_xlabel("γ")
    bx.set_ylabel("Γ-net / baseline")
    bx.set_title("below 1: the Γ-net is better", fontsize=9)
    bx.legend(fontsize=8)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_outputs(out: pathlib.Path, data: Transitions, study: dict, settings: StudySettings, extra: dict):
    """Figures, the JSON of every number and the tables."""
    from gamma_net_core import config as config_lib
    from gamma_net_core.plots import compact_png, plot_predictions

    summary = summarize(study, settings)
    runs = study["runs"]
    timing = {
        "by_seed": {k: [r["seconds"][k] for r in runs] for k in runs[0]["seconds"]},
        "wall": study["seconds"],
        "workers": extra["workers"],
    }
    files = []
    start, stop = settings.window
    cols = [settings.gammas.index(g) for g in FIGURE_GAMMAS if g in settings.gammas]
    window = runs[0]["window"]
    seconds = data.stamps[start:stop] - data.stamps[0]
    period = extra["recording"]["median period (s)"]
    path = plot_predictions(
        seconds,
        study["returns"][start:stop, cols],
        {"Γ-net": window["gamma_net"][:, cols], "baseline": window["baseline"][:, cols]},
        [settings.gammas[c] for c in cols],
        out / "predictions.png",
        title=f"Robot arm: {extra['joints'].cumulant_name} after training (seed 0); τ = "
        + ", ".join(f"{period / (1.0 - settings.gammas[c]):.2g}" for c in cols)
        + " s",
        xlabel="time (s)",
    )
    files.append(str(compact_png(path)))
    files.append(str(compact_png(plot_table2(out / "table2.png", summary, settings.gammas))))
    tables = _tables(summary, extra["recording"], extra["skips"], timing, settings, len(runs))
    document = {
        "study": "arm-train",
        "source": extra["source"],
        "recording": extra["recording"],
        "skips": extra["skips"],
        "joints": config_lib.to_mapping(extra["joints"]),
        "learner": config_lib.to_mapping(settings.learner),
        "node_learner": config_lib.to_mapping(settings.node_learner),
        "baselines": {str(g): config_lib.to_mapping(baseline_config(settings.learner, g)) for g in settings.gammas},
        "gamma_t": config_lib.to_mapping(settings.sampling),
        "seeds": len(runs),
        "seed": settings.seed,
        "tail_steps": settings.tail,
        "scored_steps": data.steps - settings.tail,
        "figure_window_steps": list(settings.window),
        "errors": summary,
        "seconds": timing,
        "checkpoint": extra["checkpoint"],
        "tables": [t.to_json() for t in tables],
    }
    files.append(str(write_json(out / JSON_NAME, document, digits=5, compact=True)))
    return tables, files, summary, timing


def _shown(path: pathlib.Path) -> str:
    """``path`` relative to the working directory where it lies below it (JSON that is committed stays portable)."""
    try:
        return str(path.resolve().relative_to(pathlib.Path.cwd().resolve()))
    except ValueError:
        return str(path)


# ----------------------------------------------------------------------------- command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bag",
        default=None,
        help="a JointState recording (rosbag2 dir, .mcap, .db3, rosbag1 .bag); default: "
        "simulate --circuits circuits into OUT/joint_states first",
    )
    parser.add_argument("--out", required=True, help="folder for the figures, arm_train.json and gamma_net.npz")
    parser.add_argument(
        "--params",
        default=None,
        help=f"parameter file whose '{NODE}' section builds the learners (default: config/arm.yaml)",
    )
    parser.add_argument("--seeds", type=int, default=5, help="seeds (tile offsets and Gamma_t draws) per learner")
    parser.add_argument("--seed", type=int, default=0, help="run r is seeded from (seed, r)")
    parser.add_argument(
        "--no-decay",
        action="store_true",
        help="keep the YAML's constant alpha (the paper decayed it to 0 over the data)",
    )
    parser.add_argument("--topic", default="/joint_states", help="the JointState topic")
    parser.add_argument("--clock", choices=("header", "receive"), default="header", help="which time stamps to use")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (1: run in this process)")
    parser.add_argument(
        "--tail-steps",
        type=int,
        default=None,
        help="final steps left unscored, where the true return is "
        f"truncated by the recording's end (default {TAIL_TAUS} x the largest tau: {default_tail_steps()})",
    )
    parser.add_argument("--window-s", type=float, default=25.0, help="seconds shown in the predictions figure")
    parser.add_argument("--circuits", type=int, default=50, help="without --bag: circuits simulated (paper: 50)")
    parser.add_argument("--sim-seed", type=int, default=0, help="without --bag: the simulated operator's seed")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def _simulate(args, params: pathlib.Path, out: pathlib.Path) -> tuple[pathlib.Path, dict]:
    from tqdm import tqdm

    from gamma_net_core.data.bags import write_recording
    from gamma_net_core.experiments.arm_simulate import load_settings
    from gamma_net_core.signals.arm_recording import simulate_arm

    bag = out / BAG_NAME
    settings = load_settings(str(params))
    with tqdm(
        total=args.circuits, desc="simulating circuits", unit="circuit", file=sys.stderr, disable=args.no_progress
    ) as bar:
        recording = simulate_arm(
            circuits=args.circuits,
            rng=np.random.default_rng(args.sim_seed),
            on_circuit=lambda done: bar.update(done - bar.n),
            **settings,
        )
    out.mkdir(parents=True, exist_ok=True)
    write_recording(bag, recording)
    source = {
        "kind": "simulated",
        "bag": str(bag),
        "circuits": args.circuits,
        "sim_seed": args.sim_seed,
        "command": f"gamma-net arm simulate --circuits {args.circuits} --seed {args.sim_seed}",
    }
    return bag, source


def run(args: argparse.Namespace) -> Report:
    from gamma_net_core.data.bags import read_joint_states
    from gamma_net_core.data.joints import DEFAULT_MAX_GAP

    check_range("--seeds", args.seeds, low=1)
    check_range("--seed", args.seed, low=0)
    check_range("--workers", args.workers, low=1)
    check_range("--tail-steps", args.tail_steps, low=0)
    check_range("--window-s", args.window_s, above=0.0)
    check_range("--circuits", args.circuits, low=1)
    check_range("--sim-seed", args.sim_seed, low=0)
    params = pathlib.Path(args.params) if args.params else config_file("arm")
    check(params.is_file(), f"no parameter file {params}: pass --params")
    out = output_dir("--out", args.out)
    if args.bag is None:
        check(
            not (out / BAG_NAME).exists(), f"{out / BAG_NAME} exists already: pass it as --bag, or choose another --out"
        )
    node, sampling, joints = load_learners(params)  # a bad parameter file fails before any work
    if args.bag is None:
        bag, source = _simulate(args, params, out)
    else:
        bag, source = pathlib.Path(args.bag), {"kind": "bag", "bag": str(args.bag)}
    # The node's episode gap: the same messages are skipped and the same episodes cut as when it learns the bag.
    max_gap = float(load_section(params, NODE).get("max_gap", DEFAULT_MAX_GAP))
    read = read_joint_states(bag, joints=joints, topic=args.topic, clock=args.clock, max_gap=max_gap)
    if read.stamps.shape[0] < 2:
        raise ValueError(
            f"{bag}: {read.stamps.shape[0]} usable JointState messages on {args.topic} of {read.messages} "
            f"(skipped: {read.skips}); at least 2 are needed"
        )
    data = transitions(read.stamps, read.inputs, read.cumulants, read.episode_starts)
    tail = default_tail_steps() if args.tail_steps is None else args.tail_steps
    if data.steps - tail < 1:
        raise ValueError(
            f"{bag}: {data.steps} transitions leave none to score after the last {tail} (--tail-steps); "
            "record longer or lower --tail-steps"
        )
    learner = study_learner(node, steps=data.steps, decay=not args.no_decay)
    period = float(np.median(np.diff(read.stamps))) if read.stamps.shape[0] > 1 else float("nan")
    width = min(data.steps - tail, max(2, round(args.window_s / period) if period > 0 else 750))
    start = (data.steps - tail - width) // 2
    settings = StudySettings(
        learner=learner,
        node_learner=node,
        sampling=sampling,
        gammas=EVAL_GAMMAS,
        tail=tail,
        window=(start, start + width),
        seed=args.seed,
        joints=joints,
        max_gap=max_gap,
    )
    out.mkdir(parents=True, exist_ok=True)
    checkpoint = out / CHECKPOINT_NAME
    workers = min(args.workers, os.cpu_count() or 1, args.seeds)
    study = run_study(
        data, settings, seeds=args.seeds, workers=workers, checkpoint=checkpoint, progress=not args.no_progress
    )
    gaps = np.diff(read.stamps)
    recording = {
        "messages": read.messages,
        "usable samples": int(read.stamps.shape[0]),
        "episodes": read.episodes,
        "transitions (steps)": data.steps,
        "scored steps": data.steps - tail,
        "duration (s)": float(read.stamps[-1] - read.stamps[0]),
        "median period (s)": period,
        "largest gap (s)": float(gaps.max()),
        "cumulant mean": float(data.cumulants.mean()),
        "cumulant max": float(data.cumulants.max()),
    }
    extra = {
        "source": {**source, "topic": args.topic, "clock": args.clock, "params": _shown(params)},
        "recording": recording,
        "skips": read.skips,
        "joints": joints,
        "workers": workers,
        "checkpoint": {
            "path": str(checkpoint),
            "run": 0,
            "update_count": study["runs"][0]["update_count"],
            "saved_config": "the parameter file's learner (constant alpha) so it resumes learning; trained with "
            f"step_size_decay_steps={learner.step_size_decay_steps}",
        },
    }
    tables, files, summary, timing = write_outputs(out, data, study, settings, extra)
    files.append(str(checkpoint))
    data_out = {
        "json": str(out / JSON_NAME),
        "ratio_mean": summary["ratio"]["mean"].tolist(),
        "train_seconds_per_seed_max": float(max(timing["by_seed"]["train"])),
    }
    return Report(tables=tables, files=files, data=data_out)
