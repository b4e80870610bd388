"""`ControllerQueries`: what a `Controller` answers about tasks (guide §8.2)."""

from collections.abc import Iterable

from chongming_core import (
    ConfigurationError,
    Listing,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    Transition,
    unreadable_in,
)
from chongming_runtime.controller._base import ControllerBase
from chongming_runtime.controller._stats import ControllerStats
from chongming_runtime.run._task_run import TaskRun

__all__ = ["ControllerQueries"]

_S = TaskStatus


def _statuses(
    status: TaskStatus | str | Iterable[TaskStatus | str] | None,
) -> frozenset[TaskStatus] | None:
    if status is None:
        return None
    if isinstance(status, TaskStatus | str):
        status = [status]
    try:
        return frozenset(TaskStatus(s) for s in status)
    except ValueError as exc:
        known = ", ".join(s.value for s in TaskStatus)
        raise ConfigurationError(f"{exc}; statuses are: {known}") from None


class ControllerQueries(ControllerBase):
    """Queries of a `Controller`: live for tasks held here, else from the store (a mixin)."""

    # ================================================================ queries
    def runs(self) -> list[TaskRun]:
        """Every run handle held by this process (continue to control them by id)."""
        with self._lock:
            return list(self._runs.values())

    def run(self, task_id: str) -> TaskRun | None:
        """The run handle of `task_id` if this process holds it."""
        with self._lock:
            return self._runs.get(task_id)

    def get(self, task_id: str) -> TaskSnapshot | None:
        """The task's snapshot (live for tasks held here, else from the store); None if unknown."""
        with self._lock:
            run = self._runs.get(task_id)
        if run is not None:
            return self._stamp_lease(run.snapshot)
        held = self._pipelines.snapshot(task_id)
        if held is not None:
            return held
        return self.store.get(task_id)

    def history(self, task_id: str) -> list[Transition]:
        """The task's whole trajectory.

        From the store, a `Listing`: a stored transition that cannot be decoded is left
        out and named in its ``unreadable``.
        """
        with self._lock:
            run = self._runs.get(task_id)
        if run is not None:
            return list(run.transitions)
        self._writer.flush()
        return self.store.history(task_id)

    def list_tasks(
        self,
        status: TaskStatus | str | Iterable[TaskStatus | str] | None = None,
        *,
        name_prefix: str | None = None,
        tag: str | None = None,
        bucket: int | None = None,
        buckets: Iterable[int] | None = None,
        search: str | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[TaskSnapshot]:
        """Tasks matching the filters, from the store (so other processes' tasks too).

        Returns a `Listing` (a list): a stored task that cannot be decoded is left out
        and named in its ``unreadable``, so one damaged row never hides the others.
        """
        query = TaskQuery(
            statuses=_statuses(status),
            name_prefix=name_prefix,
            tag=tag,
            bucket=bucket,
            buckets=None if buckets is None else frozenset(buckets),
            search=search,
            limit=limit,
            newest_first=newest_first,
        )
        self._writer.flush()
        found = self.store.query(query)
        unreadable = unreadable_in(found)
        with self._lock:
            live = {s.task_id: self._runs[s.task_id] for s in found if s.task_id in self._runs}
        if not live:
            return found if isinstance(found, Listing) else Listing(found, unreadable)
        result = []
        for snap in found:
            run = live.get(snap.task_id)
            fresh = self._stamp_lease(run.snapshot) if run is not None else snap
            result.append(fresh if query.matches(fresh) else snap)
        return Listing(result, unreadable)

    def stats(self) -> ControllerStats:
        """Per-status counts of every task in the store, plus ``unfinished``; a task whose
        stored status cannot be read is counted under none and named in ``unreadable``."""
        self._writer.flush()
        counts = self.store.status_counts()
        return ControllerStats(counts, unreadable_in(counts))

    def bucket_counts(self) -> dict[int, int]:
        """Tasks per bucket (used to decide which node takes which buckets); from the
        store, a `Counts` whose ``unreadable`` names tasks whose bucket cannot be read."""
        self._writer.flush()
        return self.store.bucket_counts()

    @property
    def active_count(self) -> int:
        """Tasks really holding an execution slot in this process (paused in place included)."""
        with self._lock:
            return self._capacity.active

    @property
    def queued_count(self) -> int:
        """Tasks of this process waiting for a slot (status ``queued``)."""
        with self._lock:
            runs = list(self._runs.values())
        return sum(1 for r in runs if r.status is _S.QUEUED)

    def active_in_bucket(self, bucket: int) -> int:
        """Slots held by tasks of `bucket` in this process."""
        with self._lock:
            return self._capacity.active_in_bucket(bucket)
