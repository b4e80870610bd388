"""Writes that join the tasks to rows sent as parameters reach them through an index.

The planner takes ``json_to_recordset`` for 100 rows whatever it holds: against a table of
some thousands of rows it read the whole table and hashed it at every group commit (2 ms
for five saves at 10,000 tasks, growing with the table). The group commit also says
``task_id = ANY(ARRAY(SELECT task_id FROM w))``; the statements joining ``unnest`` of
arrays are estimated from the arrays. Each is checked in its custom plan and in the
generic plan a statement psycopg has prepared may be given."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg._queries import PostgresQuery
from psycopg.adapt import Transformer

from chongming_core import SnapshotWrite, StateMachine
from chongming_store_postgres._codec import touch_arrays
from chongming_store_postgres._queries import Statements
from chongming_store_postgres._writes import batch_params, prepare

Admin = psycopg.Connection[tuple[Any, ...]]

_TASKS = 3000
_NOW = datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture
def filled(
    fill_queued: Callable[..., list[SnapshotWrite]], admin: Admin, schema: str
) -> list[SnapshotWrite]:
    """3,000 queued tasks with fresh statistics; returns the writes that made them."""
    writes = fill_queued(_TASKS)
    for table in ("tasks", "transitions"):
        admin.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(schema, table)))
    return writes


def _plans(admin: Admin, statement: bytes, params: dict[str, Any]) -> list[str]:
    """The custom plan of `statement` with `params`, and the generic plan a statement
    psycopg has prepared (after five runs) may be given. Nothing is written."""
    custom = admin.execute(b"EXPLAIN " + statement, params).fetchall()
    query = PostgresQuery(Transformer(admin))
    query.convert(statement, params)
    with admin.transaction(force_rollback=True):
        admin.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        admin.execute(statement, params, prepare=True)
        found = admin.execute(
            "SELECT name FROM pg_prepared_statements WHERE statement = %s",
            (query.query.decode(),),
        ).fetchone()
        assert found is not None
        order = query._order or []  # the parameters' names, as psycopg numbers them
        values = sql.SQL(", ").join(sql.Literal(params[key]) for key in order)
        explain = sql.SQL("EXPLAIN EXECUTE {}({})").format(sql.Identifier(found[0]), values)
        generic = admin.execute(explain).fetchall()
    return ["\n".join(row[0] for row in rows) for rows in (custom, generic)]


def _starting(write: SnapshotWrite) -> SnapshotWrite:
    machine = StateMachine(write.snapshot)
    version = machine.version
    machine.mark_starting(executor="thread")
    return SnapshotWrite(machine.snapshot, version, tuple(machine.transitions[-1:]))


def _assert_by_index(plans: list[str], table: str) -> None:
    for plan in plans:
        assert f"Seq Scan on {table}" not in plan, plan


def test_a_group_commit_reaches_its_rows_by_the_index(
    filled: list[SnapshotWrite], admin: Admin, schema: str
) -> None:
    q = Statements(schema)
    writes = [_starting(w) for w in filled[100:105]]
    params = batch_params(writes, prepare(writes, q))
    assert params is not None
    _assert_by_index(_plans(admin, q.save_batch, params), "tasks")


def test_a_touch_reaches_its_rows_by_the_index(
    filled: list[SnapshotWrite], admin: Admin, schema: str
) -> None:
    q = Statements(schema)
    merged = {w.snapshot.task_id: {"progress": 0.5} for w in filled[:5]}
    params = touch_arrays(merged, {})
    _assert_by_index(_plans(admin, q.touch, params), "tasks")


def test_a_lease_reaches_its_rows_by_the_index(
    filled: list[SnapshotWrite], admin: Admin, schema: str
) -> None:
    q = Statements(schema)
    params = {
        "owner": "w",
        "until": _NOW + timedelta(seconds=30),
        "task_ids": [w.snapshot.task_id for w in filled[:4]],
        "versions": [w.snapshot.status_version for w in filled[:4]],
    }
    _assert_by_index(_plans(admin, q.lease_tasks, params), "tasks")


def test_prune_and_archive_reach_their_rows_by_the_index(
    filled: list[SnapshotWrite], admin: Admin, schema: str
) -> None:
    q = Statements(schema)
    ids = [w.snapshot.task_id for w in filled[:4]]
    prune = {"terminal": ["succeeded"], "task_ids": ids, "ended": [_NOW] * len(ids)}
    _assert_by_index(_plans(admin, q.prune_batch, prune), "tasks")
    archive = {"task_ids": ids, "versions": [1] * len(ids)}
    _assert_by_index(_plans(admin, q.archive_delete, archive), "transitions")
