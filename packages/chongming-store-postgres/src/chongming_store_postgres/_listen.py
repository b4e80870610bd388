"""`CommandListener`: one dedicated connection that LISTENs for new commands.

`submit_command` runs ``pg_notify(channel, command_id)`` in the statement that
inserts the command, so the notification is delivered when (and only if) the
insert commits. A controller waits here instead of polling `claim_commands`.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

__all__ = ["CommandListener", "channel_name"]

#: PostgreSQL truncates identifiers (and refuses channel names) at 63 bytes.
_MAX_CHANNEL_BYTES = 63


def channel_name(schema: str) -> str:
    """The NOTIFY channel of the command table of `schema`."""
    name = f"{schema}.commands"
    if len(name.encode("utf-8")) <= _MAX_CHANNEL_BYTES:
        return name
    digest = hashlib.sha256(schema.encode("utf-8")).hexdigest()[:32]
    return f"chongming.commands.{digest}"


class CommandListener:
    """Waits on a dedicated autocommit connection for notifications on one channel.

    The connection is opened (and LISTEN issued) by the first `wait`. When it is
    lost, the next `wait` reports True at once (notifications may have been
    missed, so the caller should look) and reconnects on the call after.
    """

    def __init__(self, channel: str, connect: Callable[[], psycopg.Connection[Any]]) -> None:
        self._channel = channel
        self._connect = connect
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = False

    def wait(self, timeout: float) -> bool:
        """Block until a notification arrives (True) or `timeout` seconds pass (False).

        Raises:
            psycopg.Error: the connection could not be opened (the caller translates it).
        """
        with self._lock:
            if self._closed:
                return False
            if self._conn is None or self._conn.closed:
                conn = self._connect()
                conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
                self._conn = conn
            try:
                arrived = False
                for _ in self._conn.notifies(timeout=max(0.0, timeout), stop_after=1):
                    arrived = True
                if arrived:  # several commands may have come at once: one wake-up for all
                    for _ in self._conn.notifies(timeout=0.0):
                        pass
                return arrived
            except psycopg.OperationalError:
                self._discard()
                return True

    def _discard(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def close(self) -> None:
        """Close the connection (waits for a `wait` in progress to return)."""
        with self._lock:
            self._closed = True
            self._discard()
