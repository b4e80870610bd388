"""Turning `sqlite3` exceptions into `StoreError`s that name the file and the way out.

No driver exception reaches a caller of the store: every `sqlite3.Error` (and
the `UnicodeEncodeError` and `OverflowError` the driver raises for text and
integers SQLite cannot hold) is
translated here and chained with ``from``, so the original stays in
``__cause__`` for debugging.
"""

from __future__ import annotations

import sqlite3

from chongming_core import StoreError

__all__ = ["DRIVER_ERRORS", "is_locked", "translate"]

#: What a call into the driver may raise; every one becomes a `StoreError`.
DRIVER_ERRORS = (sqlite3.Error, UnicodeEncodeError, OverflowError)

# Primary result codes (the low byte of an extended code), from sqlite3.h.
_PERM = 3
_BUSY = 5
_LOCKED = 6
_READONLY = 8
_IOERR = 10
_CORRUPT = 11
_FULL = 13
_CANTOPEN = 14
_AUTH = 23
_NOTADB = 26


def _advice(code: int | None, detail: str, busy_timeout: float) -> str:
    if code in (_BUSY, _LOCKED):
        return (
            f"the database is locked ({detail}): another connection held its write lock "
            f"for longer than the busy timeout of {busy_timeout:g} s. Retry later; if it "
            "keeps happening, find the process that holds a long transaction on this file, "
            "or give SqliteTaskStore(..., busy_timeout=...) a longer timeout"
        )
    if code in (_CORRUPT, _NOTADB):
        return (
            f"the file is damaged or is not a SQLite database ({detail}). Restore it from a "
            "backup, or move it away to start a new store (`sqlite3 FILE .recover` may "
            "salvage its rows)"
        )
    if code == _READONLY:
        return (
            f"the database is read-only ({detail}); the store needs write access to the "
            "file and to its directory (for the -wal and -shm files)"
        )
    if code in (_PERM, _AUTH):
        return f"access was denied ({detail}); fix the file's permissions"
    if code == _CANTOPEN:
        return (
            f"the file cannot be opened ({detail}); check that it still exists and that "
            "its directory is writable"
        )
    if code == _FULL:
        return f"the disk is full ({detail}); free space, then retry"
    if code == _IOERR:
        return f"an I/O error occurred ({detail}); check the disk and the file system"
    if "no such table" in detail or "no such column" in detail:
        return (
            f"the schema is missing or incomplete ({detail}); the file was replaced or "
            "altered by another program: restore it from a backup or use a new file"
        )
    return f"SQLite failed ({detail})"


def translate(exc: BaseException, *, where: str, action: str, busy_timeout: float) -> StoreError:
    """A `StoreError` for `exc`, raised while doing `action` on the store at `where`.

    Args:
        exc: the `sqlite3.Error` (or encoding error) that was raised.
        where: the store's description, e.g. ``"SQLite task store /srv/tasks.db"``.
        action: what the store was doing, e.g. ``"saving task 'a'"``.
        busy_timeout: the configured busy timeout in seconds (quoted in lock errors).
    """
    if isinstance(exc, UnicodeEncodeError):
        return StoreError(
            f"{where}: cannot store text while {action}: it holds a lone surrogate "
            f"({exc.reason} at position {exc.start}); SQLite keeps only valid Unicode text, "
            "so encode the value properly before handing it to the store"
        )
    if isinstance(exc, OverflowError):
        return StoreError(
            f"{where}: cannot store a number while {action}: {exc}; SQLite integers are "
            "64-bit, so keep ids, buckets and pids between -2**63 and 2**63 - 1"
        )
    code = getattr(exc, "sqlite_errorcode", None)
    primary = None if code is None else code & 0xFF
    detail = str(exc) or type(exc).__name__
    name = getattr(exc, "sqlite_errorname", None)
    if name:
        detail = f"{name}: {detail}"
    if primary is None and "locked" in str(exc):
        primary = _BUSY
    return StoreError(
        f"{where}: failed while {action}: {_advice(primary, detail, busy_timeout)}",
        locked=primary in (_BUSY, _LOCKED),
    )


def is_locked(exc: sqlite3.Error) -> bool:
    """True when `exc` says the database (or a table) is locked."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (_BUSY, _LOCKED)
    return "locked" in str(exc)
