"""Damaged rows of a SQLite file (written with raw SQL) are named, and hide nothing else.

The store contract plants the damage every backend can hold; these are the ways only
a SQLite file can be damaged: bytes that are not UTF-8 in a TEXT column, a JSON
document nested beyond the parser, columns that disagree with the document they
index, a version column holding text.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from chongming_core import (
    ConcurrencyConflict,
    FakeClock,
    SnapshotWrite,
    StoreError,
    TaskQuery,
    TaskStatus,
    unreadable_in,
)
from chongming_store_contract import BASE_TIME, advance, build_task
from chongming_store_sqlite import SqliteTaskStore

_S = TaskStatus


@pytest.fixture
def path(tmp_path: Path) -> Path:
    """A file with `a` (succeeded), `x` (running, leased) and `c` (queued)."""
    file = tmp_path / "tasks.db"
    clock = FakeClock(BASE_TIME)
    with SqliteTaskStore(file) as store:
        for task_id, status in (("a", _S.SUCCEEDED), ("x", _S.RUNNING), ("c", _S.QUEUED)):
            snapshot, transitions = build_task(task_id, status, clock=clock, bucket=2)
            if status is _S.RUNNING:
                until = BASE_TIME + timedelta(hours=1)
                snapshot = snapshot.evolve(lease_owner="node-a", lease_until=until)
            store.create(snapshot, transitions)
    return file


@pytest.fixture
def store(path: Path) -> Iterator[SqliteTaskStore]:
    with SqliteTaskStore(path) as opened:
        yield opened


def damage(path: Path, statement: str, *params: Any) -> None:
    """Run `statement` on the file as another program would."""
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        assert conn.execute(statement, params).rowcount >= 1


def _named(result: object) -> list[tuple[str, str]]:
    return [(row.task_id, row.problem) for row in unreadable_in(result)]


@pytest.mark.parametrize(
    ("statement", "problem"),
    [
        (
            "UPDATE tasks SET data = CAST(X'7B80' AS TEXT)",
            "its document must be JSON text, got b'{",
        ),
        ("UPDATE tasks SET progress = CAST(X'FF' AS TEXT)", "progress must be JSON text, got b'"),
        ("UPDATE tasks SET lease_owner = CAST(X'FF' AS TEXT)", "lease_owner must be text or null"),
        ("UPDATE tasks SET data = '" + "[" * 100_000 + "]" * 100_000 + "'", "nested too deeply"),
        ("UPDATE tasks SET status = 'queued'", "its status column holds 'queued' but its document"),
        ("UPDATE tasks SET status_version = 9", "its status_version column holds 9 but"),
        ("UPDATE tasks SET lease_until_us = 1", "its lease_until_us column holds 1 but"),
        ("UPDATE tasks SET lease_until = NULL", "its lease_until_us column holds"),
    ],
)
def test_a_row_only_a_sqlite_file_can_hold_is_named(
    path: Path, store: SqliteTaskStore, statement: str, problem: str
) -> None:
    damage(path, statement + " WHERE task_id = 'x'")
    found = store.query()
    assert [s.task_id for s in found] == ["a", "c"]
    ((task_id, said),) = _named(found)
    assert task_id == "x"
    assert problem in said
    with pytest.raises(StoreError, match="task 'x' cannot be read") as caught:
        store.get("x")
    assert caught.value.task_id == "x"
    assert store.get("a") is not None
    limited = store.query(TaskQuery(newest_first=True, limit=2))
    assert [s.task_id for s in limited] == ["c"]
    assert [task_id for task_id, _ in _named(limited)] == ["x"]


def test_an_id_that_is_not_utf8_is_named_as_stored(path: Path, store: SqliteTaskStore) -> None:
    damage(path, "UPDATE tasks SET task_id = CAST(X'78FF' AS TEXT) WHERE task_id = 'x'")
    found = store.query()
    assert [s.task_id for s in found] == ["a", "c"]
    assert _named(found) == [("b'x\\xff'", "its document names task 'x'")]
    assert store.get("x") is None  # no row holds the text id 'x' any more


def test_counts_name_the_tasks_whose_status_or_bucket_is_none(
    path: Path, store: SqliteTaskStore
) -> None:
    damage(path, "UPDATE tasks SET status = CAST(X'FF' AS TEXT) WHERE task_id = 'x'")
    damage(path, "UPDATE tasks SET status = 'zombie', bucket = 'two' WHERE task_id = 'c'")
    counts = store.status_counts()
    assert counts == {_S.SUCCEEDED: 1}
    assert sorted(_named(counts)) == [
        ("c", "status 'zombie' is not a status"),
        ("x", "status b'\\xff' is not a status"),
    ]
    buckets = store.bucket_counts()
    assert buckets == {2: 2}
    assert _named(buckets) == [("c", "bucket 'two' is not an integer")]
    only_a = store.status_counts(TaskQuery(task_ids=frozenset({"a"})))
    assert only_a == {_S.SUCCEEDED: 1}
    assert _named(only_a) == []  # the filter holds for the damaged rows too


def test_a_version_column_holding_text_refuses_the_save_over_it(
    path: Path, store: SqliteTaskStore
) -> None:
    running = store.get("x")
    queued = store.get("c")
    assert running is not None
    assert queued is not None
    damage(path, "UPDATE tasks SET status_version = 'seven' WHERE task_id = 'x'")
    ended, more = advance(running, lambda m: m.mark_succeeded(outcome=1))
    with pytest.raises(ConcurrencyConflict, match="holds no integer status_version") as caught:
        store.save(ended, expect_version=running.status_version, transitions=more)
    assert caught.value.task_id == "x"
    assert caught.value.actual is None
    started, steps = advance(queued, lambda m: m.mark_starting())
    conflicts = store.save_many(
        [
            SnapshotWrite(ended, running.status_version, more),
            SnapshotWrite(started, queued.status_version, steps),
        ]
    )
    assert [c.task_id for c in conflicts] == ["x"]
    assert store.get("c") == started  # the healthy item of the batch went in


def test_archive_leaves_a_transition_that_is_not_utf8_in_place(
    path: Path, store: SqliteTaskStore, tmp_path: Path
) -> None:
    damage(
        path,
        "UPDATE transitions SET actor = CAST(X'FF' AS TEXT) WHERE task_id = 'a' "
        "AND status_version = 2",
    )
    history = store.history("a")
    assert [t.status_version for t in history] == [1, 3, 4]
    ((task_id, problem),) = _named(history)
    assert (task_id, problem) == ("a", "actor must be text, got b'\\xff'")
    moved = store.archive(finished_before=BASE_TIME + timedelta(days=1), path=tmp_path / "a.jsonl")
    assert moved == 2  # versions 1 and 3: the last one stays, and so does the damaged one
    kept = store.history("a")
    assert [t.status_version for t in kept] == [4]
    assert [row.part for row in unreadable_in(kept)] == ["history entry 2"]
