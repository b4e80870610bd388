"""Snapshot writes (create, compare-and-set save, group commit) and housekeeping.

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
import os
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import psycopg

from chongming_core import (
    TERMINAL_STATUSES,
    ConcurrencyConflict,
    ConfigurationError,
    SnapshotWrite,
    Transition,
)
from chongming_core._json import portable_json
from chongming_core._store import write_jsonl
from chongming_store_postgres._codec import (
    snapshot_from_row,
    snapshot_params,
    transition_arrays,
    transition_from_row,
)
from chongming_store_postgres._fetching import lenient_loaders
from chongming_store_postgres._queries import BATCH_TYPES, Statements

__all__ = [
    "PRUNE_BATCH_TASKS",
    "Prepared",
    "apply_writes",
    "archive",
    "prepare",
    "prune_batch",
    "prune_candidates",
    "validate_keep",
]

Conn = psycopg.Connection[tuple[Any, ...]]
#: A rendered statement and its parameters.
Prepared = tuple[bytes, dict[str, Any]]
_TERMINAL = sorted(s.value for s in TERMINAL_STATUSES)
#: Tasks deleted per transaction by `prune` (a task is about five rows with its history),
#: so that a prune of a million tasks never holds row locks for long.
PRUNE_BATCH_TASKS = 1000
#: Rows converted to Python objects at a time when reading a long result.
_FETCH_SLICE = 10_000


def prepare(
    writes: Sequence[SnapshotWrite],
    q: Statements,
    stored_outcome: Callable[[Any], object] = portable_json,
) -> list[Prepared]:
    """The statement of each write; checks every value first (NUL bytes, JSON, times, and
    the outcome with the store's own `stored_outcome`; by default the shared rules)."""
    prepared: list[Prepared] = []
    for write in writes:
        params = snapshot_params(write.snapshot, stored_outcome)
        params.update(transition_arrays(write.transitions))
        if write.expect_version is None:
            prepared.append((q.create_task, params))
        else:
            params["expect_version"] = write.expect_version
            prepared.append((q.save_task, params))
    return prepared


def batch_params(
    writes: Sequence[SnapshotWrite], prepared: Sequence[Prepared]
) -> dict[str, Any] | None:
    """The parameters of `SAVE_BATCH` for `writes`, or None when it does not apply.

    It applies to two or more writes of distinct tasks; a batch that writes one task
    twice (a create and its save, or a chain of saves) runs statement by statement,
    so that each item is checked against the ones before it.
    """
    ids = {w.snapshot.task_id for w in writes}
    if len(writes) < 2 or len(ids) != len(writes):
        return None
    rows = [params for _, params in prepared]
    batch: dict[str, Any] = {
        "b_ord": list(range(len(rows))),
        "b_expect": [w.expect_version for w in writes],
    }
    for name in BATCH_TYPES:
        batch[f"b_{name}"] = [row[name] for row in rows]
    batch["b_tags"] = [json.dumps(tags, ensure_ascii=False) for tags in batch["b_tags"]]
    pairs = sorted(
        ((w.snapshot.task_id, t) for w in writes for t in w.transitions),
        key=lambda pair: (pair[1].task_id, pair[1].status_version),
    )
    batch.update(transition_arrays(t for _, t in pairs))  # checked already; same order
    batch["t_owner"] = [owner for owner, _ in pairs]
    return batch


def conflict(write: SnapshotWrite, actual: int | None) -> ConcurrencyConflict:
    """The conflict of a write that was not applied (messages as `InMemoryTaskStore`)."""
    task_id = write.snapshot.task_id
    if write.expect_version is None:
        message = (
            f"task {task_id!r} already exists; task ids are never reused, submit under a new id"
        )
    elif actual is None:
        message = (
            f"task {task_id!r} does not exist in the store (it was never created "
            "or has been pruned)"
        )
    else:
        message = (
            f"task {task_id!r} is at version {actual}, not {write.expect_version}: "
            "another writer changed it; reload and retry"
        )
    return ConcurrencyConflict(
        message, task_id=task_id, expected=write.expect_version, actual=actual
    )


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


def validate_keep(keep_terminal: object) -> int:
    """Check `prune`'s argument."""
    if isinstance(keep_terminal, bool) or not isinstance(keep_terminal, int) or keep_terminal < 0:
        raise ConfigurationError(f"keep_terminal must be an integer >= 0, got {keep_terminal!r}")
    return keep_terminal


def prune_candidates(conn: Conn, q: Statements, keep: int) -> list[tuple[str, datetime]]:
    """The terminal tasks to delete (all but the `keep` latest-finished), with their ends.

    Read through a server-side cursor a slice at a time: receiving a million rows at
    once would keep other Python threads from running for seconds.
    """
    doomed: list[tuple[str, datetime]] = []
    with conn.transaction(), conn.cursor(name="chongming_prune") as cursor:
        cursor.execute(q.prune_select, {"terminal": _TERMINAL, "keep": keep})
        while rows := cursor.fetchmany(_FETCH_SLICE):
            doomed.extend((row[0], row[1]) for row in rows)
    return doomed


def prune_batch(conn: Conn, q: Statements, batch: Sequence[tuple[str, datetime]]) -> int:
    """Delete one batch of `prune_candidates` (one statement); returns how many went.

    A task that is no longer terminal with the same end (revived meanwhile) is kept.
    """
    params = {
        "terminal": _TERMINAL,
        "task_ids": [task_id for task_id, _ in batch],
        "ended": [ended for _, ended in batch],
    }
    row = conn.execute(q.prune_batch, params).fetchone()
    return 0 if row is None else int(row[0])


def archive(
    conn: Conn, q: Statements, schema: str, finished_before: datetime, path: str | os.PathLike[str]
) -> int:
    """Move old history of finished tasks to `path` (JSON Lines, fsynced), then delete it.

    One transaction under a per-schema advisory lock, so two archivers never write
    the same transition twice; rows are deleted only after the file is synced.
    """
    with conn.transaction():
        conn.execute(q.lock_archive, {"key": f"chongming-archive:{schema}"})
        moved: list[Transition] = []
        with conn.cursor(name="chongming_archive") as cursor:  # a slice at a time, see prune
            lenient_loaders(cursor)  # a time Python cannot hold must not stop the archive
            cursor.execute(q.archive_select, {"terminal": _TERMINAL, "before": finished_before})
            while rows := cursor.fetchmany(_FETCH_SLICE):
                # a row that cannot be decoded is neither written nor deleted: it stays in
                # the store, where `history` names it
                decoded = (transition_from_row(row) for row in rows)
                moved.extend(t for t in decoded if isinstance(t, Transition))
        write_jsonl(path, moved)
        if moved:
            conn.execute(
                q.archive_delete,
                {
                    "task_ids": [t.task_id for t in moved],
                    "versions": [t.status_version for t in moved],
                },
            )
    return len(moved)
