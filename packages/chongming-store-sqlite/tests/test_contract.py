"""The store contract, run against a SQLite file and against ``:memory:``."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any

from chongming_core import Command, TaskStore
from chongming_store_contract import Malformed, StoreContract
from chongming_store_sqlite import SqliteTaskStore
from chongming_store_sqlite._codec import command_row

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

    def write_malformed_command(self, command: Command, column: str, bad: Malformed) -> bool:
        assert isinstance(self.store, SqliteTaskStore)
        return write_malformed_row(self.store, command, column, bad)

    def teardown_method(self, method: object) -> None:
        try:
            super().teardown_method(method)
        finally:
            shutil.rmtree(self._db_dir, ignore_errors=True)


class TestSqliteMemoryStoreContract(SqlitePlanting):
    """``:memory:``: one database shared by every thread of the store object."""

    def make_store(self) -> TaskStore:
        return SqliteTaskStore(":memory:")

    def write_malformed_command(self, command: Command, column: str, bad: Malformed) -> bool:
        assert isinstance(self.store, SqliteTaskStore)
        return write_malformed_row(self.store, command, column, bad)


#: Columns of the commands table that hold times, and their integer twin (if any).
_TIME_COLUMNS = {"issued_at", "lease_until", "completed_at"}


def write_malformed_row(
    store: SqliteTaskStore, command: Command, column: str, bad: Malformed
) -> bool:
    """Insert `command` with SQL, `column` holding `bad` as SQLite keeps it (a TEXT column
    turns a number into text, so a number is no malformed text here)."""
    values = dict(zip(_COMMAND_COLUMNS, command_row(command), strict=True))
    expression = "?"
    if bad in (Malformed.NOT_A_TIME, Malformed.NAIVE_TIME):
        if column not in _TIME_COLUMNS:
            return False
        values[column] = "next tuesday" if bad is Malformed.NOT_A_TIME else "2026-01-01T00:00:07"
    elif bad is Malformed.BLOB:
        values[column] = b"\x00\xffblob"
    elif bad is Malformed.NOT_UTF8:
        expression = "CAST(X'ff6e6f7420757466' AS TEXT)"  # bytes that are no UTF-8
    elif bad is Malformed.WRONG_TYPE and column == "bucket":
        values[column] = "seven"
    else:
        return False
    marks = ", ".join(expression if name == column else "?" for name in values)
    params = [value for name, value in values.items() if name != column or expression == "?"]
    statement = f"INSERT INTO commands ({', '.join(values)}) VALUES ({marks})"
    with store._writing("writing a malformed command row") as conn:
        conn.execute(statement, params)
    return True


_COMMAND_COLUMNS = (
    "command_id",
    "task_id",
    "action",
    "issued_by",
    "issued_at",
    "reason",
    "bucket",
    "claimed_by",
    "lease_until",
    "completed_at",
    "result",
    "lease_until_us",
)
