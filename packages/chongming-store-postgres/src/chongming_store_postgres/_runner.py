"""`Runner`: runs one store call on a pooled connection, with the retries that are safe.

* A pooled connection that died while idle (server restart, an administrator's
  ``pg_terminate_backend``) is found by a readability poll of its socket before
  anything is sent on it; it is discarded and the pool checks its other idle
  connections, which usually died at the same moment.
* A transaction PostgreSQL aborted (deadlock, serialization failure: SQLSTATE
  class 40) was rolled back entirely, so it is run again.
* A call whose connection is lost while it runs is repeated once on a fresh
  connection, told ``retrying=True`` so that it can prove whether the lost
  attempt had committed (see `_writes.apply_writes` and the command methods).
* Every other driver error becomes a `StoreError` (see `_errors`).
"""

from __future__ import annotations

import contextlib
import logging
import select
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
import psycopg_pool

from chongming_core import StoreError
from chongming_store_postgres._errors import ErrorContext, is_connection_lost, rolled_back

__all__ = ["Conn", "Runner"]

_log = logging.getLogger("chongming_store_postgres")
_T = TypeVar("_T")
Conn = psycopg.Connection[tuple[Any, ...]]
#: How often a transaction aborted by a deadlock or serialization failure is run again.
_ROLLBACK_RETRIES = 4


def _readable(fd: int) -> bool:
    """Whether `fd` has data (or a hang-up) to read, without waiting."""
    if hasattr(select, "poll"):  # select() cannot watch descriptors above FD_SETSIZE
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    readable, _, _ = select.select([fd], [], [], 0)
    return bool(readable)


def _died_idle(conn: Conn) -> bool:
    """Whether a pooled connection died while it sat idle (a cheap poll, no round trip).

    A healthy idle session has nothing to read; a server that ends a session (restart,
    ``pg_terminate_backend``) first sends it an error message and closes the socket.
    """
    if conn.closed or conn.broken:
        return True
    if not _readable(conn.fileno()):
        return False
    try:
        psycopg_pool.ConnectionPool.check_connection(conn)  # data, but maybe harmless
    except psycopg.Error:
        return True
    return False


class _DiedIdle(Exception):
    """A connection handed out by the pool had died while idle (nothing was sent on it)."""


class Runner:
    """Runs calls of one store on its pool (see the module docstring)."""

    def __init__(
        self,
        pool: psycopg_pool.ConnectionPool[Conn],
        errors: ErrorContext,
        max_size: int,
        is_closed: Callable[[], bool],
    ) -> None:
        self._pool = pool
        self._errors = errors
        self._max_size = max_size
        self._is_closed = is_closed

    def run(self, action: str, body: Callable[[Conn, bool], _T]) -> _T:
        """Run `body(conn, retrying)` on a pooled connection, translating every driver error.

        A connection that died while idle in the pool is discarded before anything is
        sent on it. A transaction aborted by a deadlock or a serialization failure is run
        again. A call whose connection was lost while it ran is repeated once on a fresh
        connection with ``retrying=True``, so that `body` can tell a write the lost
        attempt had already committed from a real conflict.

        Args:
            action: what the call does, for messages ("saving task 'a'").
            body: the call; `retrying` is True on the repeat after a lost connection.

        Raises:
            StoreError: the call failed (the driver's exception is the cause).
        """
        retrying = False
        rollbacks = 0
        dead = 0
        cause: BaseException
        while True:
            conn: Conn | None = None
            try:
                with self._pool.connection() as conn:
                    if _died_idle(conn):
                        conn.close()  # the pool discards a closed connection
                        raise _DiedIdle
                    return body(conn, retrying)
            except _DiedIdle:
                dead += 1
                if dead == 1:  # they usually die together: drop the other dead ones now
                    with contextlib.suppress(psycopg.Error):
                        self._pool.check()
                if dead <= self._max_size + 1:
                    continue
                exc_dead = psycopg.OperationalError("every pooled connection was dead")
                error, cause = self._errors.failed(exc_dead, action), exc_dead
            except (psycopg.Error, UnicodeError) as exc:
                if rolled_back(exc):
                    if rollbacks < _ROLLBACK_RETRIES:
                        rollbacks += 1
                        continue
                elif not retrying and is_connection_lost(exc, conn):
                    _log.warning(
                        "%s: lost the connection while %s (%s); trying once more on a "
                        "fresh connection",
                        self._errors.store,
                        action,
                        self._errors.detail(exc),
                    )
                    retrying = True
                    continue
                if self._is_closed():
                    error = StoreError(f"{self._errors.store} was closed during {action}")
                else:
                    error = self._errors.failed(exc, action)
                cause = self._errors.cause(exc)
            raise error from cause
