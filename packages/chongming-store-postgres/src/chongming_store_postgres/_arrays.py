"""Arrays whose element type the store already knows: `TextArray`, `IntArray`, `TimeArray`.

psycopg dumps a plain ``list`` by looking at its elements in Python to choose the array's
type, at every statement: for the nine one-element arrays of a single enqueue (its tags
and its first transition's columns) that was about a third of the enqueue's CPU. These
lists say their type, and their dumpers write PostgreSQL's array text at once: each text
element double-quoted with ``\\`` and ``"`` escaped (nothing else needs escaping inside
quotes), None as ``NULL``, times in ISO 8601. Text never holds NUL here (checked before).
They are registered on psycopg's global adapters for these classes only, so no other
list, and no other user of psycopg in the process, is affected.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format

__all__ = ["IntArray", "TextArray", "TimeArray"]


class TextArray(list[str | None]):
    """A ``text[]`` parameter."""


class IntArray(list[int | None]):
    """A ``bigint[]`` parameter."""


class TimeArray(list[datetime | None]):
    """A ``timestamptz[]`` parameter (aware datetimes)."""


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _dumper(type_name: str, element: Callable[[Any], str]) -> type[Dumper]:
    """A text-format dumper of an array of `type_name`, each element written by `element`."""
    array_oid = psycopg.postgres.types[type_name].array_oid

    class ArrayDumper(Dumper):
        format = Format.TEXT
        oid = array_oid

        def __init__(self, cls: type, context: Any = None) -> None:
            super().__init__(cls, context)
            info = self.connection.info if self.connection is not None else None
            self._encoding = info.encoding if info is not None else "utf-8"

        def dump(self, obj: Any) -> bytes:
            text = ",".join("NULL" if item is None else element(item) for item in obj)
            return ("{" + text + "}").encode(self._encoding)

    ArrayDumper.__name__ = ArrayDumper.__qualname__ = f"{type_name.capitalize()}ArrayDumper"
    return ArrayDumper


psycopg.adapters.register_dumper(TextArray, _dumper("text", _quoted))
psycopg.adapters.register_dumper(IntArray, _dumper("int8", lambda item: str(int(item))))
psycopg.adapters.register_dumper(
    TimeArray, _dumper("timestamptz", lambda t: _quoted(t.isoformat()))
)
