"""`HeldRuns`: the runs a controller holds, one per task id (guide §8.2, §8.3).

A task held here is controlled and read through its run; every other task is
reached through the store. The table is guarded by the controller's lock, which
it is given; code that holds that lock already (the scheduler) looks runs up in
the dict it keeps them in, which is given to it too.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from chongming_core import ConfigurationError
from chongming_runtime.run._task_run import TaskRun

__all__ = ["HeldRuns"]


class HeldRuns:
    """Task id -> the run held here; one run per id (a retry replaces its predecessor).

    Example::

        held = HeldRuns(lock)
        held.add(run)
        held.get(run.task_id) is run

    Args:
        lock: guards the table (the controller's lock).
        runs: the dict to keep the runs in (empty), when a holder of `lock` reads it too.
    """

    __slots__ = ("_lock", "_runs")

    def __init__(
        self, lock: AbstractContextManager[object], runs: dict[str, TaskRun] | None = None
    ) -> None:
        self._lock = lock
        self._runs: dict[str, TaskRun] = {} if runs is None else runs

    def __len__(self) -> int:
        return len(self._runs)

    def get(self, task_id: str) -> TaskRun | None:
        """The run held under `task_id`, if any."""
        with self._lock:
            return self._runs.get(task_id)

    def __contains__(self, task_id: object) -> bool:
        with self._lock:
            return task_id in self._runs

    def all(self) -> list[TaskRun]:
        """Every run held, in the order they were first held."""
        with self._lock:
            return list(self._runs.values())

    def unfinished(self) -> list[TaskRun]:
        """The runs not yet done."""
        with self._lock:
            return [run for run in self._runs.values() if not run.done]

    def unfinished_ids(self) -> set[str]:
        """The ids of the runs not yet done."""
        with self._lock:
            return {task_id for task_id, run in self._runs.items() if not run.done}

    def finished(self) -> list[TaskRun]:
        """The runs that are done."""
        with self._lock:
            return [run for run in self._runs.values() if run.done]

    def held_among(self, task_ids: list[str]) -> dict[str, TaskRun]:
        """The runs held under any of `task_ids`, by id (one look under the lock)."""
        with self._lock:
            runs = self._runs
            return {t: runs[t] for t in task_ids if t in runs}

    def add(
        self,
        run: TaskRun,
        *,
        replacing: TaskRun | None = None,
        check: Callable[[], None] | None = None,
    ) -> None:
        """Hold `run` under its task id, in place of `replacing` (a retry's predecessor).

        `check` is called first, in the same critical section (a submit that passed the
        first "not closing" check while ``close()`` took its list of runs is refused by it:
        D45).

        Raises:
            ConfigurationError: another run holds the id (a second submit under the same
                explicit id), or `replacing` was replaced already (a second retry).
        """
        task_id = run.task_id
        with self._lock:
            if check is not None:
                check()
            # one run per id: the second of two racing submits, or retries, loses here
            # instead of orphaning a run
            if self._runs.get(task_id) is not replacing:
                raise ConfigurationError(
                    f"task id {task_id!r} is already taken by a run held here; ids are never "
                    "reused — submit under a new id"
                    if replacing is None
                    else f"task {task_id!r} was retried already; wait for that run instead"
                )
            self._runs[task_id] = run

    def drop(self, run: TaskRun) -> bool:
        """Let go of `run` unless another run holds its id now; True when dropped."""
        with self._lock:
            if self._runs.get(run.task_id) is not run:  # retried under its id meanwhile
                return False
            del self._runs[run.task_id]
            return True
