"""`FileWatch`: notices a commit to the database file by any process, with one pragma.

SQLite has no notifications between processes. ``PRAGMA data_version`` read on one
connection changes when any other connection, of this process or another, has committed
to the file since the last read on it: a few microseconds, no lock, no query of the
tables. An idle worker's pollers (work and commands) wait in slices of their poll
interval; each slice begins with this look, and they query only when the file
changed, or once a second as a fallback (a task due later).

Each waiting thread keeps the value it saw last, per kind of wait: a commit after its
last look (during a wait's last slice, or while the caller claimed) is seen by the first
look of its next wait, which returns at once. The first wait of a thread only sees the
value, so a waiter makes one wait before its first claim.

The watch has a connection of its own, opened by the first look and closed with the
store; a process forked from this one opens its own (a connection never crosses a fork).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Callable

__all__ = ["LOOK_EVERY", "FileWatch"]

#: Within one long wait, the file is looked at this often (seconds).
LOOK_EVERY = 0.1


class FileWatch:
    """The data version of one database file, read on a connection of its own."""

    def __init__(self, connect: Callable[[], sqlite3.Connection]) -> None:
        self._connect = connect
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = os.getpid()
        self._seen = threading.local()  # per thread: kind of wait -> the version seen last
        self._closed = False

    def version(self) -> int:
        """The file's data version as this watch's connection sees it now.

        Raises:
            sqlite3.Error: the connection could not be opened or read.
        """
        with self._lock:
            if self._closed:
                raise sqlite3.ProgrammingError("the watch is closed")
            if self._conn is None or self._pid != os.getpid():
                self._conn = self._connect()  # the parent's connection is left alone
                self._pid = os.getpid()
            row = self._conn.execute("PRAGMA data_version").fetchone()
            return int(row[0])

    def wait(self, kind: str, woken: Callable[[float], bool], timeout: float) -> bool:
        """True when `woken(seconds)` (this process's own wake-up) says so, or the file
        changed since this thread's last look for `kind`; False after `timeout` seconds.

        The file is looked at when the wait begins and every `LOOK_EVERY` seconds of it,
        not when it ends: a caller waiting in slices pays one look per slice, and what
        was written during the last one is seen by the first look of the next."""
        seen: dict[str, int] = self._seen.__dict__
        before = seen.get(kind)
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            now = seen[kind] = self.version()
            if before is not None and now != before:
                return True
            before = now
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if woken(min(left, LOOK_EVERY)):
                return True
            if deadline <= time.monotonic():
                return False

    def close(self) -> None:
        """Close the connection (a later look raises)."""
        with self._lock:
            self._closed = True
            conn, self._conn = self._conn, None
            if conn is not None and self._pid == os.getpid():
                conn.close()
