"""PostgreSQL for the benchmarks that use it: the server to measure, and clearing up."""

from __future__ import annotations

import os

#: The server measured when ``CHONGMING_TEST_POSTGRES`` names none.
DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"


def postgres_dsn() -> str | None:
    """The DSN when PostgreSQL answers, else None (with a printed note: the PostgreSQL
    parts are skipped). The DSN itself is never printed: it may hold a password."""
    dsn = os.environ.get("CHONGMING_TEST_POSTGRES") or DEFAULT_DSN
    try:
        import psycopg

        with psycopg.connect(dsn, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:  # any failure means: skip the PostgreSQL parts
        print(f"  (PostgreSQL parts skipped: the server is unreachable: {type(exc).__name__})")
        return None
    return dsn


def drop_schema(dsn: str, schema: str) -> None:
    """Drop `schema` and everything in it."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
