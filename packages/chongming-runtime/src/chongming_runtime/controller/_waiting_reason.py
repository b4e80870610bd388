"""Why a durable task waits: the one decision the console's `status` and `ps` and the
dashboard show (`Controller.waiting_reasons` reads the worker rows it needs).

A durable task that is ``queued`` and held by nobody waits for a worker to claim it.
`waiting_reason` says what keeps it waiting, from what the store knows of the
workers: no live worker serves its name, none of those that do owns its bucket, or
its ``run_at`` is still to come. Otherwise (a worker can claim it; it just has not
yet) it says nothing.

Example::

    reason = waiting_reason(snapshot, now=now, served=store.served_names(now),
                            workers=store.workers())
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import UTC, datetime

from chongming_core import TaskSnapshot, TaskStatus, TaskStore, WorkerRecord

__all__ = ["needs_workers", "waiting_reason", "waiting_reasons"]


def needs_workers(snapshot: TaskSnapshot, now: datetime) -> bool:
    """Whether `snapshot` is a durable task waiting for a claim (queued, no live lease)."""
    lease = snapshot.lease_until
    claimed = snapshot.lease_owner is not None and lease is not None and lease > now
    return snapshot.durable and snapshot.status is TaskStatus.QUEUED and not claimed


def waiting_reason(
    snapshot: TaskSnapshot,
    *,
    now: datetime,
    served: Collection[str],
    workers: Iterable[WorkerRecord],
) -> str | None:
    """What keeps a durable queued task from being claimed, or None.

    Args:
        snapshot: the task.
        now: the moment to judge at (leases and ``run_at`` are compared with it).
        served: the names live workers serve (`TaskStore.served_names` at `now`).
        workers: the worker rows (`TaskStore.workers`), live and expired.

    Returns:
        ``no worker serves 'x'``, ``no live worker owns bucket N`` or ``due at TIME``
        (the first that applies); None for any other task, or one a worker can claim now.
    """
    if not needs_workers(snapshot, now):
        return None
    if snapshot.name not in served:
        return f"no worker serves {snapshot.name!r}"
    bucket = snapshot.bucket
    if bucket is not None and not any(
        w.is_live(now) and snapshot.name in w.names and (w.buckets is None or bucket in w.buckets)
        for w in workers
    ):
        return f"no live worker owns bucket {bucket}"
    due = snapshot.run_at
    if due is not None and due > now:
        return f"due at {due.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S UTC')}"
    return None


def waiting_reasons(
    store: TaskStore, snapshots: Sequence[TaskSnapshot], now: datetime
) -> dict[str, str]:
    """Task id -> why it waits, for the durable queued tasks among `snapshots` (the worker
    rows are read only when there is such a task)."""
    waiting = [s for s in snapshots if needs_workers(s, now)]
    if not waiting or not store.supports_durable_work:
        return {}
    served = store.served_names(now)
    workers = store.workers()
    reasons = {
        s.task_id: waiting_reason(s, now=now, served=served, workers=workers) for s in waiting
    }
    return {task_id: reason for task_id, reason in reasons.items() if reason is not None}
