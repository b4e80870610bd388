"""A schema written by the previous release (version 2) is migrated in place to version 3.

``data/store-v2.sql`` is ``pg_dump --inserts`` of a real schema made once with that
release's code (see ``tests-integration/make_v2_stores.py``): tasks of every status
with their histories, tags, labels, buckets, progress, failures and leases, and
commands pending, claimed and complete. ``data/store-v2.json`` is what that release
read back. Each test loads the script into its own fresh schema.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from chongming_core import ClaimRequest, StoreNotFound, TaskSnapshot, TaskStatus, Transition
from chongming_store_contract import build_task
from chongming_store_postgres import PostgresTaskStore

pytestmark = pytest.mark.postgres
Admin = psycopg.Connection[tuple[Any, ...]]
DATA = Path(__file__).parent / "data"
FIXTURE_SCHEMA = "chongming_v2_fixture"


def _load(postgres_dsn: str, schema: str) -> None:
    """Run the dump with the test's schema in place of the fixture's (its own connection:
    the dump resets the session's search_path)."""
    script = (DATA / "store-v2.sql").read_text(encoding="utf-8")
    assert FIXTURE_SCHEMA in script
    assert schema.isidentifier()
    assert schema.islower()
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(script.replace(FIXTURE_SCHEMA, schema).encode("utf-8"))


def _version(admin: Admin, schema: str) -> int:
    row = admin.execute(
        sql.SQL("SELECT version FROM {}").format(sql.Identifier(schema, "schema_version"))
    ).fetchone()
    assert row is not None
    return int(row[0])


def _expected() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DATA / "store-v2.json").read_text(encoding="utf-8"))
    return loaded


def _command(command: object) -> dict[str, Any]:
    document = dataclasses.asdict(command)  # type: ignore[call-overload]
    return {k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in document.items()}


def test_a_read_only_open_refuses_the_old_schema_and_changes_nothing(
    postgres_dsn: str, schema: str, admin: Admin
) -> None:
    _load(postgres_dsn, schema)
    assert _version(admin, schema) == 2
    with pytest.raises(StoreNotFound, match="version 2") as caught:
        PostgresTaskStore(postgres_dsn, schema=schema, create=False)
    assert caught.value.schema_version == 2
    assert "\n" not in str(caught.value)
    assert _version(admin, schema) == 2


def test_opening_for_writing_migrates_and_loses_nothing(
    postgres_dsn: str, schema: str, admin: Admin, make_store: Callable[..., PostgresTaskStore]
) -> None:
    _load(postgres_dsn, schema)
    expected = _expected()
    store = make_store()
    assert _version(admin, schema) == 3
    tasks = store.query()
    assert [s.to_dict() for s in tasks] == [
        TaskSnapshot.from_dict(d).to_dict() for d in expected["tasks"]
    ]
    assert {s.status for s in tasks} == set(TaskStatus)
    for snapshot, document in zip(tasks, expected["tasks"], strict=True):
        assert snapshot == TaskSnapshot.from_dict(document)
        assert store.get(snapshot.task_id) == snapshot
        assert (snapshot.durable, snapshot.arguments, snapshot.run_at) == (False, None, None)
        history = [Transition.from_dict(t) for t in expected["histories"][snapshot.task_id]]
        assert store.history(snapshot.task_id) == history
    assert [_command(c) for c in store.commands()] == expected["commands"]
    statuses = Counter(TaskSnapshot.from_dict(d).status for d in expected["tasks"])
    assert store.status_counts() == dict(statuses)
    assert store.workers() == []


def test_the_migrated_schema_does_durable_work(
    postgres_dsn: str, schema: str, make_store: Callable[..., PostgresTaskStore]
) -> None:
    _load(postgres_dsn, schema)
    store = make_store()
    snapshot, transitions = build_task("new", TaskStatus.QUEUED, durable=True, priority=-9)
    store.create(snapshot, transitions)
    now = snapshot.updated_at
    assert now is not None
    request = ClaimRequest(
        owner="w1",
        names=frozenset({"job", "etl.同步"}),
        buckets=None,
        limit=10,
        now=now + timedelta(seconds=5),
        lease_until=now + timedelta(seconds=35),
    )
    assert [s.task_id for s in store.claim_tasks(request)] == ["new"]  # old ones: not durable
