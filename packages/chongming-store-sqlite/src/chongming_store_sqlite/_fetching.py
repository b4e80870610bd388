"""Fetching rows whose text SQLite cannot hand over as Python text.

SQLite keeps whatever bytes a writer put in a ``TEXT`` column (``CAST(X'FF' AS TEXT)``
from a SQL prompt), and the `sqlite3` module fails the whole statement on the first
value that is not UTF-8 ("Could not decode to UTF-8 column ..."): one damaged row
would hide every other. `fetch_all` runs such a statement again with a text factory
that keeps those values as `bytes`, so the row decoder names the damaged row
(``must be text, got b'x\\xff'``) and the others read as usual. The usual path costs
nothing: the driver's own text conversion, and a retry only after that failure.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

__all__ = ["fetch_all"]


def _text_or_bytes(value: bytes) -> str | bytes:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value


def fetch_all(conn: sqlite3.Connection, statement: str, params: Sequence[Any]) -> list[Any]:
    """Every row of `statement`; text that is not UTF-8 comes back as `bytes`."""
    try:
        return conn.execute(statement, params).fetchall()
    except sqlite3.OperationalError as exc:
        if "decode to UTF-8" not in str(exc):
            raise
    conn.text_factory = _text_or_bytes
    try:
        return conn.execute(statement, params).fetchall()
    finally:
        conn.text_factory = str
