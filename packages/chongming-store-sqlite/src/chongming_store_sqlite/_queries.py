"""`TaskQuery` to parameterised SQL.

Every value is bound as a parameter; the SQL text is assembled only from the
fixed fragments below. Text is compared with SQLite's BINARY collation, which
compares UTF-8 bytes and so orders strings by code point, exactly as Python
does, NUL bytes included. That is why the name prefix is a range
(``prefix <= name < successor``, which the index on ``name`` serves) rather
than ``LIKE`` (which treats ``%`` and ``_`` specially and folds ASCII case),
and why the case-insensitive search is a Python function (`search_matches`)
using ``str.casefold`` like the reference store, not SQLite's ASCII-only
``lower()``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TypeVar

from chongming_core import TaskQuery
from chongming_store_sqlite._codec import micros
from chongming_store_sqlite._search import SEARCH_KEY_FUNCTION, UNSAFE_IN_NEEDLE, search_key

__all__ = [
    "CHUNK",
    "SEARCH_FUNCTION",
    "SEARCH_KEY_FUNCTION",
    "chunks",
    "placeholders",
    "prefix_successor",
    "search_key",
    "search_matches",
    "where_clause",
]

#: Values bound in one ``IN (...)`` list (well below SQLite's variable limit).
CHUNK = 500

#: The name of the SQL function `search_matches` is registered as.
SEARCH_FUNCTION = "chongming_search"


_T = TypeVar("_T")
_MAX_CODE_POINT = 0x10FFFF
_SURROGATES = range(0xD800, 0xE000)


def chunks(values: Sequence[_T], size: int = CHUNK) -> Iterator[Sequence[_T]]:
    """`values` in consecutive slices of at most `size`."""
    for start in range(0, len(values), size):
        yield values[start : start + size]


def placeholders(count: int) -> str:
    """``?, ?, ?`` with `count` marks."""
    return ", ".join("?" * count)


def prefix_successor(prefix: str) -> str | None:
    """The smallest string greater than every string that starts with `prefix`.

    None when there is none (the prefix is made only of U+10FFFF).
    """
    chars = list(prefix)
    while chars:
        code = ord(chars[-1]) + 1
        if code in _SURROGATES:
            code = _SURROGATES.stop
        if code <= _MAX_CODE_POINT:
            chars[-1] = chr(code)
            return "".join(chars)
        chars.pop()
    return None


def search_matches(needle: str | None, *haystacks: str | None) -> int:
    """1 when `needle` is a case-insensitive substring of any haystack (SQL function)."""
    if needle is None:
        return 0
    folded = needle.casefold()
    return int(any(h is not None and folded in h.casefold() for h in haystacks))


def where_clause(
    query: TaskQuery, task_ids: Sequence[str] | None = None, *, ordered_scan: bool = False
) -> tuple[str, list[object]]:
    """The ``WHERE`` text and its parameters for every filter of `query`.

    `task_ids` replaces ``query.task_ids`` (the caller passes one chunk at a time).
    Limit, offset and order are the caller's business. With `ordered_scan` (a limited
    query in creation order) the name range is kept off the index: walking ``seq`` and
    stopping at the limit costs at most one scan, while the name index would make SQLite
    sort every match first (a common prefix matching most of a big store is the slow case).
    """
    clauses: list[str] = []
    params: list[object] = []
    if query.statuses is not None:
        statuses = sorted(s.value for s in query.statuses)
        clauses.append(f"status IN ({placeholders(len(statuses))})")
        params.extend(statuses)
    if query.name_prefix:
        column = "+name" if ordered_scan else "name"  # unary + keeps the index out
        clauses.append(f"{column} >= ?")
        params.append(query.name_prefix)
        upper = prefix_successor(query.name_prefix)
        if upper is not None:
            clauses.append(f"{column} < ?")
            params.append(upper)
    if query.tag is not None:
        clauses.append("task_id IN (SELECT task_id FROM task_tags WHERE tag = ?)")
        params.append(query.tag)
    if query.bucket is not None:
        clauses.append("bucket = ?")
        params.append(query.bucket)
    if query.buckets is not None:
        # Buckets are integers, so a JSON array is a safe single parameter for any count.
        clauses.append("bucket IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(list(query.buckets)))
    if task_ids is not None:
        clauses.append(f"task_id IN ({placeholders(len(task_ids))})")
        params.extend(task_ids)
    if query.lease_owner is not None:
        clauses.append("lease_owner = ?")
        params.append(query.lease_owner)
    if query.lease_expired_before is not None:
        clauses.append("(lease_until_us IS NULL OR lease_until_us < ?)")
        params.append(micros(query.lease_expired_before, "lease_expired_before"))
    if query.pipeline_id is not None:
        clauses.append("pipeline_id = ?")
        params.append(query.pipeline_id)
    if query.search is not None:
        needle = query.search
        if needle and not any(c in needle for c in UNSAFE_IN_NEEDLE):
            # the indexed-free but C-speed path: a plain substring test on a stored key
            clauses.append("instr(search_key, ?) > 0")
            params.append(needle.casefold())
        else:
            clauses.append(f"{SEARCH_FUNCTION}(?, task_id, name, label)")
            params.append(needle)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params
