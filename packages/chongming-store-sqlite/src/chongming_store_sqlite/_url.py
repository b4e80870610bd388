"""Open a `SqliteTaskStore` from a URL (the ``chongming.stores`` entry point for ``sqlite``)."""

from __future__ import annotations

import os
from urllib.parse import unquote_to_bytes, urlsplit

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
    path = _file_name(parts.path[1:] if parts.path.startswith("/") else parts.path, url)
    if not path:
        raise ConfigurationError(f"the SQLite URL {url!r} names no file; write sqlite:///tasks.db")
    return SqliteTaskStore(path, create=create)


def _file_name(encoded: str, url: str) -> str:
    """The file name a URL path spells: its percent-escapes are the name's bytes (``%FF``
    for 0xff, a name that is not UTF-8), decoded as `os.fsdecode` does, so the store opens
    that very file instead of one named with U+FFFD."""
    try:
        raw = encoded.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        raise ConfigurationError(
            f"the SQLite URL {url!r} holds a lone surrogate; percent-encode the bytes of "
            "the file name (e.g. %FF for 0xff)"
        ) from None
    return os.fsdecode(unquote_to_bytes(raw))
