"""The task runner every study uses: in this process, on worker processes and on Ray, the same results."""

from __future__ import annotations

import os
import pathlib
import time

import pytest

from gamma_net_core.tasks import TaskRunner, in_worker, progress_bar, report_progress

# What the initializer loads, once per worker (in a worker process: that process's copy).
_offset: int | None = None


def _load(offset: int) -> None:
    global _offset
    _offset = offset


def _load_and_mark(folder: str) -> None:
    """The initializer, leaving a file per process it starts in: how many processes a runner started."""
    _load(1)
    (pathlib.Path(folder) / f"{os.getpid()}.started").touch()


def _shift(task: int) -> tuple[int, int, bool]:
    """A task: its number plus what the worker loaded, the process it ran in, whether a worker ran it."""
    report_progress(task)
    return task + (_offset or 0), os.getpid(), in_worker()


def _refuse_three(task: int) -> int:
    if task == 3:
        raise ValueError(f"task {task} refused")
    return task


def _hang_or_refuse(task: tuple[str, str]) -> None:
    kind, folder = task
    if kind == "hang":  # a long run still going when another task fails
        (pathlib.Path(folder) / f"{os.getpid()}.pid").touch()
        time.sleep(3600)
    while not any(pathlib.Path(folder).glob("*.pid")):
        time.sleep(0.01)  # fail only once the long task runs
    raise ValueError("refused while another task runs")


TASKS = list(range(12))


@pytest.mark.parametrize("workers", [0, 2])
def test_every_task_runs_once_with_what_its_worker_loaded(workers):
    with TaskRunner(workers, initializer=_load, initargs=(100,)) as runner:
        with progress_bar(sum(TASKS), unit="step") as bar:
            # The tasks report their own progress as they go: a finished one adds nothing more.
            results = list(runner.map_unordered(_shift, TASKS, bar=bar, advance=lambda _: 0))
            assert bar.n == sum(TASKS)
    assert sorted(value for value, _, _ in results) == [t + 100 for t in TASKS]
    pids = {pid for _, pid, _ in results}
    if workers == 0:
        assert pids == {os.getpid()} and not any(worker for _, _, worker in results)
    else:
        assert os.getpid() not in pids and len(pids) <= workers and all(worker for _, _, worker in results)


def test_a_runner_keeps_its_processes_between_runs(tmp_path):
    with TaskRunner(2, initializer=_load_and_mark, initargs=(str(tmp_path),)) as runner:
        used = [{pid for _, pid, _ in runner.map_unordered(_shift, TASKS)} for _ in range(3)]
    started = {int(path.stem) for path in tmp_path.glob("*.started")}
    # A process starts when a task first needs it (one run may use one worker, the next both), so
    # the check is of every process ever started: three runs on new processes would start three.
    assert set().union(*used) <= started and 1 <= len(started) <= 2


def test_the_bar_counts_each_result_by_advance():
    with TaskRunner(0) as runner, progress_bar(2 * len(TASKS), unit="x") as bar:
        list(runner.map_unordered(_refuse_three, [t for t in TASKS if t != 3], bar=bar, advance=lambda _: 2))
        assert bar.n == 2 * (len(TASKS) - 1)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_failing_task_ends_the_run_with_its_error(workers):
    seen = []
    with pytest.raises(ValueError, match="task 3 refused"), TaskRunner(workers) as runner:
        for result in runner.map_unordered(_refuse_three, TASKS):
            seen.append(result)
    assert 3 not in seen
    if workers == 0:
        assert seen == [0, 1, 2]  # in turn: nothing after the failing task runs


def test_a_failure_stops_the_other_workers_at_once(tmp_path):
    with pytest.raises(ValueError, match="refused while another task runs"), TaskRunner(2) as runner:
        list(runner.map_unordered(_hang_or_refuse, [("hang", str(tmp_path)), ("refuse", str(tmp_path))]))
    # Waiting for the hour-long task would have hit the test's timeout; its process is gone.
    (pid_file,) = tmp_path.glob("*.pid")
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.stem), 0)


def test_negative_workers_are_refused():
    with pytest.raises(ValueError, match="workers must be >= 0; got -1"):
        TaskRunner(-1)


@pytest.mark.slow
def test_ray_gives_the_same_results_with_and_without_an_initializer():
    ray = pytest.importorskip("ray")
    # Ray's workers import this module's tasks by name, as pool processes do (they inherit sys.path).
    path = os.pathsep.join([str(pathlib.Path(__file__).parent), os.environ.get("PYTHONPATH", "")])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": path}})
    try:
        with TaskRunner(2, use_ray=True, initializer=_load, initargs=(100,)) as runner:
            actors = list(runner.map_unordered(_shift, TASKS))
            assert not runner.streams_progress
        with TaskRunner(use_ray=True, ray_options=lambda task: {"num_cpus": 1}) as runner:
            tasks = list(runner.map_unordered(_shift, TASKS))
        with pytest.raises(ValueError, match="task 3 refused"), TaskRunner(use_ray=True) as runner:
            list(runner.map_unordered(_refuse_three, TASKS))
    finally:
        ray.shutdown()
    assert sorted(value for value, _, _ in actors) == [t + 100 for t in TASKS]
    assert sorted(value for value, _, _ in tasks) == TASKS
    assert all(worker for _, _, worker in actors + tasks)
    assert os.getpid() not in {pid for _, pid, _ in actors + tasks}
