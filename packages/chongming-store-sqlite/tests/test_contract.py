"""The store contract, run against a SQLite file and against ``:memory:``."""

from __future__ import annotations

import os
import shutil
import tempfile

from chongming_core import TaskStore
from chongming_store_contract import StoreContract
from chongming_store_sqlite import SqliteTaskStore


class TestSqliteStoreContract(StoreContract):
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


class TestSqliteMemoryStoreContract(StoreContract):
    """``:memory:``: one database shared by every thread of the store object."""

    def make_store(self) -> TaskStore:
        return SqliteTaskStore(":memory:")
