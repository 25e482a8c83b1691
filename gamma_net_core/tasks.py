"""A study's independent tasks, run in this process, on worker processes or on Ray, with one progress bar.

Every study here runs many tasks that share nothing (a seed, a series, a chunk of rollouts) and
collects their results as they finish. This is that loop, once::

    with TaskRunner(workers=4, initializer=load_game, initargs=(spec,)) as runner:
        with progress_bar(len(tasks), unit="run", desc="runs", enabled=progress) as bar:
            for result in runner.map_unordered(run_one, tasks, bar=bar):
                store(result)  # in the order tasks finish, not the order given

``workers`` = 0 runs each task here, in turn (no start-up cost: tests, tiny jobs); n >= 1
starts n processes (spawned, not forked: torch's and numba's threads do not survive a fork).
``use_ray`` sends them to Ray: with an ``initializer``, to ``max(1, workers)`` actors, each
initialised once like a pool process; without, each task as its own Ray task (one CPU, or what
``ray_options(task)`` asks for), as many at once as the cluster allows.

A task must be a module-level function of one picklable argument. Its result must not depend
on where it ran: it draws its randomness from what it is (``SeedSequence([seed, series, run])``),
never from the worker or the order. The first task that raises ends the run: the error reaches
the loop above with its traceback, tasks not started are dropped and worker processes stopped.

Progress. The bar moves by ``advance(result)`` (default 1) as each task finishes. A long task
may also move it as it goes with :func:`report_progress` (here and in worker processes; on Ray
it is dropped, see :attr:`TaskRunner.streams_progress`).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import queue
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")

#: Seconds between looks at the workers' progress messages while no task finishes.
POLL_S = 0.1
#: Seconds a finished task's last progress counts may take to arrive (a bound for a worker that died after returning).
COUNTS_WAIT_S = 30.0

# Where report_progress() sends a count: the bar (in this process) or the runner's queue (in a worker process).
_report: Callable[[int], Any] | None = None
_in_worker = False


def report_progress(count: int) -> None:
    """Move the running bar by ``count`` now, from inside a task (a no-op on Ray or without a bar)."""
    if _report is not None:
        _report(count)


def in_worker() -> bool:
    """True in a worker process or Ray actor a :class:`TaskRunner` started (it owns its process)."""
    return _in_worker


def progress_bar(total: int, *, unit: str, desc: str | None = None, enabled: bool = True):
    """A tqdm bar on stderr (nothing shown unless ``enabled``); use it as a context manager."""
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, desc=desc, file=sys.stderr, disable=not enabled)


def _one(result: Any) -> int:
    return 1


class TaskRunner(Generic[T, R]):
    """Runs tasks in this process, on worker processes or on Ray (see the module docstring).

    Args:
      workers: 0: in this process; n >= 1: n processes (with Ray and an ``initializer``: n actors).
      use_ray: run on Ray (the cluster at ``ray_address``, an initialised one, or a new local one).
      ray_address: a Ray cluster (``ray.init(address=...)``); implies ``use_ray``.
      initializer: called with ``initargs`` once in each worker (in this process too, with
        ``workers=0``) before its first task: load what every task of the worker reads.
      initargs: its arguments (picklable).
      ray_options: Ray's resources for one task (e.g. ``{"num_cpus": 1, "num_gpus": 1}``);
        only for tasks without an ``initializer`` (default one CPU each).

    Raises:
      ValueError: ``workers`` is negative.
    """

    def __init__(
        self,
        workers: int = 0,
        *,
        use_ray: bool = False,
        ray_address: str | None = None,
        initializer: Callable[..., Any] | None = None,
        initargs: tuple = (),
        ray_options: Callable[[T], dict[str, Any]] | None = None,
    ) -> None:
        if workers < 0:
            raise ValueError(f"workers must be >= 0; got {workers}")
        self.workers = workers
        self.use_ray = use_ray or ray_address is not None
        self.ray_address = ray_address
        self.initializer = initializer
        self.initargs = initargs
        self.ray_options = ray_options
        self._pool: ProcessPoolExecutor | None = None
        self._messages = None  # the worker processes' progress counts, and which task's counts are all sent
        self._calls = 0  # map_unordered calls on processes: a task's mark names its call and index
        self._marked: set[tuple[int, int]] = set()
        self._initialised_here = False

    @property
    def streams_progress(self) -> bool:
        """Whether a task's :func:`report_progress` reaches the bar (in this process and worker processes)."""
        return not self.use_ray

    def __enter__(self) -> TaskRunner[T, R]:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        self.close(failed=kind is not None)

    def close(self, *, failed: bool = False) -> None:
        """Stop the worker processes (at once if ``failed``: nothing they still compute is wanted)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        if failed:
            _stop_processes(pool)
        else:
            pool.shutdown(wait=True)

    def map_unordered(
        self,
        fn: Callable[[T], R],
        tasks: Iterable[T],
        *,
        bar=None,
        advance: Callable[[R], int] = _one,
    ) -> Iterator[R]:
        """``fn(task)`` for every task, yielded as each finishes; tasks start in the order given.

        Args:
          fn: a module-level function of one task.
          tasks: the tasks (picklable, for processes and Ray).
          bar: a tqdm bar (:func:`progress_bar`) to move, or None.
          advance: how far a finished task's result moves the bar.
        """
        tasks = list(tasks)
        if self.use_ray:
            results = self._on_ray(fn, tasks)
        elif self.workers == 0:
            results = self._here(fn, tasks, bar)
        else:
            results = self._on_processes(fn, tasks, bar)
        for result in results:
            if bar is not None:
                bar.update(advance(result))
            yield result

    # -- in this process

    def _here(self, fn: Callable[[T], R], tasks: list[T], bar) -> Iterator[R]:
        global _report
        if self.initializer is not None and not self._initialised_here:
            self.initializer(*self.initargs)
            self._initialised_here = True
        previous = _report
        _report = None if bar is None else bar.update
        try:
            for task in tasks:
                yield fn(task)
        finally:
            _report = previous

    # -- on worker processes

    def _on_processes(self, fn: Callable[[T], R], tasks: list[T], bar) -> Iterator[R]:
        if self._pool is None:
            context = multiprocessing.get_context("spawn")
            self._messages = context.Queue()
            self._pool = ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=context,
                initializer=_start_worker,
                initargs=(self._messages, self.initializer, self.initargs),
            )
        self._calls += 1
        call = self._calls
        finished: queue.SimpleQueue[Future] = queue.SimpleQueue()
        marks = {
            self._pool.submit(_counted, fn, (call, index), task): (call, index) for index, task in enumerate(tasks)
        }
        futures = list(marks)
        for future in futures:
            future.add_done_callback(finished.put)
        try:
            for _ in futures:
                while True:
                    self._show_reports(bar)
                    try:
                        done = finished.get(timeout=POLL_S)
                        break
                    except queue.Empty:
                        continue
                if not isinstance(done.exception(), BrokenProcessPool):
                    # A result can overtake the counts its task sent before it (they travel on another
                    # pipe): the bar takes them all before the task counts as finished.
                    self._wait_for_counts(marks[done], bar)
                yield done.result()
            self._show_reports(bar)
        finally:
            for future in futures:
                future.cancel()  # those not started; a finished run cancels nothing

    def _show_reports(self, bar) -> None:
        while True:
            try:
                message = self._messages.get_nowait()
            except queue.Empty:
                return
            self._take(message, bar)

    def _take(self, message, bar) -> None:
        if isinstance(message, tuple):
            self._marked.add(message)
        elif bar is not None:
            bar.update(message)

    def _wait_for_counts(self, mark: tuple[int, int], bar) -> None:
        deadline = time.monotonic() + COUNTS_WAIT_S
        while mark not in self._marked and time.monotonic() < deadline:
            try:
                self._take(self._messages.get(timeout=POLL_S), bar)
            except queue.Empty:
                continue
        self._marked.discard(mark)

    # -- on Ray

    def _on_ray(self, fn: Callable[[T], R], tasks: list[T]) -> Iterator[R]:
        import ray

        if not ray.is_initialized():
            ray.init(address=self.ray_address, include_dashboard=False, log_to_driver=False)
        if self.initializer is None:
            yield from _ray_tasks(ray, fn, tasks, self.ray_options)
        else:
            yield from _ray_actors(ray, fn, tasks, max(1, self.workers), self.initializer, self.initargs)


def _counted(fn, mark: tuple[int, int], task):
    """``fn(task)`` in a worker process, then ``mark`` on the progress queue, behind every count the task sent."""
    try:
        return fn(task)
    finally:
        _report(mark)


def _start_worker(messages, initializer, initargs) -> None:
    global _report, _in_worker
    _report = messages.put
    _in_worker = True
    if initializer is not None:
        initializer(*initargs)


def _stop_processes(pool: ProcessPoolExecutor) -> None:
    # Python < 3.14 has no terminate_workers(): without it, shutdown would wait for every running
    # task to finish (an hour for a study's run) before the error that ended the run is shown.
    processes = list(getattr(pool, "_processes", {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        with contextlib.suppress(Exception):
            process.terminate()
    for process in processes:
        with contextlib.suppress(Exception):
            process.join()


class _RayWorker:
    """A Ray actor that is one worker: initialised once, then runs one task after another."""

    def __init__(self, initializer, initargs) -> None:
        global _in_worker
        _in_worker = True
        initializer(*initargs)

    def run(self, fn, task):
        return fn(task)


def _on_ray_task(fn, task):
    global _in_worker
    _in_worker = True
    return fn(task)


def _ray_tasks(ray, fn, tasks: list, options) -> Iterator:
    remote = ray.remote(_on_ray_task)
    pending = [remote.options(**({"num_cpus": 1} | (options(t) if options else {}))).remote(fn, t) for t in tasks]
    try:
        while pending:
            finished, pending = ray.wait(pending, num_returns=1, timeout=0.5)
            for ref in finished:
                yield ray.get(ref)
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)


def _ray_actors(ray, fn, tasks: list, workers: int, initializer, initargs) -> Iterator:
    from ray.util import ActorPool

    actor = ray.remote(num_cpus=1)(_RayWorker)
    actors = [actor.remote(initializer, initargs) for _ in range(workers)]
    try:
        yield from ActorPool(actors).map_unordered(lambda a, task: a.run.remote(fn, task), tasks)
    finally:
        for a in actors:  # give the cluster's CPUs back
            ray.kill(a)
