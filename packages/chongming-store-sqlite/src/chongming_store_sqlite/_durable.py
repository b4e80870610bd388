"""Durable work in SQLite: the claim, worker rows and this process's wake-ups.

A claim runs inside the caller's ``BEGIN IMMEDIATE`` transaction, so no other
connection (thread or process) writes between the reading of the candidates and
the fleet counts and the writing of the leases: two claimers can neither take the
same task nor both see room under a fleet limit. Candidates are read in claim
order from the partial index ``tasks_claim`` a page at a time, until the request's
room is used up; the choice itself is the core's (`choose_claims`).

SQLite has no notification channel: `Signals` wakes the waiters of this process
(every store object on the same file shares one), and a worker polls for the rest.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from chongming_core import ClaimRequest, ConfigurationError, TaskSnapshot, WorkerRecord
from chongming_core.backend import (
    ChangeSignals,
    UnreadableRow,
    WakeUp,
    choose_claims,
    claim_writes,
    claimable,
    decode_row,
    holds_fleet_slot,
    parse_time,
    shown,
    wakes_workers,
)
from chongming_store_sqlite import _schema as sql
from chongming_store_sqlite._codec import (
    SNAPSHOT_COLUMNS,
    dumps,
    encode_snapshot,
    iso,
    micros,
    snapshot_from_row,
)
from chongming_store_sqlite._fetching import fetch_all
from chongming_store_sqlite._writes import apply_writes

__all__ = ["Signals", "any_candidate", "claim", "signals_for", "worker_from_row", "worker_row"]

#: Candidates read per page: a few times the room asked for, so that tasks skipped for
#: their tags or bucket rarely need a second page.
_PAGE_FACTOR = 4
_MIN_PAGE = 64

# INDEXED BY: walked in claim order, the first page costs a page, never a sort of them all
_CANDIDATES = (
    f"SELECT seq, {SNAPSHOT_COLUMNS} FROM tasks INDEXED BY tasks_claim "
    "WHERE durable = 1 AND status = 'queued' "
    "AND name IN (SELECT value FROM json_each(?)) "
    "AND (? IS NULL OR bucket IN (SELECT value FROM json_each(?))) "
    "AND (run_at_us IS NULL OR run_at_us <= ?) "
    "AND (lease_owner IS NULL OR lease_until_us IS NULL OR lease_until_us <= ?) "
    "AND (? IS NULL OR priority < ? OR (priority = ? AND seq > ?)) "
    "ORDER BY priority DESC, seq LIMIT ?"
)
# the durable tasks that may hold a slot of a limited tag (the rule itself is the core's)
_FLEET_HOLDERS = (
    f"SELECT {SNAPSHOT_COLUMNS} FROM tasks "
    "WHERE durable = 1 "
    "AND status IN ('starting', 'running', 'pausing', 'stopping', 'paused', 'queued') "
    "AND (status != 'queued' OR (lease_owner IS NOT NULL AND lease_until_us > ?)) "
    "AND task_id IN (SELECT task_id FROM task_tags "
    "WHERE tag IN (SELECT value FROM json_each(?)))"
)


_ANY_CANDIDATE = (
    "SELECT 1 FROM tasks INDEXED BY tasks_claim "
    "WHERE durable = 1 AND status = 'queued' "
    "AND name IN (SELECT value FROM json_each(?)) "
    "AND (? IS NULL OR bucket IN (SELECT value FROM json_each(?))) "
    "AND (run_at_us IS NULL OR run_at_us <= ?) "
    "AND (lease_owner IS NULL OR lease_until_us IS NULL OR lease_until_us <= ?) "
    "LIMIT 1"
)


def any_candidate(conn: sqlite3.Connection, request: ClaimRequest) -> bool:
    """Whether `claim` may find anything for `request` (read without the write lock; the
    claim checks again under it)."""
    now_us = micros(request.now, "now")
    names = json.dumps(sorted(request.names))
    buckets = None if request.buckets is None else json.dumps(sorted(request.buckets))
    return bool(fetch_all(conn, _ANY_CANDIDATE, (names, buckets, buckets, now_us, now_us)))


def claim(
    conn: sqlite3.Connection,
    request: ClaimRequest,
    stored_outcome: Callable[[object], object],
) -> list[TaskSnapshot]:
    """Choose and lease (or start) the tasks `request` claims, inside the caller's write
    transaction; `stored_outcome` is the store's (a start is written as any save)."""
    if request.limit <= 0 or not request.names:
        return []
    now_us = micros(request.now, "now")
    fleet_active = _fleet_active(conn, request, now_us)
    names = json.dumps(sorted(request.names))
    buckets = None if request.buckets is None else json.dumps(sorted(request.buckets))
    # with no room per tag or bucket to count, every candidate the query finds is taken:
    # a page of `limit` rows (each one decoded) is all a claim reads
    counted = request.tag_room or request.fleet_limits or request.bucket_room is not None
    page = max(_MIN_PAGE, request.limit * _PAGE_FACTOR) if counted else request.limit
    seen: list[TaskSnapshot] = []
    chosen: list[TaskSnapshot] = []
    after: tuple[int, int] | None = None
    while True:
        key = (None, None, None, None) if after is None else (1, after[0], after[0], after[1])
        params = (names, buckets, buckets, now_us, now_us, *key, page)
        rows = fetch_all(conn, _CANDIDATES, params)
        for row in rows:
            found = snapshot_from_row(row[1:])
            if isinstance(found, TaskSnapshot) and claimable(found, request):
                seen.append(found)
        chosen = choose_claims(seen, request, fleet_active)
        if len(chosen) >= request.limit or len(rows) < page:
            break
        last = rows[-1]
        after = (int(last[12]), int(last[0]))  # the priority column, then seq
    if request.start is not None:
        writes = claim_writes(chosen, request)
        items = [
            encode_snapshot(w.snapshot, w.expect_version, w.transitions, stored_outcome)
            for w in writes
        ]
        conflicts = apply_writes(conn, items)
        if conflicts:  # never under BEGIN IMMEDIATE: nothing else writes meanwhile
            raise conflicts[0]
        return [w.snapshot for w in writes]
    until_iso, until_us = (
        iso(request.lease_until, "lease_until"),
        micros(request.lease_until, "lease_until"),
    )
    leases = [(request.owner, until_iso, until_us, s.task_id, s.status_version) for s in chosen]
    conn.executemany(sql.LEASE_TASK, leases)
    stored = {s.task_id: s.tags for s in seen}
    tagged = [s for s in chosen if s.tags != stored.get(s.task_id)]  # the claimant's tags
    if tagged:
        conn.executemany(
            sql.SET_TAGS,
            [(dumps(sorted(s.tags)), dumps(sorted(s.tags)), s.task_id) for s in tagged],
        )
        conn.executemany(sql.INSERT_TAG, [(s.task_id, tag) for s in tagged for tag in s.tags])
    return [s.evolve(lease_owner=request.owner, lease_until=request.lease_until) for s in chosen]


def _fleet_active(conn: sqlite3.Connection, request: ClaimRequest, now_us: int) -> dict[str, int]:
    """Per limited tag, the durable tasks holding it that hold a fleet slot now."""
    if not request.fleet_limits:
        return {}
    limited = request.fleet_limits.keys()
    rows = fetch_all(conn, _FLEET_HOLDERS, (now_us, json.dumps(sorted(limited))))
    active: dict[str, int] = {}
    for row in rows:
        found = snapshot_from_row(row)
        if isinstance(found, TaskSnapshot) and holds_fleet_slot(found, request.now):
            for tag in found.tags & limited:
                active[tag] = active.get(tag, 0) + 1
    return active


def worker_row(record: WorkerRecord) -> tuple[object, ...]:
    """The row of `record` (`schema.WORKER_COLUMNS` order)."""
    return (
        record.owner,
        record.host,
        record.pid,
        None if record.buckets is None else dumps(list(record.buckets)),
        dumps(list(record.names)),
        dumps(dict(record.capacity)),
        iso(record.started_at, "started_at"),
        iso(record.last_seen, "last_seen"),
        iso(record.lease_until, "lease_until"),
        micros(record.lease_until, "lease_until"),
    )


def worker_from_row(row: Sequence[Any]) -> WorkerRecord | UnreadableRow:
    """The record of a worker row, or the `UnreadableRow` saying what is wrong with it."""
    return decode_row(row[0], lambda: _worker(row), part="worker row")


def _worker(row: Sequence[Any]) -> WorkerRecord:
    owner, host, pid, buckets, names, capacity, started, seen, until, _ = row

    def loaded(text: object, what: str) -> Any:
        if not isinstance(text, str):
            raise ValueError(f"{what} must be JSON text, got {shown(text)}")
        return json.loads(text)

    def moment(text: object, what: str) -> Any:
        if not isinstance(text, str):
            raise ValueError(f"{what} must be an ISO-8601 time, got {shown(text)}")
        return parse_time(text)

    try:
        return WorkerRecord(
            owner=owner,
            host=host,
            pid=pid,
            buckets=None if buckets is None else tuple(loaded(buckets, "buckets")),
            names=tuple(loaded(names, "names")),
            capacity=loaded(capacity, "capacity"),
            started_at=moment(started, "started_at"),
            last_seen=moment(seen, "last_seen"),
            lease_until=moment(until, "lease_until"),
        )
    except ConfigurationError as exc:  # a value of the wrong kind in the row
        raise ValueError(str(exc)) from None


class Signals:
    """The wake-ups of one database in this process: new work, commands, and tasks that
    ended."""

    def __init__(self) -> None:
        self.work = WakeUp()
        self.commands = WakeUp()
        self.changes = ChangeSignals()

    def written(self, snapshots: Iterable[TaskSnapshot]) -> None:
        """Wake the waiters for what the applied writes of `snapshots` changed."""
        written = list(snapshots)
        if any(wakes_workers(s) for s in written):
            self.work.set()
        ended = [s.task_id for s in written if s.durable and s.is_terminal]
        if ended:
            self.changes.notify(ended)


_SIGNALS: dict[str, Signals] = {}
_SIGNALS_LOCK = threading.Lock()


def signals_for(path: str | None) -> Signals:
    """The `Signals` of the database file `path`, shared by every store object of this
    process on it (None: a private one, for ``:memory:``)."""
    if path is None:
        return Signals()
    with _SIGNALS_LOCK:
        found = _SIGNALS.get(path)
        if found is None:
            found = _SIGNALS[path] = Signals()
        return found
