"""`begin_immediate`: the write lock, waited for in short pauses up to the busy timeout."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from chongming_store_sqlite import _locking
from chongming_store_sqlite._locking import begin_immediate


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=5.0, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    return conn


class _Time:
    """`time` for `_locking`, with `sleep` replaced."""

    def __init__(self, sleep: Callable[[float], None]) -> None:
        self.sleep = sleep
        self.monotonic = time.monotonic


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[sqlite3.Connection, sqlite3.Connection]]:
    path = tmp_path / "lock.db"
    first, second = _connect(path), _connect(path)
    first.execute("CREATE TABLE t (x)")
    yield first, second
    first.close()
    second.close()


def test_the_lock_is_taken_once_the_holder_commits_in_short_pauses(
    pair: tuple[sqlite3.Connection, sqlite3.Connection], monkeypatch: pytest.MonkeyPatch
) -> None:
    holder, waiter = pair
    holder.execute("BEGIN IMMEDIATE")
    pauses: list[float] = []
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) == 6:
            holder.execute("COMMIT")  # the holder commits while the waiter sleeps
        real_sleep(seconds)

    monkeypatch.setattr(_locking, "time", _Time(sleep))
    begin_immediate(waiter, busy_timeout=5.0)
    assert waiter.in_transaction
    waiter.execute("INSERT INTO t VALUES (1)")
    waiter.execute("COMMIT")
    # 0.2 ms, doubling, at most 5 ms: not SQLite's 1, 2, 5, 10, 15... ms
    assert pauses[:6] == pytest.approx([0.0002, 0.0004, 0.0008, 0.0016, 0.0032, 0.005])
    assert waiter.execute("PRAGMA busy_timeout").fetchone()[0] == 5000  # restored


def test_a_lock_held_past_the_busy_timeout_fails_as_locked_and_restores_the_handler(
    pair: tuple[sqlite3.Connection, sqlite3.Connection],
) -> None:
    holder, waiter = pair
    holder.execute("BEGIN IMMEDIATE")
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        begin_immediate(waiter, busy_timeout=0.05)
    assert not waiter.in_transaction
    assert waiter.execute("PRAGMA busy_timeout").fetchone()[0] == 50
    holder.execute("ROLLBACK")


def test_an_error_that_is_not_a_lock_is_raised_at_once(
    pair: tuple[sqlite3.Connection, sqlite3.Connection],
) -> None:
    _, conn = pair
    conn.execute("BEGIN")
    with pytest.raises(sqlite3.OperationalError, match="within a transaction"):
        begin_immediate(conn, busy_timeout=30.0)  # no wait of 30 s for what is not a lock
    conn.execute("ROLLBACK")
