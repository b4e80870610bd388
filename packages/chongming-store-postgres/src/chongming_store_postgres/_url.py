"""Open a `PostgresTaskStore` from a URL (the ``chongming.stores`` entry point for
``postgresql``)."""

from __future__ import annotations

from chongming_store_postgres._store import PostgresTaskStore

__all__ = ["store_from_url"]


def store_from_url(url: str) -> PostgresTaskStore:
    """``postgresql://user:pw@host:5432/db`` (``postgres://`` works too)."""
    return PostgresTaskStore(url)
