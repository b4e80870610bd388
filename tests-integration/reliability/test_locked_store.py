"""A SQLite store held by another process: its write lock is taken with ``BEGIN IMMEDIATE``
and kept while a controller with a short busy timeout runs short tasks (design D66).

Before, ``wait()`` of a 0.05 s task waited for several write attempts, each a whole busy
timeout (the flush under way, a pause, a flush of its own; single-write probes of a
batch and a touch after it, one busy timeout each), so the delays piled up. Asserted
here, by counting the writes that waited for the lock (not by timing the machine):
``wait()`` and a stop then ``wait()`` return after at most one of them;
``persist_failures`` says that the store is locked by another process and that the
writes are retried; and once the lock is released the store converges to the truth.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from chongming_core import (
    ConcurrencyConflict,
    SnapshotWrite,
    StoreError,
    TaskStatus,
    TouchUpdate,
)
from chongming_runtime import Controller
from chongming_runtime.testing import spin
from chongming_store_sqlite import SqliteTaskStore

BUSY_TIMEOUT = 1.0
WAIT = 30.0
S = TaskStatus

_HOLDER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("COMMIT")
print("released", flush=True)
"""


class CountingStore(SqliteTaskStore):
    """Records when each write that gave up on the lock ended (monotonic seconds)."""

    def __init__(self, path: Path, busy_timeout: float) -> None:
        super().__init__(path, busy_timeout=busy_timeout)
        self.lock_waits: list[float] = []
        self._guard = threading.Lock()

    def _met_lock(self, exc: StoreError) -> None:
        if "the database is locked" in str(exc):
            with self._guard:
                self.lock_waits.append(time.monotonic())

    def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
        try:
            return super().save_many(writes)
        except StoreError as exc:
            self._met_lock(exc)
            raise

    def touch_many(self, updates: Sequence[TouchUpdate]) -> int:
        try:
            return super().touch_many(updates)
        except StoreError as exc:
            self._met_lock(exc)
            raise

    def waits_between(self, start: float, end: float) -> int:
        with self._guard:
            return sum(1 for moment in self.lock_waits if start <= moment <= end)


class LockHolder:
    """Another process holding the file's write lock until `release`."""

    def __init__(self, db: Path) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, str(db)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._process.stdout is not None
        assert self._process.stdout.readline().strip() == "locked"

    def release(self) -> None:
        assert self._process.stdin is not None
        assert self._process.stdout is not None
        self._process.stdin.write("\n")
        self._process.stdin.flush()
        assert self._process.stdout.readline().strip() == "released"
        self._process.communicate(timeout=WAIT)  # it ends; its pipes are closed

    def kill(self) -> None:
        if self._process.returncode is None:
            self._process.kill()
            self._process.communicate(timeout=WAIT)


def _short(ctx: Any) -> int:
    time.sleep(0.05)
    return 1


@pytest.fixture
def node(tmp_path: Path) -> Iterator[tuple[Controller, CountingStore]]:
    store = CountingStore(tmp_path / "tasks.db", busy_timeout=BUSY_TIMEOUT)
    controller = Controller(store=store, owner="node-a", max_parallel=4)
    try:
        controller.register("short", _short)
        controller.register("spin", spin)
        assert controller.submit("short").wait(WAIT).status is S.SUCCEEDED  # the file is warm
        yield controller, store
    finally:
        controller.close(timeout=WAIT)
        store.close()


def test_wait_and_stop_under_a_lock_held_elsewhere_wait_for_one_lock_timeout(
    node: tuple[Controller, CountingStore], tmp_path: Path
) -> None:
    controller, store = node
    holder = LockHolder(tmp_path / "tasks.db")
    try:
        started = time.monotonic()
        runs = [controller.submit("short") for _ in range(4)]
        outcomes = [run.wait(WAIT) for run in runs]
        waited = time.monotonic()
        assert [o.status for o in outcomes] == [S.SUCCEEDED] * 4
        # one lock wait for their starts (a body begins only once its row was tried, D105,
        # D106) and one for their ends: the flush under way when they finished gave up on
        # the lock once, and they were told then, with no attempt of their own, no
        # single-write probes and no touch (it was 2 waits for one task, 5 for a batch)
        assert store.waits_between(started, waited) == 2
        assert waited - started < 2 * BUSY_TIMEOUT + 2.0  # generous: the count is the test

        spinning = controller.submit("spin")
        deadline = time.monotonic() + WAIT
        while spinning.status is not S.RUNNING:
            assert time.monotonic() < deadline
            time.sleep(0.005)
        stopping = time.monotonic()
        assert controller.stop(spinning.task_id, reason="under the lock")
        assert spinning.wait(WAIT).status is S.STOPPED
        stopped = time.monotonic()
        assert store.waits_between(stopping, stopped) <= 1
        assert stopped - stopping < 2 * BUSY_TIMEOUT + 2.0

        failure = controller.persist_failures[-1]
        assert "the database is locked" in failure.error
        assert "the store is locked by another connection or process" in failure.error
        assert "kept and retried every 0.5 s" in failure.error
        on_file = store.get(spinning.task_id)  # read from the file: the end is not there yet
        assert on_file is None or not on_file.is_terminal
        holder.release()
        released = time.monotonic()
    finally:
        holder.kill()
    ids = [run.task_id for run in [*runs, spinning]]
    while True:  # the store's own reads go to the file (the controller's come from memory)
        found = [store.get(task_id) for task_id in ids]
        if all(s is not None and s.is_terminal for s in found):
            break
        # the writer retries every 0.5 s: the store has everything within a busy timeout
        # or two of the release (generous bound)
        assert time.monotonic() - released < 3 * BUSY_TIMEOUT + 5.0, found
        time.sleep(0.02)
    assert [s.status for s in found if s is not None] == [S.SUCCEEDED] * 4 + [S.STOPPED]
    assert [t.to_status for t in store.history(spinning.task_id)][-2:] == [S.STOPPING, S.STOPPED]
    assert controller.flush()
