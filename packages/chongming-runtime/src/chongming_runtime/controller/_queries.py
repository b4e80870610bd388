"""`Queries`: what a controller answers about tasks (guide §8.2).

Tasks held here are answered from memory, which is fresher than the batched store;
listings and counts flush pending writes first and then ask the store, so they
include other processes' tasks (D28). `Controller` delegates its queries here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from chongming_core import (
    ConfigurationError,
    Listing,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    TaskStore,
    Transition,
    unreadable_in,
)
from chongming_runtime.controller._held_runs import HeldRuns
from chongming_runtime.controller._stats import ControllerStats
from chongming_runtime.persistence._writer import StoreWriter
from chongming_runtime.pipeline._coordinator import PipelineCoordinator

__all__ = ["Queries", "statuses"]


def statuses(
    status: TaskStatus | str | Iterable[TaskStatus | str] | None,
) -> frozenset[TaskStatus] | None:
    """The statuses a ``status=`` filter names (None: any); ConfigurationError lists the
    statuses when one is unknown."""
    if status is None:
        return None
    if isinstance(status, TaskStatus | str):
        status = [status]
    try:
        return frozenset(TaskStatus(s) for s in status)
    except ValueError as exc:
        known = ", ".join(s.value for s in TaskStatus)
        raise ConfigurationError(f"{exc}; statuses are: {known}") from None


class Queries:
    """Queries of one controller: live for tasks held here, else from the store.

    Args:
        held: the runs held here.
        pipelines: the nodes not yet released (held here, but not runs).
        store: every other task.
        writer: flushed before the store is asked for a listing.
        stamp: puts this node's current lease on a live snapshot.
    """

    def __init__(
        self,
        *,
        held: HeldRuns,
        pipelines: PipelineCoordinator,
        store: TaskStore,
        writer: StoreWriter,
        stamp: Callable[[TaskSnapshot], TaskSnapshot],
    ) -> None:
        self._held = held
        self._pipelines = pipelines
        self._store = store
        self._writer = writer
        self._stamp = stamp

    def get(self, task_id: str) -> TaskSnapshot | None:
        """The task's snapshot, live when held here (`Controller.get`), unless another process
        wrote it while this node held it (D177): then the store's record stands."""
        run = self._held.get(task_id)
        if run is not None and not self._writer.diverged(task_id):
            return self._stamp(run.snapshot)
        held = self._pipelines.snapshot(task_id)
        if held is not None:
            return held
        return self._store.get(task_id)

    def history(self, task_id: str) -> list[Transition]:
        """The task's whole trajectory (`Controller.history`)."""
        run = self._held.get(task_id)
        if run is not None and not run.snapshot.durable and not self._writer.diverged(task_id):
            return list(run.transitions)
        # a durable task claimed here holds only the transitions made here (D149)
        self._writer.flush()
        return self._store.history(task_id)

    def list_tasks(self, query: TaskQuery) -> list[TaskSnapshot]:
        """The tasks `query` matches, from the store, fresher when held here
        (`Controller.list_tasks`)."""
        self._writer.flush()
        found = self._store.query(query)
        unreadable = unreadable_in(found)
        live = self._held.held_among([s.task_id for s in found])
        if not live:
            return found if isinstance(found, Listing) else Listing(found, unreadable)
        result = []
        for snap in found:
            run = live.get(snap.task_id)
            if run is None or self._writer.diverged(snap.task_id):  # the store's record stands
                result.append(snap)
                continue
            fresh = self._stamp(run.snapshot)
            result.append(fresh if query.matches(fresh) else snap)
        return Listing(result, unreadable)

    def stats(self) -> ControllerStats:
        """Per-status counts of every task in the store (`Controller.stats`)."""
        self._writer.flush()
        counts = self._store.status_counts()
        return ControllerStats(counts, unreadable_in(counts))

    def bucket_counts(self) -> dict[int, int]:
        """Tasks per bucket, from the store (`Controller.bucket_counts`)."""
        self._writer.flush()
        return self._store.bucket_counts()
