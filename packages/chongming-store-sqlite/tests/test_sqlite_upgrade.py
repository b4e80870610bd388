"""A store written by the previous release (schema 2) is migrated in place to schema 3.

``data/store-v2.db`` was made once with that release's code (see
``tests-integration/make_v2_stores.py``): tasks of every status with their histories,
tags, labels, buckets, progress, failures and leases, and commands pending, claimed
and complete. ``data/store-v2.json`` is what that release read back.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sqlite3
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from chongming_core import (
    ClaimRequest,
    StoreError,
    StoreNotFound,
    TaskSnapshot,
    TaskStatus,
    Transition,
)
from chongming_store_contract import build_task
from chongming_store_sqlite import SqliteTaskStore
from chongming_store_sqlite import _schema as schema_module

DATA = Path(__file__).parent / "data"


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    """A copy of the schema 2 store (the test may change it)."""
    path = tmp_path / "store.db"
    shutil.copyfile(DATA / "store-v2.db", path)
    return path


def _expected() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DATA / "store-v2.json").read_text(encoding="utf-8"))
    return loaded


def _user_version(path: Path) -> int:
    raw = sqlite3.connect(path)
    try:
        return int(raw.execute("PRAGMA user_version").fetchone()[0])
    finally:
        raw.close()


def _command(command: object) -> dict[str, Any]:
    document = dataclasses.asdict(command)  # type: ignore[call-overload]
    return {k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in document.items()}


def test_the_fixture_is_a_store_of_the_previous_schema(old_store: Path) -> None:
    assert _user_version(old_store) == 2 == schema_module.SCHEMA_VERSION - 1


def test_a_read_only_open_refuses_it_and_changes_nothing(old_store: Path) -> None:
    before = old_store.read_bytes()
    with pytest.raises(StoreNotFound, match="schema 2") as caught:
        SqliteTaskStore(old_store, create=False)
    assert caught.value.schema_version == 2
    assert "\n" not in str(caught.value)
    assert old_store.read_bytes() == before


def test_opening_for_writing_migrates_and_loses_nothing(old_store: Path) -> None:
    expected = _expected()
    with SqliteTaskStore(old_store) as store:
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
        assert sum(len(h) for h in expected["histories"].values()) > len(tasks)
        assert [_command(c) for c in store.commands()] == expected["commands"]
        statuses = Counter(TaskSnapshot.from_dict(d).status for d in expected["tasks"])
        assert store.status_counts() == dict(statuses)
    assert _user_version(old_store) == 3


def test_the_migrated_store_does_durable_work(old_store: Path) -> None:
    with SqliteTaskStore(old_store) as store:
        queued_before = {s.task_id for s in store.query() if s.status is TaskStatus.QUEUED}
        assert queued_before  # a queued task that is not durable: never claimed
        snapshot, transitions = build_task("new", TaskStatus.QUEUED, durable=True, priority=-9)
        store.create(snapshot, transitions)
        now = snapshot.created_at or snapshot.updated_at
        assert now is not None
        request = ClaimRequest(
            owner="w1",
            names=frozenset({"job", "etl.同步"}),
            buckets=None,
            limit=10,
            now=now + timedelta(seconds=5),
            lease_until=now + timedelta(seconds=35),
        )
        assert [s.task_id for s in store.claim_tasks(request)] == ["new"]


def test_a_failed_migration_leaves_the_store_as_it_was(
    old_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = (*schema_module.MIGRATIONS[:2], (*schema_module.MIGRATIONS[2], "SELECT nope()"))
    monkeypatch.setattr("chongming_store_sqlite._opening.MIGRATIONS", broken)
    with pytest.raises(StoreError):
        SqliteTaskStore(old_store)
    assert _user_version(old_store) == 2
    raw = sqlite3.connect(old_store)
    try:
        columns = {row[1] for row in raw.execute("PRAGMA table_info(tasks)")}
        tables = {row[0] for row in raw.execute("SELECT name FROM sqlite_master")}
    finally:
        raw.close()
    assert "durable" not in columns
    assert "workers" not in tables
    monkeypatch.undo()
    with SqliteTaskStore(old_store) as store:  # and the next open migrates it whole
        assert len(store.query()) == len(_expected()["tasks"])


def test_a_store_of_a_newer_schema_is_refused_in_one_line(old_store: Path) -> None:
    with SqliteTaskStore(old_store):
        pass
    raw = sqlite3.connect(old_store)
    raw.execute("PRAGMA user_version = 4")
    raw.commit()
    raw.close()
    before = old_store.read_bytes()
    with pytest.raises(StoreError, match="newer chongming") as caught:
        SqliteTaskStore(old_store)
    assert "\n" not in str(caught.value)
    assert old_store.read_bytes() == before
