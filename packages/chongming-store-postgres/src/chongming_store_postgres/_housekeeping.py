"""Retention: `prune` (delete old terminal tasks) and `archive` (move old history to a file).

A prune chooses its tasks once and deletes them in batches of `PRUNE_BATCH_TASKS`, one
short transaction each; an archive is one transaction under a per-schema advisory
lock. Long results are read through server-side cursors a slice at a time.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime

from chongming_core import TERMINAL_STATUSES, Transition
from chongming_core.backend import write_jsonl
from chongming_store_postgres._codec import transition_from_row
from chongming_store_postgres._fetching import lenient_loaders
from chongming_store_postgres._queries import Statements
from chongming_store_postgres._writes import Conn

__all__ = ["PRUNE_BATCH_TASKS", "archive", "prune_batch", "prune_candidates"]

_TERMINAL = sorted(s.value for s in TERMINAL_STATUSES)
#: Tasks deleted per transaction by `prune` (a task is about five rows with its history),
#: so that a prune of a million tasks never holds row locks for long.
PRUNE_BATCH_TASKS = 1000
#: Rows converted to Python objects at a time when reading a long result.
_FETCH_SLICE = 10_000


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
