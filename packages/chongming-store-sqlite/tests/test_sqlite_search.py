"""Search runs on a stored case-folded key; files of schema 1 are migrated to it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from chongming_core import TaskQuery, TaskSnapshot
from chongming_store_sqlite import SqliteTaskStore
from chongming_store_sqlite._schema import APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION


def _ids(store: SqliteTaskStore, needle: str) -> list[str]:
    return [s.task_id for s in store.query(TaskQuery(search=needle))]


def test_search_folds_case_and_handles_nul_and_separators(tmp_path: Path) -> None:
    store = SqliteTaskStore(tmp_path / "s.db")
    try:
        for task_id, label in [
            ("a", "Straße 转换-1"),
            ("b", "ÄRGER"),
            ("c", "nul\x00inside"),
            ("d", None),
        ]:
            store.create(TaskSnapshot(task_id=task_id, name="Sync", label=label))
        assert _ids(store, "STRASSE") == ["a"]  # casefold: ß -> ss
        assert _ids(store, "转换") == ["a"]
        assert _ids(store, "ärger") == ["b"]
        assert _ids(store, "sync") == ["a", "b", "c", "d"]
        assert _ids(store, "nul\x00in") == ["c"]  # a NUL needle takes the exact path
        assert _ids(store, "nulinside") == []
        assert _ids(store, "\x1f") == []  # the key's separator never matches by itself
        assert _ids(store, "") == ["a", "b", "c", "d"]
    finally:
        store.close()


def test_a_schema_1_file_is_migrated_and_searchable(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    for statement in MIGRATIONS[0]:
        conn.execute(statement)
    conn.execute(
        "INSERT INTO tasks (task_id, name, status, status_version, label, tags, data) "
        "VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            "old-1",
            "extract",
            "pending",
            0,
            "转换-1",
            "[]",
            '{"task_id": "old-1", "name": "extract", "status": "pending", '
            '"status_version": 0, "label": "转换-1"}',
        ),
    )
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    store = SqliteTaskStore(path)
    try:
        assert _ids(store, "转换") == ["old-1"]
        assert _ids(store, "EXTRACT") == ["old-1"]
    finally:
        store.close()
    check = sqlite3.connect(path)
    assert check.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    check.close()
