"""The store contract, run against a SQLite file and against ``:memory:``."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any

from chongming_core import TaskStore
from chongming_store_contract import StoreContract
from chongming_store_sqlite import SqliteTaskStore

#: Fields kept in a column of their own; a field in both a column and the document is
#: written to both (the store reads the document and compares the column).
_COLUMNS = {"progress", "heartbeat_at", "lease_owner", "lease_until", "pid"}
_BOTH = {"status", "status_version"}
_TRANSITION_COLUMNS = {"from_status", "to_status", "trigger", "actor", "reason", "at"}


class SqlitePlanting(StoreContract):
    """Rows of the wrong shape written with raw SQL on one of the store's connections
    (the only way into ``:memory:``), bypassing every check of the store."""

    store: SqliteTaskStore

    def _execute(self, statement: str, params: tuple[Any, ...]) -> None:
        with self.store._pool.connection() as conn:
            assert conn.execute(statement, params).rowcount == 1

    def plant_unreadable_task(self, task_id: str, field: str, value: Any) -> bool:
        text = json.dumps(value)
        column = value if isinstance(value, str | int) or value is None else text
        if field in _COLUMNS:  # a literal name from the set above, never the caller's text
            self._execute(f"UPDATE tasks SET {field} = ? WHERE task_id = ?", (column, task_id))
        elif field in _BOTH:
            self._execute(
                f"UPDATE tasks SET {field} = ?, data = json_set(data, '$.' || ?, json(?)) "
                "WHERE task_id = ?",
                (column, field, text, task_id),
            )
        else:
            self._execute(
                "UPDATE tasks SET data = json_set(data, '$.' || ?, json(?)) WHERE task_id = ?",
                (field, text, task_id),
            )
        return True

    def plant_unreadable_transition(
        self, task_id: str, status_version: int, field: str, value: Any
    ) -> bool:
        assert field in _TRANSITION_COLUMNS, field
        self._execute(
            f"UPDATE transitions SET {field} = ? WHERE task_id = ? AND status_version = ?",
            (value, task_id, status_version),
        )
        return True


class TestSqliteStoreContract(SqlitePlanting):
    """A database file in a fresh temporary directory per test; a second handle is a
    second `SqliteTaskStore` on the same file (its own connections)."""

    def make_store(self) -> TaskStore:
        self._db_dir = tempfile.mkdtemp(prefix="chongming-sqlite-")
        return SqliteTaskStore(os.path.join(self._db_dir, "tasks.db"))

    def open_same_store(self, store: TaskStore) -> TaskStore:
        assert isinstance(store, SqliteTaskStore)
        return SqliteTaskStore(store.path)

    def teardown_method(self, method: object) -> None:
        try:
            super().teardown_method(method)
        finally:
            shutil.rmtree(self._db_dir, ignore_errors=True)


class TestSqliteMemoryStoreContract(SqlitePlanting):
    """``:memory:``: one database shared by every thread of the store object."""

    def make_store(self) -> TaskStore:
        return SqliteTaskStore(":memory:")
