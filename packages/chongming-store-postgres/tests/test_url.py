"""store_from_url: the CLI's way in, with an optional ?schema= of chongming's own."""

from __future__ import annotations

import uuid

import pytest

from chongming_store_postgres._url import store_from_url


@pytest.mark.postgres
def test_schema_parameter_selects_the_schema(postgres_dsn: str) -> None:
    import psycopg
    from psycopg import sql

    schema = f"chongming_url_{uuid.uuid4().hex[:10]}"
    joiner = "&" if "?" in postgres_dsn else "?"
    store = store_from_url(f"{postgres_dsn}{joiner}schema={schema}")
    try:
        assert store.get("missing") is None
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            found = conn.execute(
                "SELECT 1 FROM information_schema.schemata WHERE schema_name = %s", (schema,)
            ).fetchone()
        assert found is not None
    finally:
        store.close()
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
