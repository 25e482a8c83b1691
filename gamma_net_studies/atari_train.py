"""`gamma-net atari train`: Γ-nets of each compared configuration and the probe networks, on recorded transitions.

The paper's training ("Training", appendix): transitions recorded from a policy are read
back in their recorded order "as if the data was generated in an online fashion": each one
goes into the prioritized replay and, once ``min_replay_history`` have been seen, every
``update_period``-th triggers an update (:meth:`~gamma_net_core.neural.learner.NeuralLearner.observe_many`,
exactly the loop of the ``neural_predictor`` node). The paper saved the networks every 500k
frames and evaluated each saved network at the evaluation points; here every
``--eval-every`` transitions each learner predicts at the points' φ, for the probe τ and the
τ between them (:data:`~gamma_net_studies.atari_series.INTERPOLATION_TAUS`; probe
networks predict at their own τ only, and are interpolated later by ``atari evaluate``).

The reference learner is the ``neural_predictor`` node's (``--params``, default
``config/atari.yaml``); ``--set KEY=VALUE`` changes a setting for every series (a smaller
``min_replay_history`` or ``target_sync_period`` for a shorter run), and each series then
changes one setting of it (:data:`~gamma_net_studies.atari_series.SERIES`).

Runs (series × seeds) are spread over worker processes, one torch thread each; a run
depends only on its configuration, seed and the data, not on where it runs. A run whose
``predictions.npz`` already exists is skipped, so the same command continues a stopped
study, and a later command may add series or seeds to the same ``--out``.

With ``--ensemble K`` any K runs on the same stream (every series of a study: embeddings,
timescale inputs, scaling, Γ_t distributions, probes) train as one
:class:`~gamma_net_core.neural.ensemble.LearnerEnsemble` on one pass over the data, one
stacked group per network shape (runs of one shape are packed together); each run's files
are the ones it would write alone (its members equal single learners to float tolerance),
so a study may mix both ways. An ensemble saves its whole state every ``--resume-every``
evaluations, and an interrupted one continues from its last save.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib
import sys
import time
from typing import Any

import numpy as np

from gamma_net_core.report import Report, Table

#: The paper evaluates 40 times in a run (every 500k of 20M frames): the default schedule.
DEFAULT_EVALUATIONS = 40
#: Transitions between progress reports from a run.
PROGRESS_CHUNK = 500
#: An ensemble's whole state part-way, in its first run's folder (removed once its runs are written).
ENSEMBLE_CHECKPOINT = "ensemble.pt"
#: Default evaluations between an ensemble's saves of its whole state.
DEFAULT_RESUME_EVERY = 4


@dataclasses.dataclass(frozen=True)
class RunTask:
    """One series and seed, with everything a worker process needs (plain, picklable values)."""

    series: str
    seed: int
    config: dict[str, Any]  # NeuralConfig fields
    shards: str
    steps: int
    schedule: tuple[int, ...]  # transitions at each evaluation, 0 first
    features: np.ndarray  # φ at the evaluation points [P, F]
    taus: tuple[float, ...]  # where a Γ-net predicts
    out: str
    checkpoint: bool
    identity: dict[str, Any]  # the study's identity, repeated in the file's header
    cumulant: str = "raw"  # the recording's column learned from: raw or clipped (Dopamine's) reward
    resume_every: int = 0  # an ensemble saves its whole state every this many evaluations (0: never)

    @property
    def key(self) -> str:
        return f"{self.series} seed {self.seed}"


def evaluation_schedule(steps: int, eval_every: int) -> np.ndarray:
    """Transitions observed at each evaluation: 0, k, 2k, ... and the last one, ``steps``."""
    if steps < 1 or eval_every < 1:
        raise ValueError(f"steps and eval_every must be >= 1; got {steps}, {eval_every}")
    return np.unique(np.concatenate([np.arange(0, steps, eval_every), [steps]])).astype(np.int64)


def cumulants_of(data, cumulant: str) -> np.ndarray:
    """The cumulant column a study learns from: the raw reward, or Dopamine's clipped one."""
    return data.clipped_cumulants if cumulant == "clipped" else data.cumulants


def read_rows(directory: str | os.PathLike, steps: int, feature_size: int):
    """The first ``steps`` transitions of a recording (validated shard by shard, in order)."""
    from gamma_net_core.data.shards import ShardReader, TransitionBatch

    reader = ShardReader(directory, feature_size=feature_size)
    if steps > len(reader):
        raise ValueError(f"{directory} holds {len(reader)} transitions; asked to train on {steps}")
    parts, held = [], 0
    for batch in reader.batches():
        parts.append(batch)
        held += len(batch)
        if held >= steps:
            break
    return TransitionBatch(
        0, *(np.concatenate([getattr(p, f) for p in parts])[:steps] for f in TransitionBatch._fields[1:])
    )


def _finish_run(task: RunTask, *, schedule, updates, taus, gammas, predictions, losses, seconds, stopped, state):
    """Write a run's ``learner.pt`` (``state``: a learner state dict, or None) and then ``predictions.npz``."""
    from gamma_net_core.checkpoint import save_torch
    from gamma_net_studies.atari_series import CHECKPOINT, PREDICTIONS, RunPredictions

    out = pathlib.Path(task.out)
    out.mkdir(parents=True, exist_ok=True)
    if task.checkpoint and stopped is None and state is not None:
        save_torch(out / CHECKPOINT, state)
    RunPredictions(
        config={"series": task.series, "seed": task.seed, "learner": task.config, "study": task.identity},
        transitions=schedule,
        updates=updates,
        taus=taus,
        gammas=gammas,
        predictions=predictions,
        losses=losses,
        meta={"seconds": seconds, "stopped": stopped},
    ).save(out / PREDICTIONS)


def _member_taus(task: RunTask, config) -> np.ndarray:
    """Where a run predicts: probe networks at their own τ (interpolated by evaluate), Γ-nets at the study's."""
    if config.network == "probes":
        return np.sort(np.asarray(config.probe_taus, dtype=np.float64))
    return np.asarray(task.taus, dtype=np.float64)


@dataclasses.dataclass
class EnsembleRuns:
    """Runs trained as one ensemble: what they share, and their state part-way (saved and resumed together)."""

    tasks: list[RunTask]
    data: Any  # TransitionBatch of the recording's prefix
    cumulants: np.ndarray
    taus: list[np.ndarray]
    gammas: list[np.ndarray]
    schedule: np.ndarray
    resume_file: pathlib.Path
    ensemble: Any = None  # LearnerEnsemble
    done: int = 0  # the last evaluation made
    predictions: list[np.ndarray] = dataclasses.field(default_factory=list)
    updates: np.ndarray | None = None  # [K, evaluations]
    losses: list[np.ndarray] = dataclasses.field(default_factory=list)
    started: float = 0.0  # perf_counter() less the seconds of a resumed part

    @property
    def members(self) -> list[str]:
        return [t.key for t in self.tasks]


def _build_ensemble_runs(tasks: list[RunTask]) -> tuple[EnsembleRuns, list]:
    """Read the data the runs share and where each predicts; (the runs, their NeuralConfigs)."""
    from gamma_net_core.config import from_mapping
    from gamma_net_core.neural.learner import NeuralConfig
    from gamma_net_core.timescales import gamma_from_tau

    started = time.perf_counter()
    configs = [from_mapping(NeuralConfig, t.config, where=t.key) for t in tasks]
    first = tasks[0]
    data = read_rows(first.shards, first.steps, configs[0].feature_size)
    taus = [_member_taus(t, c) for t, c in zip(tasks, configs)]
    runs = EnsembleRuns(
        tasks=tasks,
        data=data,
        cumulants=cumulants_of(data, first.cumulant),
        taus=taus,
        gammas=[np.atleast_1d(gamma_from_tau(t)) for t in taus],
        schedule=np.asarray(first.schedule, dtype=np.int64),
        resume_file=pathlib.Path(first.out) / ENSEMBLE_CHECKPOINT,
        started=started,
    )
    return runs, configs


def _resume_or_start(runs: EnsembleRuns, configs: list, progress) -> None:
    """Continue from the ensemble's last save where there is one of these runs, else start afresh."""
    from gamma_net_core.checkpoint import CheckpointError
    from gamma_net_core.neural.ensemble import LearnerEnsemble

    first, schedule, members = runs.tasks[0], runs.schedule, runs.members
    ensemble = None
    if first.resume_every > 0 and runs.resume_file.is_file():
        try:
            ensemble, extra = LearnerEnsemble.load(runs.resume_file, configs)
            if extra.get("members") != members or extra.get("schedule") != schedule.tolist():
                raise CheckpointError(
                    f"{runs.resume_file} holds the ensemble of {extra.get('members')}, not of {members}"
                )
        except CheckpointError as exc:
            print(f"not resuming: {str(exc).splitlines()[0]}; training the ensemble from the start", file=sys.stderr)
            ensemble = None
    if ensemble is not None:
        runs.ensemble = ensemble
        runs.done = int(extra["evaluation"])
        runs.predictions = [p.numpy() for p in extra["predictions"]]
        runs.updates = extra["updates"].numpy()
        runs.losses = [extra["losses"].numpy()]
        runs.started -= float(extra["seconds"])
        print(
            f"resuming the ensemble of {', '.join(members)} at evaluation {runs.done} of {schedule.size - 1}",
            file=sys.stderr,
        )
        if progress is not None:
            progress(int(schedule[runs.done]))
    else:
        runs.ensemble = LearnerEnsemble(configs)
        runs.done = 0
        runs.predictions = [np.full((schedule.size, first.features.shape[0], t.size), np.nan) for t in runs.taus]
        runs.updates = np.zeros((len(runs.tasks), schedule.size), dtype=np.int64)
        runs.losses = []


def _predict_members(runs: EnsembleRuns, training: np.ndarray, e: int) -> None:
    """Evaluation ``e``: each member still training predicts at the points (one pass per stacked group)."""
    features = runs.tasks[0].features
    for group, ks in zip(runs.ensemble.groups, runs.ensemble.group_members):
        if training[ks].any():
            values = group.predict(features, runs.gammas[ks[0]])
            for j, k in enumerate(ks):
                if training[k]:
                    runs.predictions[k][e] = values[j]


def _train_ensemble_runs(runs: EnsembleRuns, progress) -> np.ndarray:
    """Observe the data up to each evaluation, predict there, and save every ``resume_every``; the losses [N, K]."""
    data, cumulants, schedule, ensemble = runs.data, runs.cumulants, runs.schedule, runs.ensemble
    K, resume_every = len(runs.tasks), runs.tasks[0].resume_every
    if runs.done == 0:
        _predict_members(runs, np.ones(K, dtype=bool), 0)
    for e in range(runs.done + 1, schedule.size):
        for start in range(int(schedule[e - 1]), int(schedule[e]), PROGRESS_CHUNK):
            stop = min(start + PROGRESS_CHUNK, int(schedule[e]))
            runs.losses.append(
                ensemble.observe_many(
                    data.features[start:stop],
                    cumulants[start:stop],
                    data.terminals[start:stop],
                    data.truncated[start:stop],
                )
            )
            if progress is not None:
                progress(stop - start)
        loss = np.concatenate(runs.losses) if runs.losses else np.zeros((0, K))
        runs.updates[:, e] = np.isfinite(loss).sum(axis=0)  # a stopped member's count stays where it stopped
        training = np.array([s is None for s in ensemble.stopped])
        if not training.any():
            runs.updates[:, e + 1 :] = runs.updates[:, e : e + 1]
            break
        _predict_members(runs, training, e)
        if resume_every > 0 and e % resume_every == 0 and e < schedule.size - 1:
            runs.resume_file.parent.mkdir(parents=True, exist_ok=True)
            ensemble.save(
                runs.resume_file,
                members=runs.members,
                schedule=schedule.tolist(),
                evaluation=e,
                predictions=[torch_tensor(p) for p in runs.predictions],
                updates=torch_tensor(runs.updates),
                losses=torch_tensor(loss),
                seconds=time.perf_counter() - runs.started,
            )
    return np.concatenate(runs.losses) if runs.losses else np.zeros((0, K))


def _write_ensemble_runs(runs: EnsembleRuns, loss: np.ndarray) -> list[dict[str, Any]]:
    """Write each run's files as :func:`train_run` would, remove the ensemble's save; one summary per run."""
    ensemble, K = runs.ensemble, len(runs.tasks)
    seconds = time.perf_counter() - runs.started
    summaries = []
    for k, task in enumerate(runs.tasks):
        own = loss[:, k][np.isfinite(loss[:, k])]
        _finish_run(
            task,
            schedule=runs.schedule,
            updates=runs.updates[k],
            taus=runs.taus[k],
            gammas=runs.gammas[k],
            predictions=runs.predictions[k],
            losses=own,
            seconds=seconds,
            stopped=ensemble.stopped[k],
            state=ensemble.member_state_dict(k) if ensemble.stopped[k] is None else None,
        )
        summaries.append(
            {
                "series": task.series,
                "seed": task.seed,
                "transitions": int(ensemble.transitions),
                "updates": int(runs.updates[k, -1]),
                "seconds": seconds,
                "final_loss": float(own[-100:].mean()) if own.size else float("nan"),
                "stopped": ensemble.stopped[k],
                "ensemble": K,
            }
        )
    runs.resume_file.unlink(missing_ok=True)  # every run's files are written: nothing left to resume
    return summaries


def train_ensemble(tasks: list[RunTask], progress=None) -> list[dict[str, Any]]:
    """Train runs (any mix of series) as one :class:`~gamma_net_core.neural.ensemble.LearnerEnsemble`.

    Each run writes what :func:`train_run` would write for it; ``progress`` is called with the transitions
    just observed (once for the whole ensemble). Every ``resume_every`` evaluations the whole ensemble and
    what the runs have predicted so far are saved to ``ensemble.pt`` in the first run's folder (atomically),
    and a later call with the same runs continues from there; the file is removed once every run's files
    are written. Returns one summary per run, as :func:`train_run`.
    """
    runs, configs = _build_ensemble_runs(tasks)
    _resume_or_start(runs, configs, progress)
    loss = _train_ensemble_runs(runs, progress)
    return _write_ensemble_runs(runs, loss)


def torch_tensor(array: np.ndarray):
    """A NumPy array as a tensor for a checkpoint (torch imported only where one is written)."""
    import torch

    return torch.from_numpy(np.ascontiguousarray(array))


def ensemble_groups(tasks: list[RunTask], size: int) -> list[list[RunTask]]:
    """Runs grouped into ensembles of at most ``size`` that share the stream (see the module docstring).

    Runs of one network shape are kept together, so an ensemble holds as few stacked groups as it can.
    """
    from gamma_net_core.config import from_mapping
    from gamma_net_core.neural.ensemble import STREAM_SETTINGS, can_stack, stack_key
    from gamma_net_core.neural.learner import NeuralConfig

    if size <= 1:
        return [[t] for t in tasks]
    streams: dict[tuple, dict[tuple, list[RunTask]]] = {}
    alone = []
    for task in tasks:
        config = from_mapping(NeuralConfig, task.config, where=task.key)
        if can_stack(config):
            stream = (
                task.shards,
                task.steps,
                task.cumulant,
                task.schedule,
                *(getattr(config, n) for n in STREAM_SETTINGS),
            )
            streams.setdefault(stream, {}).setdefault(stack_key(config), []).append(task)
        else:
            alone.append([task])
    chunks = []
    for shapes in streams.values():
        ordered = [task for members in shapes.values() for task in members]
        chunks += [ordered[i : i + size] for i in range(0, len(ordered), size)]
    return chunks + alone


def train_run(task: RunTask, progress=None) -> dict[str, Any]:
    """Train one series and seed on the recording, predicting at the evaluation points on the schedule.

    Writes ``learner.pt`` (unless the task says not to, or training diverged) and then
    ``predictions.npz`` (its presence marks the run done).

    Args:
      task: the run.
      progress: called with the number of transitions just observed (for a progress bar).

    Returns:
      A summary: series, seed, transitions, updates, seconds, the mean loss of the last 100
      updates, and why training stopped (None if it did not).
    """
    from gamma_net_core.config import from_mapping
    from gamma_net_core.neural.learner import NeuralConfig, NeuralLearner, TrainingDiverged
    from gamma_net_core.timescales import gamma_from_tau

    started = time.perf_counter()
    config = from_mapping(NeuralConfig, task.config, where=task.key)
    learner = NeuralLearner(config)
    data = read_rows(task.shards, task.steps, config.feature_size)
    if config.network == "probes":
        taus = np.sort(np.asarray(config.probe_taus, dtype=np.float64))
    else:
        taus = np.asarray(task.taus, dtype=np.float64)
    gammas = np.atleast_1d(gamma_from_tau(taus))
    schedule = np.asarray(task.schedule, dtype=np.int64)
    predictions = np.full((schedule.size, task.features.shape[0], taus.size), np.nan)
    updates = np.zeros(schedule.size, dtype=np.int64)
    predictions[0] = learner.predict(task.features, gammas)
    losses: list[np.ndarray] = []
    stopped = None
    for e in range(1, schedule.size):
        for start in range(int(schedule[e - 1]), int(schedule[e]), PROGRESS_CHUNK):
            stop = min(start + PROGRESS_CHUNK, int(schedule[e]))
            try:
                losses.append(
                    learner.observe_many(
                        data.features[start:stop],
                        cumulants_of(data, task.cumulant)[start:stop],
                        data.terminals[start:stop],
                        data.truncated[start:stop],
                    )
                )
            except TrainingDiverged as exc:
                stopped = str(exc)
                break
            if progress is not None:
                progress(stop - start)
        updates[e:] = learner.updates
        if stopped is not None:
            break
        predictions[e] = learner.predict(task.features, gammas)
    loss = np.concatenate(losses) if losses else np.zeros(0)
    seconds = time.perf_counter() - started
    _finish_run(
        task,
        schedule=schedule,
        updates=updates,
        taus=taus,
        gammas=gammas,
        predictions=predictions,
        losses=loss,
        seconds=seconds,
        stopped=stopped,
        state=learner.state_dict() if stopped is None else None,
    )
    return {
        "series": task.series,
        "seed": task.seed,
        "transitions": int(learner.transitions),
        "updates": int(learner.updates),
        "seconds": seconds,
        "final_loss": float(loss[-100:].mean()) if loss.size else float("nan"),
        "stopped": stopped,
    }


# ----------------------------------------------------------------------------- running the tasks


def train_group(group: list[RunTask], progress=None) -> list[dict[str, Any]]:
    """A lone run by :func:`train_run`, several as an ensemble (:func:`train_ensemble`)."""
    if len(group) == 1:
        return [train_run(group[0], progress=progress)]
    return train_ensemble(group, progress=None if progress is None else lambda n: progress(n * len(group)))


def _train(group: list[RunTask]) -> list[dict[str, Any]]:
    """One task of :func:`run_tasks`, wherever it runs: one torch thread (parallelism comes from the tasks)."""
    from gamma_net_core.atari.networks import torch_threads
    from gamma_net_core.tasks import report_progress

    with torch_threads(1):
        return train_group(group, progress=report_progress)


def _ray_resources(group: list[RunTask]) -> dict[str, Any]:
    """One CPU per run or ensemble; one GPU for a CUDA learner."""
    return {"num_cpus": 1, "num_gpus": 1 if str(group[0].config.get("device", "cpu")).startswith("cuda") else 0}


def run_tasks(
    tasks: list[RunTask],
    *,
    workers: int,
    progress: bool = True,
    ensemble: int = 0,
    ray_address: str | None = None,
    use_ray: bool = False,
) -> list[dict[str, Any]]:
    """Every task, on ``workers`` processes (0: in this process) or on Ray, longest first; one progress bar.

    Args:
      ensemble: train runs that stack up to this many at a time as one ensemble (0 or 1: one by one).
      ray_address: a Ray cluster (``ray.init(address=...)``) to run each run or ensemble on as one task;
        implies ``use_ray``. The recording and the run folder must be where every node sees them.
      use_ray: run on Ray (the cluster at ``ray_address``, an initialized one, or a local one).
    """
    from gamma_net_core.tasks import TaskRunner, progress_bar
    from gamma_net_studies.atari_series import SERIES

    groups = sorted(ensemble_groups(tasks, ensemble), key=lambda g: -sum(SERIES[t.series].cost for t in g))
    results: list[dict[str, Any]] = []
    runner = TaskRunner(workers, use_ray=use_ray, ray_address=ray_address, ray_options=_ray_resources)
    total = sum(t.steps for t in tasks)
    with runner, progress_bar(total, unit="transition", desc="training", enabled=progress) as bar:
        # A run reports its transitions as it goes, except on Ray: there they count once it is done.
        def transitions(summaries: list[dict[str, Any]]) -> int:
            return 0 if runner.streams_progress else sum(s["transitions"] for s in summaries)

        for summaries in runner.map_unordered(_train, groups, bar=bar, advance=transitions):
            for summary in summaries:
                results.append(summary)
                bar.set_postfix(runs=f"{len(results)}/{len(tasks)}")
                bar.write(_summary_line(summary), file=sys.stderr)
    return results


def _summary_line(summary: dict[str, Any]) -> str:
    state = f"stopped: {summary['stopped']}" if summary["stopped"] else f"final loss {summary['final_loss']:.4g}"
    return (
        f"{summary['series']} seed {summary['seed']}: {summary['updates']} updates, {summary['seconds']:.0f} s, {state}"
    )


# ----------------------------------------------------------------------------- the command


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shards", required=True, help="transition recording (gamma-net atari record --out)")
    parser.add_argument("--points", required=True, help="evaluation points folder (gamma-net atari points --out)")
    parser.add_argument("--out", default="runs/atari/train", help="run folder (continued if it holds this study)")
    parser.add_argument(
        "--params", default=None, help="YAML with the neural_predictor learner (default config/atari.yaml)"
    )
    parser.add_argument("--series", default="all", help="comma-separated series, or 'all' (see atari_series.SERIES)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per series (paper: 6)")
    parser.add_argument("--steps", type=int, default=None, help="transitions to train on (default: the recording)")
    parser.add_argument(
        "--eval-every",
        type=int,
        default=None,
        help=f"transitions between evaluations (default: steps / {DEFAULT_EVALUATIONS})",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change a learner setting for every series, e.g. --set min_replay_history=5000 (repeatable)",
    )
    parser.add_argument(
        "--cumulant",
        default="raw",
        choices=("raw", "clipped"),
        help="learn the game's reward (raw: the reference, as the points' returns) or Dopamine's clipped reward "
        "(then make the points with `atari points --cumulant clipped`)",
    )
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes (0: in this one)")
    parser.add_argument(
        "--ensemble",
        type=int,
        default=0,
        metavar="K",
        help="train up to K runs at a time (any series) as one learner ensemble (0: one by one)",
    )
    parser.add_argument(
        "--resume-every",
        type=int,
        default=DEFAULT_RESUME_EVERY,
        metavar="N",
        help="an ensemble saves its whole state every N evaluations and an interrupted one continues from it "
        "(0: never; each save holds the replay)",
    )
    parser.add_argument(
        "--ray-address",
        default=None,
        help="train on this Ray cluster ('auto', 'ray://...'): each run or ensemble one task, one CPU (or GPU)",
    )
    parser.add_argument("--no-checkpoints", action="store_true", help="do not save each run's final learner")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def parse_sets(items: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` strings -> a mapping; values read as YAML (numbers, lists, strings)."""
    import yaml

    changes = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set takes KEY=VALUE; got {item!r}")
        changes[key.strip()] = yaml.safe_load(value)
    return changes


def reference_config(params: str | os.PathLike | None, sets: list[str]):
    """The study's reference: the neural predictor's learner from ``params``, with ``--set`` changes."""
    from gamma_net_core.config import from_mapping, load_section
    from gamma_net_core.neural.learner import NeuralConfig
    from gamma_net_core.paths import config_file
    from gamma_net_studies.atari_series import GROUP, NODE, check_reference

    path = pathlib.Path(params) if params else config_file("atari")
    mapping = {**load_section(path, NODE, GROUP), **parse_sets(sets)}
    reference = from_mapping(NeuralConfig, mapping, where=f"{path}:{NODE}.{GROUP} with --set {sets}")
    check_reference(reference)
    return reference, path


def _check_same_play(shards_meta: dict[str, Any], points_config: dict[str, Any], shards, points) -> None:
    """φ at the points must come from the network that made the recording's φ (same policy, same game)."""
    for part in ("game", "env", "policy"):
        if part in shards_meta and part in points_config and shards_meta[part] != points_config[part]:
            raise ValueError(
                f"the recording {shards} and the evaluation points {points} come from different {part} settings: "
                f"{shards_meta[part]!r} and {points_config[part]!r}"
            )


@dataclasses.dataclass(frozen=True)
class StudyInputs:
    """What every run of a study shares: the reference learner, the recording's prefix, the points."""

    reference: Any  # NeuralConfig
    params: pathlib.Path
    reader: Any  # ShardReader
    steps: int
    eval_every: int
    schedule: np.ndarray
    points_file: pathlib.Path
    points: Any  # EvaluationPoints
    taus: np.ndarray


def parse_arguments(args: argparse.Namespace) -> list[str]:
    """Check the arguments before anything is read (one-line UsageErrors); the series named."""
    from gamma_net_core.cli import UsageError, check_range, input_path, output_dir
    from gamma_net_studies.atari_series import parse_series

    try:
        series = parse_series(args.series)
        parse_sets(args.set)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    check_range("--seeds", args.seeds, low=1)
    check_range("--workers", args.workers, low=0)
    check_range("--ensemble", args.ensemble, low=0)
    check_range("--resume-every", args.resume_every, low=0)
    check_range("--steps", args.steps, low=1)
    check_range("--eval-every", args.eval_every, low=1)
    input_path("--shards", args.shards, kind="dir")
    input_path("--points", args.points, kind="dir")
    input_path("--params", args.params, kind="file")
    output_dir("--out", args.out)
    if args.ray_address is not None:
        import ray  # noqa: F401  (without Ray: refused now, in one line, not after the data is read)
    return series


def read_inputs(args: argparse.Namespace) -> StudyInputs:
    """Read the reference configuration, the recording and the evaluation points, and check they fit."""
    # The heavy imports (torch) only once the arguments are known to be good.
    from gamma_net_core.atari.evaluation_points import EvaluationPoints
    from gamma_net_core.data.shards import ShardReader
    from gamma_net_studies.atari_series import study_taus

    reference, params = reference_config(args.params, args.set)
    reader = ShardReader(args.shards, feature_size=reference.feature_size)
    steps = len(reader) if args.steps is None else args.steps
    if not 1 <= steps <= len(reader):
        raise ValueError(f"--steps must be in [1, {len(reader)}] (the recording {args.shards}); got {steps}")
    if reference.min_replay_history >= steps:
        raise ValueError(
            f"min_replay_history {reference.min_replay_history} >= --steps {steps}: no network would ever train; "
            "lower it with --set min_replay_history=N"
        )
    eval_every = args.eval_every if args.eval_every is not None else max(1, steps // DEFAULT_EVALUATIONS)
    schedule = evaluation_schedule(steps, eval_every)
    points_file = pathlib.Path(args.points) / "points.npz"
    if not points_file.is_file():
        raise FileNotFoundError(f"{points_file} is missing: make it with `gamma-net atari points --out {args.points}`")
    points = EvaluationPoints.load(points_file)
    if points.features.ndim != 2 or points.features.shape[1] != reference.feature_size or len(points) == 0:
        raise ValueError(
            f"{points_file} holds φ of shape {points.features.shape}; the networks take {reference.feature_size} values"
        )
    _check_same_play(reader.meta, points.config, args.shards, points_file)
    taus = study_taus(reference.probe_taus)
    return StudyInputs(reference, params, reader, steps, eval_every, schedule, points_file, points, taus)


def study_identity(inputs: StudyInputs, cumulant: str) -> dict[str, Any]:
    """What makes two commands the same study (a later one may only add series or seeds)."""
    from gamma_net_core.atari.policies import file_sha256
    from gamma_net_core.config import to_mapping
    from gamma_net_core.neural.learner import PORTABLE_SETTINGS

    identity = {
        # The device changes where a run computes, not what it learns (as for checkpoints).
        "reference": {k: v for k, v in to_mapping(inputs.reference).items() if k not in PORTABLE_SETTINGS},
        "shards": {"meta": inputs.reader.meta, "transitions": int(inputs.steps)},
        "points": {"sha256": file_sha256(inputs.points_file), "count": len(inputs.points)},
        "schedule": inputs.schedule.tolist(),
        "taus": inputs.taus.tolist(),
    }
    if cumulant != "raw":  # absent: the raw reward (every study before the clipped column existed)
        identity["cumulant"] = cumulant
    return identity


def write_study(args: argparse.Namespace, inputs: StudyInputs, identity: dict[str, Any]) -> pathlib.Path:
    """Check the recording, refuse an ``--out`` of another study, and write its ``study.json``."""
    from gamma_net_core.report import write_json
    from gamma_net_studies.atari_series import STUDY

    # A corrupt shard is refused before the study's folder and study.json are made, not by a worker after.
    inputs.reader.check(inputs.steps)
    out = pathlib.Path(args.out)
    study_file = out / STUDY
    if study_file.is_file():
        saved = json.loads(study_file.read_text())
        if saved.get("identity") != json.loads(json.dumps(identity)):
            differ = sorted(
                k for k in identity if saved.get("identity", {}).get(k) != json.loads(json.dumps(identity[k]))
            )
            raise ValueError(f"{out} holds a study made with other {differ}; use another --out")
    write_json(
        study_file,
        {
            "identity": identity,
            "params": str(inputs.params),
            "sets": list(args.set),
            "shards": str(pathlib.Path(args.shards).resolve()),
        },
    )
    return study_file


def build_tasks(
    args: argparse.Namespace, series: list[str], inputs: StudyInputs, identity: dict[str, Any]
) -> tuple[list[RunTask], list[Any]]:
    """One task per (series, seed) still to train, and the runs already trained (RunPredictions)."""
    from gamma_net_core.config import to_mapping
    from gamma_net_core.neural.learner import PORTABLE_SETTINGS, saved_config_mapping
    from gamma_net_studies.atari_series import PREDICTIONS, RunPredictions, run_path, series_config

    out = pathlib.Path(args.out)
    tasks, skipped = [], []
    for name in series:
        for seed in range(args.seeds):
            config = to_mapping(series_config(inputs.reference, name, seed))
            where = run_path(out, name, seed)
            if (where / PREDICTIONS).is_file():
                saved = RunPredictions.load(where / PREDICTIONS)
                learned = saved_config_mapping(saved.config.get("learner") or {})
                portable = {k: v for k, v in learned.items() if k not in PORTABLE_SETTINGS}
                if portable != {k: v for k, v in config.items() if k not in PORTABLE_SETTINGS}:
                    raise ValueError(f"{where / PREDICTIONS} was trained with another configuration; remove it")
                skipped.append(saved)
                continue
            tasks.append(
                RunTask(
                    series=name,
                    seed=seed,
                    config=config,
                    shards=str(args.shards),
                    steps=inputs.steps,
                    schedule=tuple(int(s) for s in inputs.schedule),
                    features=np.ascontiguousarray(inputs.points.features, dtype=np.float32),
                    taus=tuple(float(t) for t in inputs.taus),
                    out=str(where),
                    checkpoint=not args.no_checkpoints,
                    resume_every=args.resume_every,
                    identity=identity,
                    cumulant=args.cumulant,
                )
            )
    return tasks, skipped


def train_tasks(args: argparse.Namespace, tasks: list[RunTask]) -> tuple[list[dict[str, Any]], int, float]:
    """Train the tasks on the workers asked for: (each run's summary, workers used, seconds)."""
    started = time.perf_counter()
    workers = min(args.workers, len(ensemble_groups(tasks, args.ensemble)))
    results = (
        run_tasks(
            tasks,
            workers=workers,
            progress=not args.no_progress,
            ensemble=args.ensemble,
            ray_address=args.ray_address,
        )
        if tasks
        else []
    )
    return results, workers, time.perf_counter() - started


def study_report(
    args: argparse.Namespace,
    series: list[str],
    inputs: StudyInputs,
    study_file: pathlib.Path,
    results: list[dict[str, Any]],
    skipped: list[Any],
    workers: int,
    seconds: float,
) -> Report:
    """The table of runs (trained, diverged, already trained) and the report's data and files."""
    from gamma_net_core.config import to_mapping
    from gamma_net_studies.atari_series import run_path

    steps, schedule, points = inputs.steps, inputs.schedule, inputs.points
    table = Table(
        f"atari train: {steps} transitions, {len(schedule)} evaluations at {len(points)} points, "
        f"{workers} worker(s){f', ensembles of up to {args.ensemble}' if args.ensemble > 1 else ''}, "
        f"{seconds:.0f} s",
        ["series", "seed", "updates", "seconds", "final loss", "status"],
    )
    for r in sorted(results, key=lambda r: (series.index(r["series"]), r["seed"])):
        status = "diverged" if r["stopped"] else "trained"
        table.add(r["series"], r["seed"], r["updates"], r["seconds"], r["final_loss"], status)
    for saved in skipped:
        table.add(
            saved.config["series"],
            saved.config["seed"],
            int(saved.updates[-1]),
            saved.meta["seconds"],
            float(saved.losses[-100:].mean()) if saved.losses.size else float("nan"),
            "already trained",
        )
    data = {
        "runs": results,
        "skipped": [(s.config["series"], s.config["seed"]) for s in skipped],
        "seconds": seconds,
        "steps": steps,
        "eval_every": inputs.eval_every,
        "reference": to_mapping(inputs.reference),
    }
    if any(r["stopped"] for r in results):
        print("some runs diverged: their predictions after the divergence are NaN", file=sys.stderr)
    out = pathlib.Path(args.out)
    return Report(
        tables=[table],
        data=data,
        files=[str(study_file), *(str(run_path(out, r["series"], r["seed"])) for r in results)],
    )


def run(args: argparse.Namespace) -> Report:
    """Parse, read the inputs, write the study's identity, train what is left, and report."""
    series = parse_arguments(args)
    inputs = read_inputs(args)
    identity = study_identity(inputs, args.cumulant)
    study_file = write_study(args, inputs, identity)
    tasks, skipped = build_tasks(args, series, inputs, identity)
    results, workers, seconds = train_tasks(args, tasks)
    return study_report(args, series, inputs, study_file, results, skipped, workers, seconds)
