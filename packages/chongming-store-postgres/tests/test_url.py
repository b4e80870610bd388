"""``?schema=``, chongming's own parameter of a URL DSN: taken by `store_from_url` (the
console's way in) and by `PostgresTaskStore` itself, never passed on to libpq."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest

from chongming_core import ConfigurationError, TaskStore
from chongming_store_postgres import PostgresTaskStore
from chongming_store_postgres._dsn import split_schema
from chongming_store_postgres._url import store_from_url


@pytest.mark.postgres
@pytest.mark.parametrize("open_store", [store_from_url, PostgresTaskStore])
def test_schema_parameter_selects_the_schema(
    postgres_dsn: str, open_store: Callable[[str], TaskStore]
) -> None:
    import psycopg
    from psycopg import sql

    schema = f"chongming_url_{uuid.uuid4().hex[:10]}"
    joiner = "&" if "?" in postgres_dsn else "?"
    store = open_store(f"{postgres_dsn}{joiner}schema={schema}")
    try:
        assert store.get("missing") is None
        assert isinstance(store, PostgresTaskStore)
        assert store.schema == schema
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            found = conn.execute(
                "SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", (schema,)
            ).fetchone()
        assert found is not None
    finally:
        store.close()
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def test_the_schema_parameter_is_taken_out_of_a_url_only() -> None:
    assert split_schema("postgresql://u@h/db?schema=s&sslmode=disable") == (
        "postgresql://u@h/db?sslmode=disable",
        "s",
    )
    assert split_schema("postgres://u@h/db?schema=s") == ("postgres://u@h/db", "s")
    assert split_schema("postgresql://u@h/db") == ("postgresql://u@h/db", None)
    assert split_schema("host=h dbname=db") == ("host=h dbname=db", None)  # key=value: libpq's
    assert split_schema("postgresql://u@h/db?schema=s&schema=s") == ("postgresql://u@h/db", "s")


def test_a_schema_named_twice_differently_is_refused_before_connecting() -> None:
    with pytest.raises(ConfigurationError, match="more than one schema"):
        split_schema("postgresql://u:Secret1@h/db?schema=a&schema=b")
    with pytest.raises(ConfigurationError, match="names schema 'a' and schema= names 'b'") as e:
        PostgresTaskStore("postgresql://u:Secret1@127.0.0.1:1/db?schema=a", schema="b")
    assert "Secret1" not in str(e.value)
