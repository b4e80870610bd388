"""Retention: `prune` (delete old terminal tasks) and `archive` (move old history to a file).

Both work in batches, one short write transaction per batch, so a prune of a
million rows never holds the write lock for long: other writers wait at most
one batch, and readers (WAL) never wait at all.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Callable

from chongming_core import TERMINAL_STATUSES, StoreError, Transition
from chongming_core.backend import write_jsonl
from chongming_store_sqlite import _schema as sql
from chongming_store_sqlite._codec import TRANSITION_COLUMNS, transition_from_row
from chongming_store_sqlite._fetching import fetch_all

__all__ = ["ARCHIVE_BATCH_TASKS", "PRUNE_BATCH_TASKS", "archive_batches", "prune_batches"]

_Transaction = Callable[[str], contextlib.AbstractContextManager[sqlite3.Connection]]

#: Tasks deleted per transaction by `prune` (a task is ~10 rows with history and tags).
PRUNE_BATCH_TASKS = 1000
#: Tasks whose history one `archive` transaction moves.
ARCHIVE_BATCH_TASKS = 1000


#: A task is pruned or archived only when its status says it is terminal, never by its
#: end column alone: a row whose ``terminal_us`` was written by another program must not
#: get a live task deleted (the values are the enum's own, never a caller's text).
_TERMINAL = "status IN ({})".format(
    ", ".join(f"'{v}'" for v in sorted(s.value for s in TERMINAL_STATUSES))
)


def prune_batches(reading: _Transaction, writing: _Transaction, keep: int) -> int:
    """Delete all but the `keep` most recently finished terminal tasks; returns how many.

    The oldest task to keep is found once; each batch then deletes the oldest terminal
    tasks up to it. A task revived by a retry in the meantime is not terminal, or
    ends later, so it is left alone. Each batch is a handful of set-based statements
    rather than one per row: the sqlite3 module lets other Python threads run at every
    step of a statement, and a write transaction of thousands of steps would hold the
    write lock for as long as those threads keep the interpreter busy.
    """
    with reading("choosing the tasks to prune") as conn:
        cut = conn.execute(
            f"SELECT terminal_us, seq FROM tasks WHERE terminal_us IS NOT NULL AND {_TERMINAL} "
            "ORDER BY terminal_us DESC, seq DESC LIMIT 1 OFFSET ?",
            (keep,),
        ).fetchone()
    if cut is None:
        return 0
    deleted = 0
    while True:
        with writing(f"pruning up to {PRUNE_BATCH_TASKS} tasks") as conn:
            (batch,) = conn.execute(_PRUNE_BATCH, (*cut, PRUNE_BATCH_TASKS)).fetchone()
            for statement in _PRUNE_DELETES:
                count = conn.execute(statement, (batch,)).rowcount
        deleted += count
        if count < PRUNE_BATCH_TASKS:
            return deleted


#: The ``seq`` of the next batch of tasks to prune, as a JSON array: the oldest terminal
#: tasks up to the cut ``(terminal_us, seq)`` (parameters: cut end, cut seq, limit).
_PRUNE_BATCH = (
    "SELECT json_group_array(seq) FROM (SELECT seq FROM tasks "
    f"WHERE terminal_us IS NOT NULL AND {_TERMINAL} "
    "AND (terminal_us < ?1 OR (terminal_us = ?1 AND seq <= ?2)) "
    "ORDER BY terminal_us, seq LIMIT ?3)"
)
_BATCH_TASK_IDS = "SELECT task_id FROM tasks WHERE seq IN (SELECT value FROM json_each(?1))"
#: Delete a batch (parameter: the JSON array of ``seq``); the tasks rows go last.
_PRUNE_DELETES = (
    f"DELETE FROM task_tags WHERE task_id IN ({_BATCH_TASK_IDS})",
    f"DELETE FROM transitions WHERE task_id IN ({_BATCH_TASK_IDS})",
    f"DELETE FROM commands WHERE task_id IN ({_BATCH_TASK_IDS})",
    "DELETE FROM tasks WHERE seq IN (SELECT value FROM json_each(?1))",
)


def _prepare_archive(path: str, where: str) -> None:
    """Create the archive file owner-only when missing (it holds task data)."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.close(fd)
    except OSError as exc:
        raise StoreError(
            f"{where}: cannot write the archive file {path} ({exc}); nothing was moved. "
            "Choose a writable path"
        ) from exc


def archive_batches(writing: _Transaction, before_us: int, path: str, where: str) -> int:
    """Move all but the last transition of terminal tasks finished before `before_us`
    to `path` (JSON Lines); returns how many moved.

    Each batch is appended and fsynced while the batch's write transaction holds
    the lock, and its rows are deleted in that same transaction. A crash between
    the fsync and the commit leaves a batch in both places; archiving again then
    appends it a second time (at least once, never lost): readers of the archive
    deduplicate on ``(task_id, status_version)``.
    """
    moved = 0
    last_seq = 0
    prepared = False
    while True:
        with writing("archiving task history") as conn:
            tasks = conn.execute(
                "SELECT seq, task_id FROM tasks "
                f"WHERE terminal_us IS NOT NULL AND {_TERMINAL} AND finished_us < ? AND seq > ? "
                # at least two transitions: something besides the last one to move
                "AND EXISTS (SELECT 1 FROM transitions t WHERE t.task_id = tasks.task_id "
                "LIMIT 1 OFFSET 1) "
                "ORDER BY seq LIMIT ?",
                (before_us, last_seq, ARCHIVE_BATCH_TASKS),
            ).fetchall()
            if not tasks:
                return moved
            last_seq = tasks[-1][0]
            moving: list[Transition] = []
            for _, task_id in tasks:
                history = fetch_all(
                    conn,
                    f"SELECT {TRANSITION_COLUMNS} FROM transitions WHERE task_id = ? "
                    "ORDER BY status_version",
                    (task_id,),
                )
                # a row that cannot be decoded is neither written nor deleted: it stays in
                # the store, where `history` names it
                decoded = (transition_from_row(r) for r in history[:-1])
                moving.extend(t for t in decoded if isinstance(t, Transition))
            if not prepared:
                _prepare_archive(path, where)
                prepared = True
            try:
                write_jsonl(path, moving)
            except OSError as exc:
                raise StoreError(
                    f"{where}: cannot write the archive file {path} ({exc}); this batch "
                    f"was not deleted from the store ({moved} transitions were moved before)"
                ) from exc
            conn.executemany(sql.DELETE_TRANSITION, [(t.task_id, t.status_version) for t in moving])
            moved += len(moving)
