"""Locks: a write lock held too long is a clear `StoreError`; one released in time is waited for."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from chongming_core import SnapshotWrite, StoreError, TaskStatus
from chongming_store_contract import BASE_TIME, BuiltTask, build_command, build_task, next_version
from chongming_store_sqlite import SqliteTaskStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteTaskStore]:
    with SqliteTaskStore(tmp_path / "tasks.db", busy_timeout=0.2) as s:
        yield s


def hold_write_lock(path: str) -> sqlite3.Connection:
    """Another connection that holds the database's write lock until it is rolled back."""
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    return blocker


def test_a_lock_held_past_the_busy_timeout_is_a_store_error(store: SqliteTaskStore) -> None:
    built = build_task("t1", TaskStatus.RUNNING)
    store.create(*built)
    following = next_version(built.snapshot)
    blocker = hold_write_lock(store.path)
    try:
        started = time.monotonic()
        with pytest.raises(StoreError) as caught:
            store.save(
                following.snapshot,
                expect_version=built.snapshot.status_version,
                transitions=following.transitions,
            )
        waited = time.monotonic() - started
        message = str(caught.value)
        assert store.path in message
        assert "locked" in message
        assert "busy_timeout" in message
        assert "0.2 s" in message
        assert "Retry later" in message
        assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
        assert caught.value.locked  # nothing was written: the writer retries it whole (D66)
        assert waited >= 0.15, "the write waited for the lock before giving up"
        # WAL: readers are not blocked by the writer, and see the data written before.
        assert store.get("t1") == built.snapshot
        assert store.history("t1") == list(built.transitions)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    store.save(
        following.snapshot,
        expect_version=built.snapshot.status_version,
        transitions=following.transitions,
    )
    assert store.get("t1") == following.snapshot


def test_every_kind_of_write_reports_the_lock(tmp_path: Path) -> None:
    with SqliteTaskStore(tmp_path / "tasks.db", busy_timeout=0.05) as store:
        check_every_write(store, tmp_path)


def check_every_write(store: SqliteTaskStore, tmp_path: Path) -> None:
    built = build_task("t1", TaskStatus.SUCCEEDED)
    store.create(*built)
    store.submit_command(build_command("c0", "t1"))  # a claim finds it: then it must write
    other = build_task("t2")
    writes: list[Callable[[], object]] = [
        lambda: store.create(*other),
        lambda: store.save_many([SnapshotWrite(other.snapshot, None, other.transitions)]),
        lambda: store.append(other.transitions or built.transitions),
        lambda: store.touch("t1", pid=1),
        lambda: store.submit_command(build_command("c1", "t1")),
        lambda: store.claim_commands("me", now=BASE_TIME, lease_seconds=5),
        lambda: store.complete_command("c1", owner="me", now=BASE_TIME, result="ok"),
        lambda: store.release_command("c1", owner="me"),
        lambda: store.prune(0),
        lambda: store.archive(finished_before=BASE_TIME.replace(year=2100), path=tmp_path / "a"),
    ]
    blocker = hold_write_lock(store.path)
    try:
        for write in writes:
            with pytest.raises(StoreError, match="locked") as caught:
                write()
            assert caught.value.locked
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert store.get("t1") == built.snapshot
    assert store.get("t2") is None
    assert [(c.command_id, c.claimed_by) for c in store.commands()] == [("c0", None)]
    assert store.history("t1") == list(built.transitions)
    assert not (tmp_path / "a").exists() or (tmp_path / "a").read_text() == ""


def test_a_lock_released_within_the_timeout_is_waited_for(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    with SqliteTaskStore(path, busy_timeout=30) as store:
        built: BuiltTask = build_task("t1", TaskStatus.RUNNING)
        store.create(*built)
        blocker = hold_write_lock(str(path))
        outcome: list[object] = []

        def writer() -> None:
            try:
                store.touch("t1", pid=99)
                outcome.append("done")
            except Exception as exc:
                outcome.append(exc)

        thread = threading.Thread(target=writer)
        try:
            thread.start()
            thread.join(timeout=0.2)  # give the writer time to queue behind the lock
            assert outcome == [], "the writer must still be waiting for the lock"
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        thread.join(timeout=30)
        assert outcome == ["done"]
        snapshot = store.get("t1")
        assert snapshot is not None
        assert snapshot.pid == 99


def test_many_threads_write_through_one_store(tmp_path: Path) -> None:
    """More threads than pooled connections, each with its own tasks, all succeed."""
    with SqliteTaskStore(tmp_path / "tasks.db") as store:
        errors: list[BaseException] = []
        start = threading.Barrier(24)

        def work(n: int) -> None:
            try:
                start.wait(timeout=10)
                for i in range(10):
                    store.create(*build_task(f"w{n}-{i}", TaskStatus.QUEUED))
                    store.touch(f"w{n}-{i}", pid=n)
                    assert store.get(f"w{n}-{i}") is not None
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(24)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not any(t.is_alive() for t in threads)
        assert errors == []
        assert len(store.query()) == 240


def test_a_poll_that_finds_no_command_does_not_wait_for_the_write_lock(tmp_path: Path) -> None:
    # an idle controller polls for commands at every poll interval: with nothing open, the
    # poll is a read, which WAL mode never makes wait (a busy timeout of 60 s would show)
    with SqliteTaskStore(tmp_path / "tasks.db", busy_timeout=60.0) as store:
        store.create(*build_task("t1"))
        blocker = hold_write_lock(store.path)
        try:
            assert store.claim_commands("me", now=BASE_TIME, lease_seconds=5) == []
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
