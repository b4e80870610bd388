"""Open a `PostgresTaskStore` from a URL (the ``chongming.stores`` entry point for ``postgresql``).

``postgresql://user:pw@host:5432/db?schema=chongming`` — the ``schema`` query
parameter is chongming's own and is removed before the URL reaches libpq, which
rejects parameters it does not know.
"""

from __future__ import annotations

from chongming_store_postgres._dsn import check_url_userinfo
from chongming_store_postgres._store import PostgresTaskStore

__all__ = ["store_from_url"]


def store_from_url(url: str, *, create: bool = True) -> PostgresTaskStore:
    """``postgresql://user:pw@host:5432/db[?schema=name]`` (``postgres://`` works too).

    ``schema`` names the schema that holds the tables (default ``chongming``). `create` is
    `PostgresTaskStore`'s: False opens only a schema that already holds them.
    """
    check_url_userinfo(url)
    return PostgresTaskStore(url, create=create)  # it takes ?schema= out of the URL itself
