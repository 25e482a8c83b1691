"""The robot-arm study's training: one seed's Γ-net and baselines, every seed over worker processes.

Per seed (a seed draws the tile offsets and the Gamma_t sequence): one linear Γ-net and one
fixed-timescale baseline per evaluation gamma, one pass over the recording, then each scored by
its cumulative absolute error against the exact return. Part of `gamma-net arm train`
(:mod:`gamma_net_studies.arm_train`).
"""

from __future__ import annotations

import dataclasses
import pathlib
import time
from dataclasses import dataclass

import numpy as np

from gamma_net_studies.arm_export import save_resumable
from gamma_net_studies.arm_pairing import Transitions, true_returns

#: The section of config/arm.yaml the predictor node reads, and so does this study.
NODE = "predictor"
#: Every parameter the predictor node declares at the top of its section (``use_sim_time`` and
#: ``start_type_description_service``: rclpy's own),
#: and the groups this study reads; a test holds it to the node's declarations. A key of the section
#: outside these is a typo the node refuses, so the study refuses it too.
NODE_PARAMETERS = frozenset(
    {"seed", "max_gap", "learn", "publish_scale", "publish_timescales", "max_request_timescales", "stamp_source",
     "checkpoint_path", "checkpoint_interval", "resume", "input_queue_depth", "reliable_input", "use_sim_time",
     "start_type_description_service"}
)  # fmt: skip
NODE_GROUPS = frozenset({"joints", "learner", "timescales"})


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
    check_node_keys(params)  # after the loads above: the file is known to be valid YAML of sections
    return node, sampling, joints


def check_node_keys(params: pathlib.Path) -> None:
    """Refuse a key of the predictor's own section (``predictor:``) that the node does not declare.

    Keys under ``/**`` are shared by several nodes, each taking what it declares, so they are not
    checked (as the nodes do not); the groups' keys are checked by their dataclasses.

    Raises:
      ValueError: the first unknown key, with the closest known one.
    """
    import difflib

    import yaml

    document = yaml.safe_load(pathlib.Path(params).read_text()) or {}
    known = sorted(NODE_PARAMETERS | NODE_GROUPS)
    for section in (NODE, f"/{NODE}"):
        content = document.get(section) if isinstance(document, dict) else None
        keys = ((content or {}).get("ros__parameters") or {}) if isinstance(content, dict) else {}
        for key in keys:
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ValueError(f"unknown parameter {key!r} in {params}, section {section}{hint}")


def study_learner(node, *, steps: int, decay: bool):
    """The node's learner with alpha decayed linearly to zero over ``steps`` updates (the paper's), or as is."""
    return dataclasses.replace(node, step_size_decay_steps=steps) if decay else node


def baseline_config(learner, gamma: float):
    """The fixed-timescale baseline of ``learner`` (:func:`gamma_net_core.linear.fixed_timescale_config`)."""
    from gamma_net_core.linear import fixed_timescale_config

    return fixed_timescale_config(learner, gamma)


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
    net = LinearGammaNet(GammaNetConfig(tilings=(2,), timescale_input="both"), rng=np.random.default_rng(0))
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
    from gamma_net_core.linear import FixedTimescaleTD, LinearGammaNet, uses_ladder
    from gamma_net_core.timescales import TimescaleSampler

    run, data, returns, settings, checkpoint = task
    warm = _warm_up()
    gammas = np.array(settings.gammas)
    streams = _seeds(settings.seed, run, len(gammas))
    net = LinearGammaNet(settings.learner, rng=np.random.default_rng(streams[0]))
    # TD(lambda) by traces: on the sampling's fixed ladder, TD(0) on a draw beside it (gamma_net_core.linear.traces).
    ladder = uses_ladder(settings.learner)
    sampler = TimescaleSampler(settings.sampling, np.random.default_rng(streams[1]), fixed=ladder)
    started = time.perf_counter()
    # The recording's pauses and replay restarts are cuts: no lambda-return or trace reaches across one.
    cuts = data.episode_ends
    net.learn_recording(
        states_t=data.states_t, cumulants=data.cumulants, states_tp1=data.states_tp1, timescales=sampler, cuts=cuts
    )
    gamma_net_s = time.perf_counter() - started
    started = time.perf_counter()
    baselines = []
    for gamma, stream in zip(gammas, streams[2:]):
        base = FixedTimescaleTD(baseline_config(settings.learner, gamma), rng=np.random.default_rng(stream))
        base.learn_recording(states_t=data.states_t, cumulants=data.cumulants, states_tp1=data.states_tp1, cuts=cuts)
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
    from gamma_net_core.tasks import TaskRunner, progress_bar

    returns = true_returns(data.cumulants, settings.gammas, data.episode_ends)
    tasks = [(run, data, returns, settings, checkpoint if run == 0 else None) for run in range(seeds)]
    results: list[dict | None] = [None] * seeds
    started = time.perf_counter()
    # Each worker process imports numba afresh and loads the cached kernels.
    with (
        TaskRunner(workers if workers > 1 else 0) as runner,
        progress_bar(seeds, unit="seed", desc="arm seeds", enabled=progress) as bar,
    ):
        for result in runner.map_unordered(train_seed, tasks, bar=bar):
            results[result["run"]] = result
    return {"returns": returns, "runs": results, "seconds": time.perf_counter() - started}
