"""Why a durable task waits: the one decision the console's `status` and `ps` and the
dashboard show (`Controller.waiting_reasons` reads the worker rows it needs).

A durable task that is ``queued`` and held by nobody waits for a worker to claim it.
`waiting_reason` says what keeps it waiting, from what the store knows of the
workers: no live worker serves its name, none of those that do owns its bucket, its
``run_at`` is still to come, or every slot of a fleet limit it needs is held (counted
from the tasks that hold one, never guessed: D180). Otherwise (a worker can claim it;
it just has not yet) it says nothing.

Example::

    reason = waiting_reason(snapshot, now=now, served=store.served_names(now),
                            workers=store.workers())
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime

from chongming_core import (
    ACTIVE_STATUSES,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    TaskStore,
    WorkerRecord,
)
from chongming_core.backend import FLEET_STATUSES, holds_fleet_slot

__all__ = [
    "active_by_worker",
    "fleet_held_for",
    "fleet_limits_of",
    "fleet_limits_of_row",
    "fleet_slots_held",
    "needs_workers",
    "registered_tags_of_row",
    "waiting_reason",
    "waiting_reasons",
]


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
    fleet_held: Mapping[str, int] | None = None,
) -> str | None:
    """What keeps a durable queued task from being claimed, or None.

    Args:
        snapshot: the task.
        now: the moment to judge at (leases and ``run_at`` are compared with it).
        served: the names live workers serve (`TaskStore.served_names` at `now`).
        workers: the worker rows (`TaskStore.workers`), live and expired.
        fleet_held: per tag, the durable tasks seen holding a fleet slot of it
            (`fleet_slots_held`); a tag left out is not judged.

    Returns:
        ``no worker serves 'x'``, ``no live worker owns bucket N`` (or every bucket, for
        a task without one), ``due at TIME`` or ``fleet limit 'gpu' is full (4 of 4
        held)`` (the first that applies); None for any other task, or one a worker can
        claim now.
    """
    if not needs_workers(snapshot, now):
        return None
    if snapshot.name not in served:
        return f"no worker serves {snapshot.name!r}"
    bucket = snapshot.bucket
    # a task without a bucket is claimed only by a worker that owns every bucket
    able = [
        w
        for w in workers
        if w.is_live(now)
        and snapshot.name in w.names
        and (w.buckets is None or (bucket is not None and bucket in w.buckets))
    ]
    if not able:
        if bucket is None:
            return "no live worker owns every bucket, as a task without a bucket needs"
        return f"no live worker owns bucket {bucket}" + _counted_fewer(bucket, workers, now)
    due = snapshot.run_at
    if due is not None and due > now:
        return f"due at {_shown_time(due)}"
    if fleet_held:
        live = [w for w in workers if w.is_live(now)]
        return _fleet_full(snapshot, able, fleet_held, fleet_limits_of(live))
    return None


def _counted_fewer(bucket: int, workers: Iterable[WorkerRecord], now: datetime) -> str:
    """The hint for a task whose bucket is past the bucket count of every live worker
    (their rows carry ``capacity["num_buckets"]``): its producer counted more buckets, so
    no worker will ever own it. Empty when some live worker counts enough, or a row does
    not say."""
    said = [w.capacity.get("num_buckets") for w in workers if w.is_live(now)]
    counts = [n for n in said if type(n) is int]
    if not counts or len(counts) != len(said):
        return ""
    most = max(counts)
    if bucket < most:
        return ""
    return (
        f": the live workers count {most} buckets (--num-buckets), so none ever owns it; "
        "it was enqueued by a node counting more: give every node the same count"
    )


def _shown_time(moment: datetime) -> str:
    """`moment` in UTC, or as stored when UTC cannot hold it (a row written by another
    program: it must not take the rest of a listing down with it)."""
    try:
        return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (OverflowError, ValueError):
        return moment.isoformat(sep=" ")


def _fleet_full(
    snapshot: TaskSnapshot,
    able: Sequence[WorkerRecord],
    held: Mapping[str, int],
    limits: Mapping[str, int],
) -> str | None:
    """``fleet limit 't' is full (n of m held)`` when every worker able to claim `snapshot`
    finds one of the fleet's `limits` used up for a tag it would hold there (its own, or
    for a task enqueued without tags the worker's registered ones); None when one has
    room."""
    full: dict[str, int] = {}  # tag -> its limit, each one that holds a worker back
    for worker in sorted(able, key=lambda w: w.owner):
        blocking = sorted(
            (tag, limits[tag])
            for tag in tags_held_at(snapshot, worker)
            if tag in limits and tag in held and held[tag] >= limits[tag]
        )
        if not blocking:
            return None  # this worker has room for it
        full.update(blocking)
    parts = [
        f"{tag!r} ({held[tag]} of {limit} held)" if limit else f"{tag!r} (0: none may run)"
        for tag, limit in sorted(full.items())
    ]
    if len(parts) == 1:
        return "fleet limit " + parts[0].replace(" (", " is full (", 1)
    return "fleet limits are full: " + ", ".join(parts)


def registered_tags_of_row(worker: WorkerRecord) -> dict[str, frozenset[str]]:
    """Per task name, the tags a worker row says the name is registered with there (its
    ``capacity``'s ``registered_tags``): a task enqueued without tags holds these when
    that worker claims it. A value that is not a list of strings is left out."""
    declared = worker.capacity.get("registered_tags")
    if not isinstance(declared, Mapping):
        return {}
    return {
        str(name): frozenset(tags)
        for name, tags in declared.items()
        if isinstance(tags, list) and all(isinstance(tag, str) for tag in tags)
    }


def tags_held_at(snapshot: TaskSnapshot, worker: WorkerRecord) -> frozenset[str]:
    """The tags `snapshot` would hold if `worker` claimed it (`claim_tags`)."""
    return snapshot.tags or registered_tags_of_row(worker).get(snapshot.name, frozenset())


def fleet_limits_of(
    workers: Iterable[WorkerRecord], declared: Mapping[str, int] | None = None
) -> dict[str, int]:
    """The fleet limits every worker's claims hold to: each one a worker among `workers`
    (or `declared`, a worker's own) declares, the smallest where several declare one tag
    (`WorkServer` learns its own this way)."""
    limits: dict[str, int] = dict(declared or {})
    for worker in workers:
        for tag, n in fleet_limits_of_row(worker).items():
            limits[tag] = min(n, limits.get(tag, n))
    return limits


def fleet_limits_of_row(worker: WorkerRecord) -> dict[str, int]:
    """The fleet limits a worker row declares (its ``capacity``); a value that is not a
    whole number is left out."""
    declared = worker.capacity.get("fleet_limits")
    if not isinstance(declared, Mapping):
        return {}
    return {
        str(tag): n
        for tag, n in declared.items()
        if isinstance(n, int) and not isinstance(n, bool) and n >= 0
    }


def fleet_held_for(
    store: TaskStore,
    snapshots: Iterable[TaskSnapshot],
    workers: Iterable[WorkerRecord],
    now: datetime,
) -> dict[str, int] | None:
    """The `waiting_reason` ``fleet_held`` of `snapshots`: counted only for the tags that a
    task among them waiting for a claim holds and a live worker limits (None: none)."""
    live = [w for w in workers if w.is_live(now)]
    limited = {tag for w in live for tag in fleet_limits_of_row(w)}
    if not limited:
        return None
    needed = {
        tag for s in snapshots if needs_workers(s, now) for w in live for tag in tags_held_at(s, w)
    } & limited
    return fleet_slots_held(store, needed, now) if needed else None


def fleet_slots_held(store: TaskStore, tags: Iterable[str], now: datetime) -> dict[str, int]:
    """Per tag, the durable tasks that hold a fleet slot of it at `now` among those started
    and not ended (`holds_fleet_slot`). A queued task claimed under a live lease also holds
    one but is not read here (the queue may be long): the counts are never more than the
    truth, so a limit they show full is full."""
    statuses = FLEET_STATUSES | {TaskStatus.PAUSED}  # paused in place holds its slot
    held: dict[str, int] = {}
    for tag in sorted(set(tags)):
        found = store.query(TaskQuery(tag=tag, statuses=statuses))
        held[tag] = sum(1 for s in found if holds_fleet_slot(s, now))
    return held


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
    held = fleet_held_for(store, waiting, workers, now)
    reasons = {
        s.task_id: waiting_reason(s, now=now, served=served, workers=workers, fleet_held=held)
        for s in waiting
    }
    return {task_id: reason for task_id, reason in reasons.items() if reason is not None}


def active_by_worker(store: TaskStore, workers: Iterable[WorkerRecord]) -> dict[str, int]:
    """Per worker row, how many tasks the store shows active under its lease (starting,
    running, pausing or stopping, held by its owner): what a live worker is doing, or what
    an expired one left for `reconcile`. One count per worker, read from the store."""
    active: dict[str, int] = {}
    for worker in workers:
        query = TaskQuery(lease_owner=worker.owner, statuses=ACTIVE_STATUSES)
        active[worker.owner] = sum(store.status_counts(query).values())
    return active
