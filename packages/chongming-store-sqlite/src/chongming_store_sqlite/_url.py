"""Open a `SqliteTaskStore` from a URL (the ``chongming.stores`` entry point for ``sqlite``)."""

from __future__ import annotations

from urllib.parse import unquote, urlsplit

from chongming_core import ConfigurationError
from chongming_store_sqlite._store import SqliteTaskStore

__all__ = ["store_from_url"]


def store_from_url(url: str, *, create: bool = True) -> SqliteTaskStore:
    """``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db`` or ``sqlite://:memory:``.

    A plain path without a scheme is accepted too. `create` is `SqliteTaskStore`'s:
    False opens only an existing store and changes nothing.
    """
    if "://" not in url:
        return SqliteTaskStore(url, create=create)
    parts = urlsplit(url)
    if parts.scheme != "sqlite":
        raise ConfigurationError(f"not a SQLite URL: {url!r}; write sqlite:///path/to/tasks.db")
    if parts.netloc == ":memory:" or parts.path in {"/:memory:", ":memory:"}:
        return SqliteTaskStore(":memory:", create=create)
    if parts.netloc:
        raise ConfigurationError(
            f"SQLite URLs have no host ({parts.netloc!r} in {url!r}); write "
            "sqlite:///relative.db or sqlite:////absolute/path.db"
        )
    path = unquote(parts.path[1:] if parts.path.startswith("/") else parts.path)
    if not path:
        raise ConfigurationError(f"the SQLite URL {url!r} names no file; write sqlite:///tasks.db")
    return SqliteTaskStore(path, create=create)
