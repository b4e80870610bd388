"""``create=False``: open only a schema that holds the tables, and change nothing.

A console's query must not create the schema and its tables (nor a mistyped
``?schema=``), nor migrate old tables: each case is refused with `StoreNotFound`,
which says what was found, and the database is left exactly as it was.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg import sql

from chongming_core import StoreError, StoreNotFound, TaskStatus
from chongming_store_contract import build_task
from chongming_store_postgres import PostgresTaskStore
from chongming_store_postgres import _schema as schema_module
from chongming_store_postgres._url import store_from_url

pytestmark = pytest.mark.postgres
Admin = psycopg.Connection[tuple[Any, ...]]


def _schema_exists(admin: Admin, schema: str) -> bool:
    row = admin.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [schema]).fetchone()
    return row is not None


def _tables(admin: Admin, schema: str) -> set[str]:
    rows = admin.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", [schema]
    ).fetchall()
    return {r[0] for r in rows}


def _not_found(postgres_dsn: str, schema: str) -> StoreNotFound:
    with pytest.raises(StoreNotFound) as caught:
        PostgresTaskStore(postgres_dsn, schema=schema, create=False, min_size=0)
    assert repr(schema) in str(caught.value)
    return caught.value


def test_a_missing_schema_is_not_created(postgres_dsn: str, schema: str, admin: Admin) -> None:
    error = _not_found(postgres_dsn, schema)
    assert error.found == f"the schema {schema!r} does not exist"
    assert error.schema_version is None
    assert "nothing was created" in str(error)
    assert not _schema_exists(admin, schema)


def test_a_schema_without_the_tables_gets_none(
    postgres_dsn: str, schema: str, admin: Admin
) -> None:
    admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    error = _not_found(postgres_dsn, schema)
    assert error.found == "the schema holds no chongming tables"
    assert _tables(admin, schema) == set()


def test_a_missing_table_is_named(
    make_store: Callable[..., PostgresTaskStore], postgres_dsn: str, schema: str, admin: Admin
) -> None:
    make_store().close()
    admin.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(schema, "commands")))
    error = _not_found(postgres_dsn, schema)
    assert error.found == "the table(s) commands are missing"
    assert "commands" not in _tables(admin, schema)


def test_older_tables_are_not_migrated(
    make_store: Callable[..., PostgresTaskStore],
    postgres_dsn: str,
    schema: str,
    admin: Admin,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    make_store().close()
    # this code knows one version only: pretend it knows a second one
    monkeypatch.setattr(schema_module, "SCHEMA_VERSION", schema_module.SCHEMA_VERSION + 1)
    error = _not_found(postgres_dsn, schema)
    assert error.schema_version == schema_module.SCHEMA_VERSION - 1
    assert "create=True" in str(error)
    stored = admin.execute(
        sql.SQL("SELECT version FROM {}").format(sql.Identifier(schema, "schema_version"))
    ).fetchone()
    assert stored == (error.schema_version,)


def test_newer_tables_are_still_a_plain_store_error(
    make_store: Callable[..., PostgresTaskStore], postgres_dsn: str, schema: str, admin: Admin
) -> None:
    make_store().close()
    admin.execute(
        sql.SQL("UPDATE {} SET version = version + 1").format(
            sql.Identifier(schema, "schema_version")
        )
    )
    with pytest.raises(StoreError, match="upgrade chongming-store-postgres") as caught:
        PostgresTaskStore(postgres_dsn, schema=schema, create=False, min_size=0)
    assert not isinstance(caught.value, StoreNotFound)


def test_an_existing_store_opens(
    make_store: Callable[..., PostgresTaskStore], postgres_dsn: str, schema: str
) -> None:
    with make_store() as writer:
        writer.create(*build_task("t1", TaskStatus.RUNNING))
    with PostgresTaskStore(postgres_dsn, schema=schema, create=False, min_size=0) as reader:
        found = reader.get("t1")
        assert found is not None
        assert found.status is TaskStatus.RUNNING


def test_a_mistyped_schema_in_the_url_is_reported(
    postgres_dsn: str, schema: str, admin: Admin
) -> None:
    joiner = "&" if "?" in postgres_dsn else "?"
    with pytest.raises(StoreNotFound, match="does not exist"):
        store_from_url(f"{postgres_dsn}{joiner}schema={schema}", create=False)
    assert not _schema_exists(admin, schema)
