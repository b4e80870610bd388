"""StoreWriter and a store locked by another process: the extra delay of a write is about
one lock timeout, not several piled up, and `failures` says what is happening (D66); and
nothing the store raises ends the writer's thread (D65)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from chongming_core import (
    ConcurrencyConflict,
    FakeClock,
    InMemoryTaskStore,
    SnapshotWrite,
    StateMachine,
    StoreError,
    TaskSnapshot,
    TouchUpdate,
)
from chongming_runtime.persistence._writer import StoreWriter
from chongming_runtime.testing import wait_until

WAIT = 10.0


class LockedStore(InMemoryTaskStore):
    """A store another process holds the write lock of while `held` is set: each write
    waits up to `busy_timeout` for it to be released (as SQLite's busy handler does),
    then fails with a `StoreError` that says so. Counts the writes that waited."""

    writes_in_memory = False  # it stands for a store whose writes take time

    def __init__(self, busy_timeout: float) -> None:
        super().__init__()
        self.busy_timeout = busy_timeout
        self.held = threading.Event()
        self.released = threading.Event()
        self.waits: list[str] = []  # one entry per write that met the lock
        self.waiting = threading.Event()  # a write is waiting for the lock right now
        self._count = threading.Lock()

    def hold(self) -> None:
        self.released.clear()
        self.held.set()

    def release(self) -> None:
        self.held.clear()
        self.released.set()

    def _wait_for_lock(self, what: str) -> None:
        if not self.held.is_set():
            return
        with self._count:
            self.waits.append(what)
        self.waiting.set()
        try:
            if not self.released.wait(self.busy_timeout):
                raise StoreError(
                    f"failed while {what}: the database is locked (simulated)", locked=True
                )
        finally:
            self.waiting.clear()

    def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
        self._wait_for_lock(f"saving {len(writes)} tasks")
        return super().save_many(writes)

    def touch_many(self, updates: Sequence[TouchUpdate]) -> int:
        self._wait_for_lock(f"touching {len(updates)} tasks")
        return super().touch_many(updates)


def _snapshot(task_id: str) -> TaskSnapshot:
    return StateMachine.create(task_id, "x", clock=FakeClock()).snapshot


def test_a_locked_store_is_tried_once_per_flush_not_write_by_write(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = LockedStore(busy_timeout=0.05)
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)  # explicit flushes only
    for i in range(5):
        writer.record(_snapshot(f"t{i}"))
    writer.touch(TouchUpdate("t0", pid=42))
    store.hold()
    assert writer.flush() is False
    # one batch that waited the lock timeout: no single-write probes (three more waits)
    # and no touch (a fifth), each of which would have waited as long for the same lock
    assert store.waits == ["saving 5 tasks"]
    failure = writer.failures[-1]
    assert failure.task_ids == ("t0", "t1", "t2", "t3", "t4")
    assert "database is locked" in failure.error
    assert "the store is locked by another connection or process" in failure.error
    assert "kept and retried every 0.5 s" in failure.error
    store.release()
    assert writer.flush() is True
    assert {s.task_id for s in store.query()} == {f"t{i}" for i in range(5)}
    stored = store.get("t0")
    assert stored is not None
    assert stored.pid == 42  # the touch kept for the lock went in after it
    writer.close()


def test_a_durable_write_recorded_while_a_flush_waits_for_the_lock_waits_for_it_only(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = LockedStore(busy_timeout=0.4)
    writer = make_writer(store, clock=FakeClock(), retry_interval=60)
    writer.record(_snapshot("first"))  # the background thread flushes it: waits for the lock
    store.hold()
    assert store.waiting.wait(WAIT)
    told = threading.Event()
    waits_when_told: list[int] = []

    def tell() -> None:
        waits_when_told.append(len(store.waits))
        told.set()

    writer.record(_snapshot("last"), on_durable=tell)
    blocking = threading.Thread(
        target=writer.record, args=(_snapshot("durable"),), kwargs={"durable": True}
    )
    blocking.start()
    flushed: list[bool] = []
    flusher = threading.Thread(target=lambda: flushed.append(writer.flush()))
    flusher.start()
    assert told.wait(WAIT)
    blocking.join(WAIT)
    flusher.join(WAIT)
    assert not blocking.is_alive()
    assert not flusher.is_alive()
    # each was told, or returned, when the flush under way gave up on the lock: an attempt
    # of its own would have waited a whole lock timeout more for the same lock
    assert waits_when_told == [1]
    assert flushed == [False]
    assert store.waits == ["saving 1 tasks"]
    assert writer.pending_count == 3  # nothing lost: written once the lock is released
    store.release()
    assert writer.flush() is True
    assert {s.task_id for s in store.query()} == {"first", "last", "durable"}
    writer.close()


def test_a_durable_write_after_a_locked_flush_is_tried_at_once_not_after_the_pause(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = LockedStore(busy_timeout=0.05)
    writer = make_writer(store, clock=FakeClock(), retry_interval=60)
    store.hold()
    writer.record(_snapshot("first"))
    wait_until(lambda: len(store.waits) == 1 and not store.waiting.is_set(), "the first attempt")
    time.sleep(0.05)  # the background thread now pauses (60 s) before it tries again
    told = threading.Event()
    store.release()
    writer.record(_snapshot("last"), on_durable=told.set)
    # a durable write cuts the pause short: it is tried now (and goes in, the lock is gone)
    assert told.wait(WAIT)
    assert {s.task_id for s in store.query()} == {"first", "last"}
    writer.close()


def test_no_exception_the_store_raises_ends_the_writers_thread(
    make_writer: Callable[..., StoreWriter],
) -> None:
    class Exits(InMemoryTaskStore):
        writes_in_memory = False

        def __init__(self) -> None:
            super().__init__()
            self.exits = 2

        def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
            if self.exits:
                self.exits -= 1
                raise SystemExit("a store's bug")
            return super().save_many(writes)

    store = Exits()
    writer = make_writer(store, clock=FakeClock(), retry_interval=0.01)
    writer.record(_snapshot("first"))
    wait_until(lambda: store.exits == 0, "both SystemExits")
    told = threading.Event()
    writer.record(_snapshot("last"), on_durable=told.set)
    assert told.wait(WAIT)
    wait_until(lambda: store.get("first") is not None, "the first write")
    assert store.get("last") is not None
    assert writer._thread is not None
    assert writer._thread.is_alive()
    entries = [f for f in writer.failures if f.operation == "the store writer"]
    assert entries
    assert entries[0].error == "SystemExit: a store's bug"
    writer.close()
