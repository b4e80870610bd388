"""Fetching task and transition rows that hold values Python cannot take.

The column types keep most damage out, but not all of it: a ``timestamptz`` may
hold ``infinity`` or a year beyond 9999, which no `datetime` can, and a ``json``
value may nest deeper than Python's parser recurses. psycopg fails the whole fetch
on the first such value, so one damaged row would hide every other. `fetch_all`
fetches again with loaders that keep such a value as an `Unloadable` (its text), so
the row decoder names the damaged row and the others read as usual. The usual path
costs nothing: the driver's own loaders, and a retry only after that failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg
from psycopg import abc
from psycopg.adapt import Loader
from psycopg.pq import Format

from chongming_store_postgres._runner import Conn

__all__ = ["Unloadable", "fetch_all", "lenient_loaders"]

#: The types whose stored values may be beyond what Python holds.
_LENIENT_TYPES = ("timestamptz", "json", "jsonb")


class Unloadable:
    """A stored value Python cannot hold, kept as its text (shown by ``repr``)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return repr(self.text)


#: The lenient loader class made for each inner loader class (`_lenient`).
_LENIENT_MADE: dict[type[abc.Loader], type[Loader]] = {}


def _lenient(inner: type[abc.Loader]) -> type[Loader]:
    """A loader that loads as `inner` does, and keeps what `inner` cannot load as text
    (made once per `inner`: a class costs more to make than a claim's rows to load)."""
    made = _LENIENT_MADE.get(inner)
    if made is None:
        made = _LENIENT_MADE[inner] = _make_lenient(inner)
    return made


def _make_lenient(inner: type[abc.Loader]) -> type[Loader]:
    """The class `_lenient` hands out for `inner`."""

    class Lenient(Loader):
        def __init__(self, oid: int, context: Any = None) -> None:
            super().__init__(oid, context)
            self._inner = inner(oid, context)

        def load(self, data: Any) -> Any:
            try:
                return self._inner.load(data)
            except (psycopg.DataError, ValueError, RecursionError):
                return Unloadable(bytes(data).decode("utf-8", "replace"))

    return Lenient


def lenient_loaders(cursor: psycopg.Cursor[Any]) -> None:
    """Make `cursor` keep every value of `_LENIENT_TYPES` it cannot load as an `Unloadable`."""
    adapters = cursor.adapters
    for name in _LENIENT_TYPES:
        info = adapters.types[name]
        inner = adapters.get_loader(info.oid, Format.TEXT)
        if inner is not None:
            adapters.register_loader(info.oid, _lenient(inner))


def fetch_all(conn: Conn, statement: Any, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """Every row of `statement`; a value Python cannot hold comes back as an `Unloadable`."""
    try:
        return conn.execute(statement, params).fetchall()
    except psycopg.DataError as exc:
        if exc.sqlstate is not None:
            raise  # the server refused the statement: not a value it sent
    except RecursionError:
        pass
    with conn.cursor() as cursor:
        lenient_loaders(cursor)
        return cursor.execute(statement, params).fetchall()
