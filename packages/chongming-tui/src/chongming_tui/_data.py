"""The refresh: one round of queries through the Controller, run off the UI thread.

`fetch` is the only code that reads the store. It uses the Controller's query
side only (`stats`, `list_tasks` with a limit, `get`, `history`), so the
dashboard sees exactly what every other console sees and bypasses nothing.
`PendingAction` turns "a command was sent" into "the change was observed",
because a pause of a task held by another process has no receipt.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from chongming_core import (
    Clock,
    TaskSnapshot,
    TaskStatus,
    Transition,
    UnreadableRow,
    WorkerRecord,
    unreadable_in,
)
from chongming_runtime import Controller, ControllerStats, active_by_worker, fleet_held_for
from chongming_tui._filters import TaskFilter

__all__ = ["PendingAction", "Refresh", "WaitingReason", "fetch"]

#: Why a durable queued task waits, or None: called as ``reason(snapshot, now=...,
#: served=..., workers=..., fleet_held=...)`` (`chongming_runtime.waiting_reason` by
#: default).
WaitingReason = Callable[..., str | None]

_S = TaskStatus


@dataclass(frozen=True, slots=True)
class Refresh:
    """What one refresh read, and when.

    Attributes:
        generation: the view version it was fetched for (stale results are dropped).
        task_filter: the view it was fetched for.
        stats: per-status counts of the whole store.
        tasks: the rows of the view, in store order, at most ``task_filter.limit``.
        detail_id: the task whose detail was fetched (None: no detail open).
        detail: its snapshot (None: unknown or no detail open).
        history: its whole trajectory.
        watched: fresh snapshots of tasks with an action awaiting confirmation.
        now: the wall-clock moment ages and elapsed times are computed for.
        fetched_at: the clock's monotonic time at the end of the fetch.
        took: seconds the queries took (real time).
        request: the number of the refresh request it answers (they count up).
        unreadable: the stored rows these queries met but could not read (in the view, the
            counts or the detail's history), each once; everything else is shown as usual.
        workers: the worker rows of the store, live and expired (none when the store keeps
            no durable work).
        waiting: task id -> why that durable queued task waits (tasks of the view and the
            detail; only when the dashboard was given a `WaitingReason`).
        active: per worker owner, the tasks the store shows active under its lease
            (`active_by_worker`).
    """

    generation: int
    task_filter: TaskFilter
    stats: ControllerStats
    tasks: tuple[TaskSnapshot, ...]
    detail_id: str | None = None
    detail: TaskSnapshot | None = None
    history: tuple[Transition, ...] = ()
    watched: Mapping[str, TaskSnapshot | None] = field(default_factory=dict)
    now: datetime | None = None
    fetched_at: float = 0.0
    took: float = 0.0
    request: int = 0
    unreadable: tuple[UnreadableRow, ...] = ()
    workers: tuple[WorkerRecord, ...] = ()
    waiting: Mapping[str, str] = field(default_factory=dict)
    active: Mapping[str, int] = field(default_factory=dict)


def fetch(
    controller: Controller,
    task_filter: TaskFilter,
    *,
    clock: Clock,
    generation: int = 0,
    detail_id: str | None = None,
    watched_ids: Collection[str] = (),
    request: int = 0,
    waiting_reason: WaitingReason | None = None,
) -> Refresh:
    """Run the queries of one refresh (blocking: call it from a worker thread)."""
    started = time.perf_counter()
    stats = controller.stats()
    listed = controller.list_tasks(**task_filter.query_kwargs())
    tasks = tuple(listed)
    unreadable = [*unreadable_in(listed), *stats.unreadable]
    detail = None
    history: tuple[Transition, ...] = ()
    if detail_id is not None:
        detail = controller.get(detail_id)
        if detail is not None:
            trajectory = controller.history(detail_id)
            history = tuple(trajectory)
            unreadable.extend(unreadable_in(trajectory))
    shown = {s.task_id: s for s in tasks}
    watched = {
        task_id: shown[task_id] if task_id in shown else controller.get(task_id)
        for task_id in watched_ids
    }
    now = clock.now()
    store = controller.store
    workers: tuple[WorkerRecord, ...] = ()
    waiting: dict[str, str] = {}
    active: dict[str, int] = {}
    if store.supports_durable_work:
        workers = tuple(store.workers())
        active = active_by_worker(store, workers)
        if waiting_reason is not None:
            served = store.served_names(now)
            judged = (*tasks, *([detail] if detail is not None else []))
            held = fleet_held_for(store, judged, workers, now)
            for snapshot in judged:
                reason = waiting_reason(
                    snapshot, now=now, served=served, workers=workers, fleet_held=held
                )
                if reason is not None:
                    waiting[snapshot.task_id] = reason
    return Refresh(
        generation=generation,
        task_filter=task_filter,
        stats=stats,
        tasks=tasks,
        detail_id=detail_id,
        detail=detail,
        history=history,
        watched=watched,
        now=now,
        fetched_at=clock.monotonic(),
        took=time.perf_counter() - started,
        request=request,
        unreadable=_once(unreadable),
        workers=workers,
        waiting=waiting,
        active=active,
    )


def _once(rows: list[UnreadableRow]) -> tuple[UnreadableRow, ...]:
    """`rows` with each stored row once (a task listed and counted is met twice)."""
    seen: dict[tuple[str, str | None], UnreadableRow] = {}
    for row in rows:
        seen.setdefault((row.task_id, row.part), row)
    return tuple(seen.values())


@dataclass(slots=True)
class PendingAction:
    """An action sent for a task, waiting until its effect is seen in the store.

    Attributes:
        task_id: the task.
        action: ``"stop"``, ``"pause"`` or ``"resume"``.
        seen: statuses observed since the action was sent.
    """

    task_id: str
    action: str
    seen: set[TaskStatus] = field(default_factory=set)

    def settle(self, snapshot: TaskSnapshot | None) -> str | None:
        """The outcome once it is observed (a sentence), else None (still pending)."""
        who = self.task_id
        if snapshot is None:
            return f"{self.action} of {who}: the task is no longer in the store"
        status = snapshot.status
        self.seen.add(status)
        if self.action == "pause":
            if status is _S.PAUSED:
                return f"pause of {who} confirmed: the task is paused"
            if status.is_terminal:
                return f"pause of {who} not applied: the task ended {status.value}"
            if _S.PAUSING in self.seen and status is _S.RUNNING:
                return f"pause of {who} not reached: the task went back to running"
            return None
        if self.action == "resume":
            if status.is_terminal:
                return f"resume of {who}: the task ended {status.value}"
            if status not in {_S.PAUSED, _S.PAUSING}:
                return f"resume of {who} confirmed: the task is {status.value}"
            return None
        if status is _S.STOPPED:
            return f"stop of {who} confirmed: the task is stopped"
        if status.is_terminal:
            return f"stop of {who}: the task ended {status.value} first"
        return None
