"""Damaged rows of PostgreSQL (written with raw SQL) are named, and hide nothing else.

The column types keep most damage out; these are the values they let in that no
record can hold: a time beyond what a Python `datetime` holds (``infinity``, year
20000, a year BC), JSON nested beyond Python's parser, an array with a NULL element,
and, in the text and JSON columns, what the store contract plants as well.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from chongming_core import FakeClock, StoreError, TaskQuery, TaskStatus, unreadable_in
from chongming_store_contract import BASE_TIME, build_task
from chongming_store_postgres import PostgresTaskStore

pytestmark = pytest.mark.postgres

Admin = psycopg.Connection[tuple[Any, ...]]

_S = TaskStatus
_DEEP = "[" * 5000 + "]" * 5000


@pytest.fixture
def seeded(store: PostgresTaskStore) -> PostgresTaskStore:
    """`a` (succeeded), `x` (running, leased), `c` (queued)."""
    clock = FakeClock(BASE_TIME)
    for task_id, status in (("a", _S.SUCCEEDED), ("x", _S.RUNNING), ("c", _S.QUEUED)):
        snapshot, transitions = build_task(task_id, status, clock=clock)
        if status is _S.RUNNING:
            until = BASE_TIME + timedelta(hours=1)
            snapshot = snapshot.evolve(lease_owner="node-a", lease_until=until)
        store.create(snapshot, transitions)
    return store


def damage(
    admin: Admin, store: PostgresTaskStore, table: str, assignment: str, *params: Any
) -> None:
    """``UPDATE`` one row of `table` (``x``'s, or its second transition), as another program."""
    where = "task_id = 'x'" + (" AND status_version = 2" if table == "transitions" else "")
    statement = sql.SQL("UPDATE {} SET ").format(sql.Identifier(store.schema, table)) + sql.SQL(
        assignment + " WHERE " + where  # the cases' literal SQL
    )
    assert admin.execute(statement, params or None).rowcount == 1


@pytest.mark.parametrize(
    ("assignment", "params", "problem"),
    [
        ("started_at = 'infinity'", (), "started_at 'infinity' is not a time Python can hold"),
        ("finished_at = '-infinity'", (), "finished_at '-infinity' is not a time"),
        ("created_at = '20000-01-01'", (), "created_at '20000-01-01 00:00:00+00' is not a time"),
        ("updated_at = '0044-03-15 BC'", (), "updated_at '0044-03-15 00:00:00+00 BC' is not"),
        ("lease_until = 'infinity'", (), "lease_until 'infinity' is not a time"),
        ("progress = %s::json", (_DEEP,), "progress must be a JSON object, got '[[[["),
        ("outcome = %s::json", (_DEEP,), "outcome '[[[["),
        ("tags = ARRAY['a', NULL]", (), "tags must be a list of texts, got ['a', None]"),
        ("attempts = 'null'", (), "attempts must be a list, got None"),
        ("attempts = '[{\"number\": 1}]'", (), "attempts[0].status is missing"),
        ('failure = \'{"kind": "lost"}\'', (), "failure.message is missing"),
        ("progress = '\"half\"'", (), "progress must be a JSON object, got 'half'"),
        ("status = 'zombie'", (), "status 'zombie' is not a status"),
    ],
)
def test_a_value_no_record_can_hold_is_named_and_the_others_read(
    admin: Admin, seeded: PostgresTaskStore, assignment: str, params: tuple[Any, ...], problem: str
) -> None:
    damage(admin, seeded, "tasks", assignment, *params)
    found = seeded.query()
    assert [s.task_id for s in found] == ["a", "c"]
    (row,) = unreadable_in(found)
    assert row.task_id == "x"
    assert problem in row.problem
    with pytest.raises(StoreError, match="task 'x' cannot be read") as caught:
        seeded.get("x")
    assert caught.value.task_id == "x"
    assert problem in str(caught.value)
    newest = seeded.query(TaskQuery(newest_first=True, limit=2))
    assert [s.task_id for s in newest] == ["c"]
    assert [r.task_id for r in unreadable_in(newest)] == ["x"]


def test_the_counts_name_the_tasks_of_a_status_that_is_none(
    admin: Admin, seeded: PostgresTaskStore
) -> None:
    damage(admin, seeded, "tasks", "status = 'zombie'")
    counts = seeded.status_counts()
    assert counts == {_S.SUCCEEDED: 1, _S.QUEUED: 1}
    assert [(r.task_id, r.problem) for r in unreadable_in(counts)] == [
        ("x", "status 'zombie' is not a status")
    ]
    only_c = seeded.status_counts(TaskQuery(task_ids=frozenset({"c"})))
    assert only_c == {_S.QUEUED: 1}
    assert unreadable_in(only_c) == ()  # the filter holds for the damaged rows too


def test_a_transition_time_no_datetime_holds_is_named_and_left_by_archive(
    admin: Admin, seeded: PostgresTaskStore, tmp_path: Path
) -> None:
    damage(admin, seeded, "transitions", "at = 'infinity'")
    history = seeded.history("x")
    assert [t.status_version for t in history] == [1, 3]
    (row,) = unreadable_in(history)
    assert (row.part, row.problem.split(" is not")[0]) == ("history entry 2", "at 'infinity'")
    admin.execute(
        sql.SQL("UPDATE {} SET status = 'succeeded', finished_at = %s WHERE task_id = 'x'").format(
            sql.Identifier(seeded.schema, "tasks")
        ),
        (BASE_TIME,),
    )
    moved = seeded.archive(finished_before=BASE_TIME + timedelta(days=1), path=tmp_path / "x.jsonl")
    archived = [json.loads(line) for line in (tmp_path / "x.jsonl").read_text().splitlines()]
    assert {(t["task_id"], t["status_version"]) for t in archived} >= {("x", 1)}
    assert ("x", 2) not in {(t["task_id"], t["status_version"]) for t in archived}
    assert moved == len(archived)
    assert [r.part for r in unreadable_in(seeded.history("x"))] == ["history entry 2"]
