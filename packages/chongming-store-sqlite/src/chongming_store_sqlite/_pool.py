"""`ConnectionPool`: connections handed to one thread at a time, all closed by `close()`.

Why a pool and not one connection behind a lock: in WAL mode SQLite lets
readers run while a writer writes, and the `sqlite3` module releases the GIL
while a statement runs. With one connection per concurrent caller a dashboard
query never waits for the controller's group commit, and two readers never
wait for each other. Why a pool and not thread-local connections: a thread
that ends would leave its connection open until the store closes, and a
program that starts many short threads would pile up file handles; a pool
keeps exactly as many connections as were ever used *at the same time*, and
it knows every one of them, so `close()` can release them all.

A ``:memory:`` database exists only inside its one connection, so its pool
has size 1: the store then behaves as "one connection behind a lock", which is
what makes all threads of that store object share one database.

After ``fork()`` a child must not use connections inherited from its parent
(SQLite's POSIX locks belong to the process, and closing an inherited handle
in the child can drop the parent's locks). The pool notices the new process id
and abandons the inherited connections without closing them.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Iterator

__all__ = ["ConnectionPool", "PoolClosed"]


class PoolClosed(Exception):
    """The pool was closed; no connection can be handed out any more."""


class ConnectionPool:
    """Up to `max_size` connections made by `factory`, each used by one thread at a time."""

    def __init__(
        self,
        factory: Callable[[], sqlite3.Connection],
        *,
        max_size: int,
        keep_after_fork: bool = False,
    ) -> None:
        self._factory = factory
        self._max_size = max_size
        self._keep_after_fork = keep_after_fork
        self._cond = threading.Condition(threading.Lock())
        self._idle: list[sqlite3.Connection] = []
        self._count = 0  # connections that exist or are being made
        self._in_use = 0
        self._closed = False
        self._pid = os.getpid()
        _POOLS.add(self)

    @property
    def closed(self) -> bool:
        """True once `close` was called."""
        return self._closed

    def add(self, conn: sqlite3.Connection) -> None:
        """Adopt an already-made connection (the one that initialised the database)."""
        with self._cond:
            self._count += 1
            self._idle.append(conn)

    @contextlib.contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """A connection for the duration of the block, then back to the pool.

        A connection left inside a transaction (the block could not roll back)
        is discarded instead of reused.

        Raises:
            PoolClosed: the pool was closed.
        """
        conn = self._acquire()
        try:
            yield conn
        finally:
            self._release(conn)

    def _acquire(self) -> sqlite3.Connection:
        with self._cond:
            while True:
                if self._closed:
                    raise PoolClosed
                if self._idle:
                    self._in_use += 1
                    return self._idle.pop()
                if self._count < self._max_size:
                    self._count += 1
                    self._in_use += 1
                    break
                self._cond.wait()
        try:
            conn = self._factory()
        except BaseException:
            with self._cond:
                self._count -= 1
                self._in_use -= 1
                self._cond.notify_all()
            raise
        return conn

    def _release(self, conn: sqlite3.Connection) -> None:
        broken = _in_transaction(conn)
        with self._cond:
            if os.getpid() != self._pid:
                return  # used across a fork: leave it alone, the child re-initialises
            self._in_use -= 1
            if self._closed or broken:
                self._count -= 1
                _close_quietly(conn)
            else:
                self._idle.append(conn)
            self._cond.notify_all()

    def _reset_in_child(self) -> None:
        """Run in a child right after ``fork()``: forget the parent's connections and lock."""
        # The parent's lock may have been held by a thread that does not exist here.
        self._cond = threading.Condition(threading.Lock())
        self._pid = os.getpid()
        self._in_use = 0
        if not self._keep_after_fork:
            # Deliberately never closed, nor left to the garbage collector: closing a
            # descriptor of the file drops every POSIX lock this process holds on it,
            # including those of the child's own new connections.
            _ABANDONED.extend(self._idle)
            self._idle = []
            self._count = 0
        else:
            self._count = len(self._idle)

    def close(self, *, wait: float) -> None:
        """Close every connection. Idle ones close now; ones in use close when their block
        ends, and this waits up to `wait` seconds for that. Idempotent."""
        deadline = time.monotonic() + wait
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._count -= len(idle)
            for conn in idle:
                _close_quietly(conn)
            while self._in_use > 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)


_POOLS: weakref.WeakSet[ConnectionPool] = weakref.WeakSet()
_ABANDONED: list[sqlite3.Connection] = []


def _reset_pools_in_child() -> None:
    for pool in list(_POOLS):
        pool._reset_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_pools_in_child)


def _in_transaction(conn: sqlite3.Connection) -> bool:
    try:
        return conn.in_transaction
    except sqlite3.Error:
        return True


def _close_quietly(conn: sqlite3.Connection) -> None:
    with contextlib.suppress(sqlite3.Error):
        conn.close()
