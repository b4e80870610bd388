"""Writes: the group commit behind `create`, `save` and `save_many`, and side-path rows.

A group commit reads the current version of every task in the batch with one
``SELECT ... IN (...)`` per 500 ids, decides each item in Python against
those versions (and against the items before it in the same batch), then
writes with one ``executemany`` per statement. All of this runs inside the
caller's ``BEGIN IMMEDIATE`` transaction, so no other writer can change a
version between the check and the write.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from chongming_core import ConcurrencyConflict, ConfigurationError, Progress, StoreError
from chongming_core.backend import progress_problem, version_conflict
from chongming_store_sqlite import _schema as sql
from chongming_store_sqlite._codec import EncodedWrite, dumps, iso, micros
from chongming_store_sqlite._queries import chunks, placeholders

__all__ = ["apply_writes", "touch_row"]


def _conflict(
    item: EncodedWrite, actual: int | None, *, damaged: bool = False
) -> ConcurrencyConflict:
    return version_conflict(
        item.task_id,
        expected=item.expect_version,
        actual=actual,
        # a damaged row (text there) has no version any writer can expect
        unreadable="its row holds no integer status_version" if damaged else None,
    )


def apply_writes(
    conn: sqlite3.Connection, items: Sequence[EncodedWrite]
) -> list[ConcurrencyConflict]:
    """Check and apply `items` inside the caller's write transaction, with one
    ``executemany`` per kind of statement instead of a round trip per row."""
    current: dict[str, tuple[int | None, str]] = {}
    ids = list(dict.fromkeys(item.task_id for item in items))
    for chunk in chunks(ids):
        statement = (
            "SELECT task_id, status_version, tags FROM tasks "
            f"WHERE task_id IN ({placeholders(len(chunk))})"
        )
        for task_id, version, tags in conn.execute(statement, chunk):
            # a damaged row (text there) has no version any writer can expect: None
            current[task_id] = (version if type(version) is int else None, tags)
    conflicts: list[ConcurrencyConflict] = []
    inserts: list[tuple[object, ...]] = []
    updates: list[tuple[object, ...]] = []
    retag: dict[str, frozenset[str]] = {}
    transitions: list[tuple[object, ...]] = []
    for item in items:
        found = current.get(item.task_id)
        if item.expect_version is None:
            if found is not None:
                conflicts.append(_conflict(item, found[0]))
                continue
            inserts.append((*item.values, item.task_id))
            if item.tags:
                retag[item.task_id] = item.tags
        else:
            if found is None or found[0] != item.expect_version:
                damaged = found is not None and found[0] is None
                conflicts.append(
                    _conflict(item, None if found is None else found[0], damaged=damaged)
                )
                continue
            updates.append((*item.values, item.task_id))
            if found[1] != item.tags_key:
                retag[item.task_id] = item.tags
        current[item.task_id] = (item.new_version, item.tags_key)
        transitions.extend(item.transitions)
    # Creates first: a later item of the batch can only update a task created earlier
    # in it, never the other way round.
    if inserts:
        conn.executemany(sql.INSERT_TASK, inserts)
    if updates:
        conn.executemany(sql.UPDATE_TASK, updates)
    if retag:
        conn.executemany(sql.DELETE_TAGS, [(t,) for t in retag])
        conn.executemany(sql.INSERT_TAG, [(t, tag) for t, tags in retag.items() for tag in tags])
    if transitions:
        conn.executemany(sql.INSERT_TRANSITION, transitions)
    return conflicts


def touch_row(
    task_id: str, fields: dict[str, Any], held_version: int | None = None
) -> tuple[object, ...]:
    """Parameters of `schema.TOUCH_TASK`: a (set?, value) pair per side-path field, then the
    task and the version the update is fenced to (None: any)."""
    progress = fields.get("progress")
    until = fields.get("lease_until")
    if progress is not None and not isinstance(progress, Progress):
        raise ConfigurationError(f"progress must be a Progress or None, got {progress!r}")
    problem = None if progress is None else progress_problem(progress)
    if problem is not None:
        raise StoreError(f"cannot store task {task_id!r}: {problem}", task_id=task_id)
    return (
        "progress" in fields,
        None if progress is None else dumps(progress.to_dict()),
        "heartbeat_at" in fields,
        iso(fields.get("heartbeat_at"), "heartbeat_at"),
        "lease_owner" in fields,
        fields.get("lease_owner"),
        "lease_until" in fields,
        iso(until, "lease_until"),
        None if until is None else micros(until, "lease_until"),
        "pid" in fields,
        fields.get("pid"),
        task_id,
        held_version,
    )
