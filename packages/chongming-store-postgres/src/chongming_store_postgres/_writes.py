"""Snapshot writes: create, compare-and-set save and the group commit.

Each write is one statement that changes the task row and appends its
transitions only if the row changed (a data-modifying CTE), so a single `save`
costs one round trip. `save_many` of distinct tasks is one set-based statement
over column arrays (`SAVE_BATCH`: about five times the transitions per second of
single saves); a batch that writes one task more than once sends one statement
per write, in one pipeline inside one transaction, so that later items see
earlier ones.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from chongming_core import ConcurrencyConflict, SnapshotWrite, TaskSnapshot, Transition
from chongming_core.backend import format_time, portable_json, version_conflict
from chongming_store_postgres._codec import (
    snapshot_from_row,
    snapshot_params,
    transition_arrays,
    transition_from_row,
)
from chongming_store_postgres._queries import BATCH_TYPES, Statements

__all__ = ["Announce", "Conn", "Prepared", "apply_writes", "conflict", "prepare"]

Conn = psycopg.Connection[tuple[Any, ...]]
#: A rendered statement and its parameters.
Prepared = tuple[bytes, dict[str, Any]]
#: The notification an applied write sends at commit: ``(channel, payload)``, or Nones.
Announce = Callable[[TaskSnapshot], tuple[str | None, str | None]]


def _silent(snapshot: TaskSnapshot) -> tuple[str | None, str | None]:
    return None, None


def prepare(
    writes: Sequence[SnapshotWrite],
    q: Statements,
    stored_outcome: Callable[[Any], object] = portable_json,
    announce: Announce = _silent,
) -> list[Prepared]:
    """The statement of each write; checks every value first (NUL bytes, JSON, times, and
    the outcome with the store's own `stored_outcome`; by default the shared rules).
    `announce` names the notification each write sends when it is applied (none by
    default)."""
    prepared: list[Prepared] = []
    for write in writes:
        params = snapshot_params(write.snapshot, stored_outcome)
        params.update(transition_arrays(write.transitions))
        params["notify_channel"], params["notify_payload"] = announce(write.snapshot)
        if write.expect_version is None:
            prepared.append((q.create_task, params))
        else:
            params["expect_version"] = write.expect_version
            prepared.append((q.save_task, params))
    return prepared


def _task_id_of(row: dict[str, Any]) -> str:
    task_id: str = row["task_id"]
    return task_id


def batch_params(
    writes: Sequence[SnapshotWrite], prepared: Sequence[Prepared]
) -> dict[str, Any] | None:
    """The parameters of `SAVE_BATCH` for `writes`, or None when it does not apply.

    It applies to two or more writes of distinct tasks; a batch that writes one task
    twice (a create and its save, or a chain of saves) runs statement by statement,
    so that each item is checked against the ones before it. The rows travel as two JSON
    texts (one of tasks, one of transitions), made by the C encoder from values already
    checked by `prepare`; a value JSON cannot carry exactly (a float that is not finite)
    sends the writes statement by statement instead.
    """
    ids = {w.snapshot.task_id for w in writes}
    if len(writes) < 2 or len(ids) != len(writes):
        return None
    rows: list[dict[str, Any]] = []
    for order, (write, (_, params)) in enumerate(zip(writes, prepared, strict=True)):
        row = {name: params[name] for name in BATCH_TYPES}
        for name in _TIMES:
            moment = row[name]
            if moment is not None:
                row[name] = format_time(moment)  # each time formatted once (see there)
        if not math.isfinite(row["paused_seconds"]):
            return None
        row["ord"] = order
        row["expect_version"] = write.expect_version
        row["notify_channel"] = params["notify_channel"]
        row["notify_payload"] = params["notify_payload"]
        rows.append(row)
    # in task id order: concurrent batches over the same tasks then lock their rows in one
    # order and cannot deadlock (`ord` keeps each outcome in its write's place)
    rows.sort(key=_task_id_of)
    pairs = sorted(
        ((w.snapshot.task_id, t) for w in writes for t in w.transitions),
        key=lambda pair: (pair[1].task_id, pair[1].status_version),
    )
    transitions = [
        {
            "owner": owner,
            "task_id": t.task_id,
            "status_version": t.status_version,
            "from_status": t.from_status.value,
            "to_status": t.to_status.value,
            "trigger": t.trigger,
            "actor": t.actor,
            "reason": t.reason,
            "at": format_time(t.at),
        }
        for owner, t in pairs  # checked by `prepare` already
    ]
    return {
        "rows": json.dumps(rows, ensure_ascii=False),
        "transitions": json.dumps(transitions, ensure_ascii=False),
    }


#: The task columns that hold times (sent as ISO-8601 text in a batch's JSON rows).
_TIMES = tuple(name for name, kind in BATCH_TYPES.items() if kind == "timestamptz")


def conflict(write: SnapshotWrite, actual: int | None) -> ConcurrencyConflict:
    """The conflict of a write that was not applied (worded as by every store)."""
    return version_conflict(write.snapshot.task_id, expected=write.expect_version, actual=actual)


def apply_writes(
    conn: Conn,
    q: Statements,
    writes: Sequence[SnapshotWrite],
    prepared: Sequence[Prepared],
    retrying: bool,
) -> list[ConcurrencyConflict | None]:
    """Run `prepared` (one transaction when there are several); None marks an applied write.

    Writes to distinct tasks go in one set-based statement (`SAVE_BATCH`); otherwise
    each write is its own statement, all sent in one pipeline inside one transaction.

    With `retrying` (the previous attempt lost its connection and may have committed),
    a write whose stored snapshot is exactly the one written counts as applied.
    """
    batch = batch_params(writes, prepared)
    rows: Sequence[tuple[Any, ...] | None]
    if len(prepared) == 1:
        rows = [conn.execute(*prepared[0]).fetchone()]
    elif batch is not None:  # one statement, one round trip, one transaction
        rows = conn.execute(q.save_batch, batch).fetchall()
    else:
        with conn.pipeline(), conn.transaction():
            cursors = [conn.execute(statement, params) for statement, params in prepared]
        rows = [cursor.fetchone() for cursor in cursors]
    outcomes: list[ConcurrencyConflict | None] = []
    for write, row in zip(writes, rows, strict=True):
        assert row is not None
        applied, seen = bool(row[0]), row[1]
        if applied:
            outcomes.append(None)
            continue
        task_id = write.snapshot.task_id
        if seen is None or seen == write.expect_version:
            # The statement waited for a concurrent writer and saw the row as it was
            # before; a new statement reads what that writer committed.
            found = conn.execute(q.task_version, {"task_id": task_id}).fetchone()
            seen = None if found is None else found[0]
        if retrying and _stored_is(conn, q, write):
            outcomes.append(None)
            continue
        outcomes.append(conflict(write, None if seen is None else int(seen)))
    return outcomes


def _stored_is(conn: Conn, q: Statements, write: SnapshotWrite) -> bool:
    """Whether the store holds exactly `write` — its row and its history rows: after a lost
    connection, a snapshot alone could be another writer's that happens to be identical."""
    task_id = write.snapshot.task_id
    row = conn.execute(q.get_task, {"task_id": task_id}).fetchone()
    if row is None or snapshot_from_row(row) != write.snapshot:  # an unreadable row is not it
        return False
    if not write.transitions:
        return True
    rows = conn.execute(q.history, {"task_id": task_id}).fetchall()
    decoded = (transition_from_row(r) for r in rows)
    stored = {t.status_version: t for t in decoded if isinstance(t, Transition)}
    return all(stored.get(t.status_version) == t for t in write.transitions)
