"""The store contract against PostgreSQL: a fresh schema per test, dropped afterwards.

Creating the tables and indexes of a schema costs tens of milliseconds on a
server that fsyncs every new relation, so a background thread prepares the
next schemas (each created by a `PostgresTaskStore`, exactly as in production)
while the current test runs; a test takes a ready one in a few milliseconds.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
import uuid
from typing import Any

import psycopg
import pytest
from psycopg import sql

from chongming_core import Command, TaskStore
from chongming_store_contract import Malformed, StoreContract
from chongming_store_postgres import PostgresTaskStore
from chongming_store_postgres._codec import command_params

_ENV = "CHONGMING_TEST_POSTGRES"
_TIME_COLUMNS = {"issued_at", "lease_until", "completed_at"}

#: Columns that can hold a value of the wrong shape despite their types, with the cast of
#: the value: text where a status belongs, JSON where a record belongs. A timestamptz,
#: bigint or text[] column holds only what its type allows (a string there is refused).
_TASK_COLUMNS = {"status": "", "failure": "::jsonb", "attempts": "::jsonb", "progress": "::json"}
_TRANSITION_COLUMNS = {"from_status", "to_status"}
_READY_AHEAD = 2
_TAKE_TIMEOUT = 60.0


def write_command_row(dsn: str, schema: str, command: Command, raw: dict[str, object]) -> None:
    """Insert `command` into the commands table of `schema` with SQL, the columns of `raw`
    holding their raw values instead (as another program could)."""
    values = {**command_params(command), **raw}
    statement = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
        sql.Identifier(schema, "commands"),
        sql.SQL(", ").join(sql.Identifier(name) for name in values),
        sql.SQL(", ").join(sql.Placeholder(name) for name in values),
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(statement, values)


def drop_schema(conn: psycopg.Connection[Any], schema: str) -> None:
    """Drop `schema` and everything in it (no durable commit wait: it is scratch data)."""
    with conn.transaction():
        conn.execute("SET LOCAL synchronous_commit = off")
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


class SchemaFactory:
    """Keeps `_READY_AHEAD` freshly created, empty schemas ready in a background thread."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._ready: queue.Queue[str | BaseException] = queue.Queue(maxsize=_READY_AHEAD)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, name="schema-factory", daemon=True)
        self._thread.start()
        self.waited = 0.0
        self.taken = 0
        self._admin: psycopg.Connection[Any] = psycopg.connect(dsn, autocommit=True)
        self._admin_lock = threading.Lock()

    def _produce(self) -> None:
        while not self._stop.is_set():
            item: str | BaseException
            try:
                item = f"chongming_test_{uuid.uuid4().hex}"
                PostgresTaskStore(self.dsn, schema=item, min_size=0, max_size=1).close()
            except BaseException as exc:
                item = exc
            while not self._stop.is_set():
                try:
                    self._ready.put(item, timeout=0.2)
                    break
                except queue.Full:
                    continue
            else:
                if isinstance(item, str):
                    self.drop(item)

    def take(self) -> str:
        """A fresh schema holding empty chongming tables."""
        started = time.perf_counter()
        item = self._ready.get(timeout=_TAKE_TIMEOUT)
        self.waited += time.perf_counter() - started
        self.taken += 1
        if isinstance(item, BaseException):
            raise item
        return item

    def stop(self) -> None:
        """Stop producing and drop the schemas nobody took."""
        self._stop.set()
        self._thread.join(timeout=30)
        while True:
            try:
                item = self._ready.get_nowait()
            except queue.Empty:
                break
            if isinstance(item, str):
                self.drop(item)
        self._admin.close()

    def drop(self, schema: str) -> None:
        """Drop a schema this factory made (on its one admin connection)."""
        with self._admin_lock:
            drop_schema(self._admin, schema)


#: The factory of this test session (created by the first test that needs one).
_FACTORIES: list[SchemaFactory] = []


def teardown_module() -> None:
    for factory in _FACTORIES:
        factory.stop()
        taken = max(1, factory.taken)
        print(  # shown with -s: the setup cost of the contract run
            f"\ncontract schemas: {factory.taken} taken, waited {factory.waited:.3f} s "
            f"in total ({1000 * factory.waited / taken:.1f} ms per test)"
        )
    _FACTORIES.clear()


@pytest.mark.postgres
class TestPostgresStoreContract(StoreContract):
    """Each test gets its own schema ``chongming_test_<uuid hex>``; a second handle is a
    second `PostgresTaskStore` (its own pool) on the same schema."""

    def make_store(self) -> TaskStore:
        dsn = os.environ.get(_ENV, "")
        if not dsn:
            pytest.skip(f"{_ENV} is not set (a DSN such as postgresql://postgres@127.0.0.1/test)")
        if not _FACTORIES:
            _FACTORIES.append(SchemaFactory(dsn))
        self._dsn = dsn
        self._schema: str | None = _FACTORIES[0].take()
        return PostgresTaskStore(dsn, schema=self._schema, max_size=4)

    def open_same_store(self, store: TaskStore) -> TaskStore:
        assert isinstance(store, PostgresTaskStore)
        return PostgresTaskStore(self._dsn, schema=store.schema, max_size=4)

    def write_malformed_command(self, command: Command, column: str, bad: Malformed) -> bool:
        """Typed columns hold only valid text and times; a ``timestamptz`` column holds
        ``infinity``, which no `datetime` can hold."""
        if bad is not Malformed.OUT_OF_RANGE_TIME or column not in _TIME_COLUMNS:
            return False
        assert isinstance(self.store, PostgresTaskStore)
        write_command_row(self._dsn, self.store.schema, command, {column: "infinity"})
        return True

    def _update(self, table: str, column: str, cast: str, value: Any, *keys: Any) -> None:
        where = "task_id = %s" + (" AND status_version = %s" if len(keys) > 1 else "")
        statement = sql.SQL("UPDATE {} SET {} = %s{} WHERE {}").format(
            sql.Identifier(self._schema or "", table),
            sql.Identifier(column),
            sql.SQL(cast),  # a literal of the table above, never the caller's text
            sql.SQL(where),
        )
        with psycopg.connect(self._dsn, autocommit=True) as conn:
            assert conn.execute(statement, (value, *keys)).rowcount == 1

    def plant_unreadable_task(self, task_id: str, field: str, value: Any) -> bool:
        cast = _TASK_COLUMNS.get(field)
        if cast is None:
            return False
        self._update("tasks", field, cast, json.dumps(value) if cast else value, task_id)
        return True

    def plant_unreadable_transition(
        self, task_id: str, status_version: int, field: str, value: Any
    ) -> bool:
        if field not in _TRANSITION_COLUMNS:
            return False
        self._update("transitions", field, "", value, task_id, status_version)
        return True

    def teardown_method(self, method: object) -> None:
        try:
            super().teardown_method(method)
        finally:
            schema = getattr(self, "_schema", None)
            if schema is not None:
                _FACTORIES[0].drop(schema)
                self._schema = None
