"""Watching for changes: dedicated connections that LISTEN for the store's notifications.

`submit_command` runs ``pg_notify(channel, command_id)`` in the statement that
inserts the command, so the notification is delivered when (and only if) the
insert commits. A controller waits here instead of polling `claim_commands`. The
same `CommandListener` class waits on the work channel (a durable task enqueued or
given back); `ChangeListener` dispatches the change channel's payloads (a durable
task ended) to the threads waiting for each task.
"""

from __future__ import annotations

import contextlib
import hashlib
import select
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
from psycopg import sql

__all__ = ["ChangeListener", "CommandListener", "change_key", "channel_name", "received"]

#: PostgreSQL truncates identifiers (and refuses channel names) at 63 bytes.
_MAX_CHANNEL_BYTES = 63
#: A notification's payload must stay under 8000 bytes; longer task ids are hashed.
_MAX_PAYLOAD_BYTES = 1000
#: How long a waiter that is not reading the connection sleeps between looks at it.
_SLICE = 0.05


def received(
    conn: psycopg.Connection[Any], timeout: float, interrupt: socket.socket | None = None
) -> list[str]:
    """The payloads of the notifications that arrive on `conn` within `timeout` seconds
    (those already received first; all that came together, however many). Something
    readable on `interrupt` ends the wait early (the caller drains it).

    It sleeps in ``select`` on the connection's socket. psycopg's own ``notifies(timeout=)``
    wakes its generator hundreds of times a second while nothing arrives, which made an
    idle worker's listeners cost more CPU than everything else it does.

    Raises:
        psycopg.OperationalError: the connection was lost.
    """
    found = [n.payload for n in conn.notifies(timeout=0.0)]  # read already, or buffered
    deadline = time.monotonic() + max(0.0, timeout)
    watched: list[Any] = [conn.fileno()] if interrupt is None else [conn.fileno(), interrupt]
    while not found:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        ready, _, _ = select.select(watched, [], [], left)
        if not ready or interrupt in ready:
            break
        # readable: notifications, or other messages (a parameter change), or the end
        found = [n.payload for n in conn.notifies(timeout=0.0)]
    return found


def channel_name(schema: str, topic: str = "commands") -> str:
    """The NOTIFY channel of `topic` (``commands``, ``work``, ``changes``) of `schema`."""
    name = f"{schema}.{topic}"
    if len(name.encode("utf-8")) <= _MAX_CHANNEL_BYTES:
        return name
    digest = hashlib.sha256(schema.encode("utf-8")).hexdigest()[:32]
    return f"chongming.{topic}.{digest}"


def change_key(task_id: str) -> str:
    """The payload that names `task_id` on the change channel (a hash for a long id)."""
    if len(task_id.encode("utf-8")) <= _MAX_PAYLOAD_BYTES:
        return task_id
    return "sha256:" + hashlib.sha256(task_id.encode("utf-8")).hexdigest()


class CommandListener:
    """Waits on a dedicated autocommit connection for notifications on one channel.

    The connection is opened (and LISTEN issued) by the first `wait`. When it is
    lost, the next `wait` reports True at once (notifications may have been
    missed, so the caller should look) and reconnects on the call after. `wake` cuts a
    wait short from another thread (a socket pair the wait also selects on).
    """

    def __init__(self, channel: str, connect: Callable[[], psycopg.Connection[Any]]) -> None:
        self._channel = channel
        self._connect = connect
        self._lock = threading.Lock()
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = False
        self._woken, self._waker = socket.socketpair()
        self._woken.setblocking(False)
        self._waker.setblocking(False)

    def wait(self, timeout: float) -> bool:
        """Block until a notification arrives or `wake` is called (True), or `timeout`
        seconds pass (False).

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
                # several commands may have come at once: one wake-up for all
                found = bool(received(self._conn, timeout, self._woken))
            except psycopg.OperationalError:
                self._discard()
                return True
            woken = self._drain_wakes()
            return not self._closed and (woken or found)

    def wake(self) -> None:
        """Make the `wait` under way (or the next one) return True at once."""
        with contextlib.suppress(OSError):  # a wake-up is pending already, or closed
            self._waker.send(b"w")

    def _drain_wakes(self) -> bool:
        woken = False
        with contextlib.suppress(OSError):  # nothing more to read (or closed)
            while self._woken.recv(64):
                woken = True
        return woken

    def _discard(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def close(self) -> None:
        """Close the connection (cuts a `wait` in progress short, and waits for it)."""
        self._closed = True  # the wait cut short says False, as every wait from now on
        self.wake()
        with self._lock:
            self._discard()
            self._woken.close()
            self._waker.close()


class ChangeListener:
    """Waits on a dedicated connection for payloads on one channel, per key.

    Every waiter registers its key; whichever waiter holds the connection reads it and
    wakes the waiters of each payload that arrives, so concurrent waits for different
    tasks share one connection and lose nothing to each other. A lost connection wakes
    everyone (notifications may have been missed) and is reopened by the next wait.
    """

    def __init__(self, channel: str, connect: Callable[[], psycopg.Connection[Any]]) -> None:
        self._channel = channel
        self._connect = connect
        self._guard = threading.Lock()
        self._reader = threading.Lock()
        self._waiting: dict[str, list[threading.Event]] = {}
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = False

    def listen(self) -> None:
        """Open the connection and LISTEN, if not done yet (the caller holds no lock).

        Raises:
            psycopg.Error: the connection could not be opened (the caller translates it).
        """
        with self._reader:
            self._ensure()

    def _ensure(self) -> None:
        if self._conn is None or self._conn.closed:
            conn = self._connect()
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
            self._conn = conn

    def wait(self, key: str, timeout: float, finished: Callable[[], bool]) -> bool:
        """Block until a payload `key` arrives (True) or `timeout` seconds pass (False).

        `finished` is asked once the wait is registered and listening (so nothing can fall
        in between); when it says True, so does this, at once.

        Raises:
            psycopg.Error: the connection could not be opened (the caller translates it).
        """
        event = threading.Event()
        with self._guard:
            if self._closed:
                return False
            self._waiting.setdefault(key, []).append(event)
        try:
            self.listen()
            if finished():
                return True
            deadline = time.monotonic() + max(0.0, timeout)
            while not event.is_set():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                if self._reader.acquire(blocking=False):
                    try:
                        self._read(min(remaining, _SLICE * 4))
                    finally:
                        self._reader.release()
                else:
                    event.wait(min(remaining, _SLICE))
            return True
        finally:
            with self._guard:
                events = self._waiting.get(key, [])
                if event in events:
                    events.remove(event)
                if not events:
                    self._waiting.pop(key, None)

    def _read(self, timeout: float) -> None:
        """Read notifications for up to `timeout` seconds and wake their waiters."""
        try:
            self._ensure()
            assert self._conn is not None
            # one generator at a time: each holds the connection's lock while it runs
            for payload in received(self._conn, timeout):  # several may have come at once
                self._wake(payload)
        except psycopg.OperationalError:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
            with self._guard:
                for events in self._waiting.values():
                    for event in events:
                        event.set()

    def _wake(self, key: str) -> None:
        with self._guard:
            for event in self._waiting.get(key, ()):
                event.set()

    def close(self) -> None:
        """Close the connection (waits for a read in progress to return)."""
        with self._guard:
            self._closed = True
        with self._reader:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()
