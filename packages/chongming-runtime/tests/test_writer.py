"""StoreWriter: batched write-through, durable terminal writes, outages and conflicts."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from datetime import timedelta
from functools import partial
from typing import Any

import pytest

from chongming_core import (
    UNSET,
    ConcurrencyConflict,
    FakeClock,
    InMemoryTaskStore,
    Progress,
    SnapshotWrite,
    StateMachine,
    StoreError,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    TouchUpdate,
)
from chongming_runtime.persistence._writer import (
    MAX_BATCH,
    MAX_FAILURES,
    TOUCH_BATCH,
    StoreWriter,
)
from store_helpers import FlakyStore


def _trajectory(writer: StoreWriter, machine: StateMachine) -> None:
    seen = 0

    def emit(durable: bool = False) -> None:
        nonlocal seen
        new = machine.transitions[seen:]
        seen = len(machine.transitions)
        writer.record(machine.snapshot, new, durable=durable)

    emit()
    machine.mark_queued()
    emit()
    machine.mark_starting(executor="thread")
    machine.mark_running()
    emit()
    machine.mark_succeeded(outcome={"rows": 3})
    emit(durable=True)


def test_terminal_write_is_durable_with_the_whole_history(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = FlakyStore()
    writer = make_writer(store, clock=FakeClock())
    machine = StateMachine.create("t1", "extract", clock=FakeClock())
    _trajectory(writer, machine)
    stored = store.get("t1")
    assert stored is not None
    assert stored.status is TaskStatus.SUCCEEDED
    assert stored.outcome == {"rows": 3}
    assert store.history("t1") == list(machine.transitions)
    assert writer.failures == []
    writer.close()


def test_outage_is_recorded_and_the_store_catches_up_after_it(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = FlakyStore()
    writer = make_writer(store, clock=FakeClock(), flush_interval=0)
    store.down = True
    machine = StateMachine.create("t1", "extract", clock=FakeClock())
    _trajectory(writer, machine)  # the durable flush fails but does not raise
    assert store.get("t1") is None
    assert writer.healthy is False
    assert writer.failures
    assert "simulated outage" in writer.failures[-1].error
    assert writer.failures[-1].task_ids == ("t1",)
    store.down = False
    assert writer.flush() is True
    stored = store.get("t1")
    assert stored is not None
    assert stored.status is TaskStatus.SUCCEEDED
    versions = [t.status_version for t in store.history("t1")]
    assert versions == [1, 2, 3, 4]
    writer.close()


def test_failures_are_capped(make_writer: Callable[..., StoreWriter]) -> None:
    store = FlakyStore()
    writer = make_writer(store, clock=FakeClock(), flush_interval=0)
    store.down = True
    for i in range(MAX_FAILURES + 5):
        machine = StateMachine.create(f"t{i}", "x", clock=FakeClock())
        writer.record(machine.snapshot, durable=True)
    assert len(writer.failures) == MAX_FAILURES
    store.down = False
    assert writer.flush()
    assert len(store.query()) == MAX_FAILURES + 5
    writer.close()


def _running_then_marked_lost(
    store: InMemoryTaskStore, writer: StoreWriter, clock: FakeClock
) -> StateMachine:
    """Task t1 written running by `writer`, then marked lost by another process (as reconcile
    would); returns the writer's machine, still running."""
    machine = StateMachine.create("t1", "extract", clock=clock)
    machine.mark_queued()
    machine.mark_starting()
    machine.mark_running()
    writer.record(machine.snapshot, machine.transitions, durable=True)
    other = StateMachine(store.get("t1"), clock=clock)  # type: ignore[arg-type]
    other.mark_lost(actor="reconcile", reason="lease expired")
    store.save(other.snapshot, expect_version=3, transitions=other.transitions)
    return machine


def test_a_conflict_leaves_the_other_writers_truth_alone(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = FlakyStore()
    clock = FakeClock()
    writer = make_writer(store, clock=clock, flush_interval=0)
    machine = _running_then_marked_lost(store, writer, clock)
    machine.mark_succeeded(outcome=1)
    writer.record(machine.snapshot, machine.transitions[-1:], durable=True)
    stored = store.get("t1")
    assert stored is not None
    assert stored.status is TaskStatus.LOST
    assert writer.diverged("t1")
    assert "ConcurrencyConflict" in writer.failures[-1].error
    writer.record(machine.snapshot, durable=True)  # ignored from now on
    assert store.get("t1") == stored
    writer.forget("t1")  # pruned: the writer keeps nothing of it, not even the divergence
    assert writer.flush()
    assert not writer.diverged("t1")
    writer.close()


def test_a_renewal_after_another_writer_moved_the_task_on_changes_nothing(
    make_writer: Callable[..., StoreWriter],
) -> None:
    """A holder frozen past its lease (SIGSTOP) and marked lost meanwhile: when it wakes,
    its lease renewal must not give the lost row a live lease, and it stops writing it."""
    store = FlakyStore()
    clock = FakeClock()
    writer = make_writer(store, clock=clock, flush_interval=0)
    _running_then_marked_lost(store, writer, clock)
    lost = store.get("t1")
    assert lost is not None
    assert lost.lease_until is None
    until = clock.now() + timedelta(seconds=30)
    writer.touch(TouchUpdate("t1", lease_owner="zombie", lease_until=until, pid=4242))
    assert writer.flush()
    assert store.get("t1") == lost  # no live lease on a lost task, no pid of the zombie
    assert writer.diverged("t1")
    assert "is at version 4, not 3" in writer.failures[-1].error
    writer.touch(TouchUpdate("t1", lease_owner="zombie", lease_until=until))
    assert writer.pending_count == 0  # diverged: nothing of it is queued any more
    writer.close()


def test_a_task_another_process_moved_on_is_reported_once(
    make_writer: Callable[..., StoreWriter],
) -> None:
    """The holder hears of it (and stops the body: D177), once, whichever write found it."""
    store = FlakyStore()
    clock = FakeClock()
    moved_on: list[str] = []
    writer = make_writer(store, clock=clock, flush_interval=0, moved_on=moved_on.append)
    machine = _running_then_marked_lost(store, writer, clock)
    assert moved_on == []
    writer.touch(TouchUpdate("t1", progress=Progress(1, total=2)))
    assert writer.flush()
    assert moved_on == ["t1"]
    machine.mark_stopping()
    writer.record(machine.snapshot, machine.transitions[-1:])
    assert writer.flush()
    assert moved_on == ["t1"]
    writer.close()


def test_renewals_of_tasks_still_held_are_not_fenced_off(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = FlakyStore()
    clock = FakeClock()
    writer = make_writer(store, clock=clock, flush_interval=0)
    machines = [StateMachine.create(f"t{i}", "extract", clock=clock) for i in range(3)]
    for machine in machines:
        machine.mark_queued()
        writer.record(machine.snapshot, machine.transitions, durable=True)
    until = clock.now() + timedelta(seconds=30)
    for machine in machines:
        writer.touch(TouchUpdate(machine.task_id, lease_owner="me", lease_until=until))
    assert writer.flush()
    for machine in machines:
        assert store.get(machine.task_id) == machine.snapshot.evolve(
            lease_owner="me", lease_until=until
        )
        assert not writer.diverged(machine.task_id)
    writer.close()


def test_touches_merge_and_never_bump_the_version(make_writer: Callable[..., StoreWriter]) -> None:
    store = FlakyStore()
    writer = make_writer(store, clock=FakeClock(), flush_interval=0)
    machine = StateMachine.create("t1", "extract", clock=FakeClock())
    writer.record(machine.snapshot, durable=True)
    writer.touch(TouchUpdate("t1", progress=Progress(1, total=10)))
    writer.touch(TouchUpdate("t1", lease_owner="node-a"))
    writer.touch(TouchUpdate("t1", progress=Progress(2, total=10), pid=UNSET))
    assert writer.pending_count == 1
    assert writer.flush()
    stored = store.get("t1")
    assert stored is not None
    assert stored.progress == Progress(2, total=10)
    assert stored.lease_owner == "node-a"
    assert stored.status_version == 0
    writer.close()


class CountingTouchStore(FlakyStore):
    """Counts the updates of each `touch_many`; fails the call number `fail_at` (1-based)."""

    def __init__(self) -> None:
        super().__init__()
        self.touch_calls: list[int] = []
        self.fail_at: int | None = None

    def touch_many(self, updates: Sequence[TouchUpdate]) -> int:
        self.touch_calls.append(len(updates))
        if self.fail_at == len(self.touch_calls):
            raise StoreError("store unavailable (simulated outage)")
        return super().touch_many(updates)


def _queued(writer: StoreWriter, count: int) -> list[StateMachine]:
    machines = []
    for n in range(count):
        machine = StateMachine.create(f"t{n}", "x", clock=FakeClock())
        machine.mark_queued()
        writer.record(machine.snapshot, machine.transitions)
        machines.append(machine)
    assert writer.flush()
    return machines


def test_lease_renewals_of_waiting_tasks_are_written_a_slice_at_a_time(
    make_writer: Callable[..., StoreWriter],
) -> None:
    """A controller holding thousands of queued tasks renews all their leases every third of
    a lease: written `TOUCH_BATCH` at a time, each fenced at the version stored (D175)."""
    store = CountingTouchStore()
    clock = FakeClock()
    writer = make_writer(store, clock=clock, flush_interval=60)
    count = 2 * TOUCH_BATCH + 7
    _queued(writer, count)
    first = clock.now() + timedelta(seconds=30)
    writer.renew_leases([f"t{n}" for n in range(count)], "node-a", first)
    later = first + timedelta(seconds=10)  # renewed again before a flush: the latest lease
    writer.renew_leases([f"t{n}" for n in range(count)], "node-a", later)
    assert writer.pending_count == count
    assert writer.flush()
    assert store.touch_calls == [TOUCH_BATCH, TOUCH_BATCH, 7]
    for n in (0, TOUCH_BATCH, count - 1):
        stored = store.get(f"t{n}")
        assert stored is not None
        assert (stored.lease_owner, stored.lease_until) == ("node-a", later)
        assert (stored.status, stored.status_version) == (TaskStatus.QUEUED, 1)
    assert writer.pending_count == 0
    writer.close()


def test_a_lease_renewal_and_other_touches_of_a_task_merge_either_way(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = CountingTouchStore()
    clock = FakeClock()
    writer = make_writer(store, clock=clock, flush_interval=60)
    _queued(writer, 2)
    until = clock.now() + timedelta(seconds=30)
    writer.touch(TouchUpdate("t0", progress=Progress(1, total=4)))
    writer.renew_leases(["t0", "t1"], "node-a", until)
    writer.touch(TouchUpdate("t1", progress=Progress(3, total=4)))
    assert writer.flush()
    for task_id, done in (("t0", 1), ("t1", 3)):
        stored = store.get(task_id)
        assert stored is not None
        assert (stored.progress, stored.lease_until) == (Progress(done, total=4), until)
    writer.close()


def test_a_renewal_the_store_failed_to_take_is_written_at_the_next_flush_not_lost(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = CountingTouchStore()
    clock = FakeClock()
    writer = make_writer(store, clock=clock, flush_interval=60)
    count = TOUCH_BATCH + 3
    _queued(writer, count)
    until = clock.now() + timedelta(seconds=30)
    store.fail_at = 2  # the first slice goes in, the second fails
    writer.renew_leases([f"t{n}" for n in range(count)], "node-a", until)
    assert not writer.flush()
    assert writer.failures[-1].operation == "touch_many"
    assert writer.failures[-1].task_ids == tuple(f"t{n}" for n in range(TOUCH_BATCH, count))
    assert writer.pending_count == 3  # the slice that went in is not written again
    assert writer.flush()
    assert store.touch_calls == [TOUCH_BATCH, 3, 3]
    assert all(store.get(f"t{n}").lease_until == until for n in range(count))  # type: ignore[union-attr]
    writer.close()


def test_a_finished_or_diverged_task_has_no_lease_renewed(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = CountingTouchStore()
    clock = FakeClock()
    writer = make_writer(store, clock=clock, flush_interval=60)
    done, taken, _ = _queued(writer, 3)
    seen = len(done.transitions)
    done.mark_starting()
    done.mark_running()
    done.mark_succeeded()
    writer.record(done.snapshot, done.transitions[seen:], durable=True)
    other = taken.snapshot.evolve(status_version=5)  # another process moved it on
    assert store.save_many([SnapshotWrite(other, 1, ())]) == []
    stale = taken.snapshot.evolve(progress=Progress(1, total=2), status_version=2)
    writer.record(stale)
    assert writer.flush()  # its conflict: the task is another writer's now
    assert writer.diverged("t1")
    until = clock.now() + timedelta(seconds=30)
    writer.renew_leases(["t0", "t1", "t2"], "node-a", until)
    assert writer.pending_count == 1
    assert writer.flush()
    assert store.touch_calls[-1] == 1
    assert store.get("t2").lease_until == until  # type: ignore[union-attr]
    assert store.get("t0").lease_until is None  # type: ignore[union-attr]
    writer.close()


class FirstCommitHeldStore(InMemoryTaskStore):
    """A store that lists the tasks of each batch and holds its first commit until
    `release()` holds (for at most 10 s: a writer that never lets it hold fails the test's
    assertions, it does not hang it)."""

    def __init__(self) -> None:
        super().__init__()
        self.release: Callable[[], bool] = lambda: True
        self.batches: list[list[str]] = []
        self._batches_lock = threading.Lock()

    def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
        with self._batches_lock:
            first = not self.batches
            self.batches.append([w.snapshot.task_id for w in writes])
        if first:
            deadline = time.monotonic() + 10
            while not self.release() and time.monotonic() < deadline:
                threading.Event().wait(0.001)
        return super().save_many(writes)


def test_concurrent_durable_writes_share_transactions(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = FirstCommitHeldStore()
    writer = make_writer(store, clock=FakeClock(), flush_interval=0)
    clock = FakeClock()
    machines = [StateMachine.create(f"t{i}", "x", clock=clock) for i in range(64)]
    # the first commit waits until all 64 writes are recorded: every one not in it waits
    # behind it, and group commit must take them all in the one commit after it
    store.release = lambda: writer.pending_count == len(machines)
    barrier = threading.Barrier(len(machines))

    def finish(machine: StateMachine) -> None:
        machine.mark_queued()
        machine.mark_stopped(reason="test")
        barrier.wait(timeout=10)
        writer.record(machine.snapshot, machine.transitions, durable=True)

    threads = [threading.Thread(target=finish, args=(m,)) for m in machines]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    assert all(not t.is_alive() for t in threads)
    assert store.status_counts() == {TaskStatus.STOPPED: 64}
    # the first commit, then every write recorded while it was held (one commit only when
    # all 64 were recorded before the first flush took the inbox); one per task is 64
    assert len(store.batches) <= 2, [len(batch) for batch in store.batches]
    assert sorted(t for batch in store.batches for t in batch) == sorted(
        m.task_id for m in machines
    )
    for machine in machines:
        assert [t.status_version for t in store.history(machine.task_id)] == [1, 2]


def test_background_flush_writes_non_terminal_transitions(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = FlakyStore()
    writer = make_writer(store, clock=FakeClock(), flush_interval=0)
    machine = StateMachine.create("t1", "extract", clock=FakeClock())
    machine.mark_queued()
    written = threading.Event()
    original = store.save_many

    def spy(writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
        result = original(writes)
        written.set()
        return result

    store.save_many = spy  # type: ignore[method-assign]
    writer.record(machine.snapshot, machine.transitions)
    assert written.wait(timeout=10)
    stored = store.get("t1")
    assert stored is not None
    assert stored.status is TaskStatus.QUEUED
    writer.close()


class GatedStore(InMemoryTaskStore):
    """A store whose `save_many` waits for a gate, counting the batches it took."""

    writes_in_memory = False  # it stands for a store whose commits take time

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.batches: list[list[str]] = []

    def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
        self.entered.set()
        assert self.gate.wait(10)
        self.batches.append([w.snapshot.task_id for w in writes])
        return super().save_many(writes)


def test_on_durable_is_called_only_after_the_store_holds_the_write(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = GatedStore()
    writer = make_writer(store, clock=FakeClock())
    machine = StateMachine.create("t1", "extract", clock=FakeClock())
    machine.mark_queued()
    durable = threading.Event()
    writer.record(machine.snapshot, machine.transitions, on_durable=durable.set)  # returns at once
    assert store.entered.wait(10)  # the writer started at once (no batching delay) ...
    assert not durable.is_set()  # ... and the caller is not told before the commit
    assert store.get("t1") is None
    store.gate.set()
    assert durable.wait(10)
    stored = store.get("t1")
    assert stored is not None
    assert stored.status is TaskStatus.QUEUED
    writer.close()


def test_writes_recorded_during_a_commit_share_the_next_one(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = GatedStore()
    writer = make_writer(store, clock=FakeClock())
    machines = [StateMachine.create(f"t{i}", "extract", clock=FakeClock()) for i in range(4)]
    told: list[str] = []
    lock = threading.Lock()

    def teller(task_id: str) -> Callable[[], None]:
        def tell() -> None:
            with lock:
                told.append(task_id)

        return tell

    first = machines[0]
    writer.record(first.snapshot, on_durable=teller("t0"))
    assert store.entered.wait(10)  # t0's commit is under way and held
    for machine in machines[1:]:
        machine.mark_queued()
        writer.record(machine.snapshot, machine.transitions, on_durable=teller(machine.task_id))
    store.gate.set()
    writer.flush()  # whichever flush takes them (this one or the writer's), it is one commit
    deadline = threading.Event()
    for _ in range(1000):
        with lock:
            if len(told) == 4:
                break
        deadline.wait(0.01)
    assert sorted(told) == ["t0", "t1", "t2", "t3"]
    assert store.batches == [["t0"], ["t1", "t2", "t3"]]
    writer.close()


class PickyStore(InMemoryTaskStore):
    """Refuses any batch that holds a write of a task in `refused` (like a NUL on PostgreSQL)."""

    def __init__(self, refused: set[str]) -> None:
        super().__init__()
        self.refused = refused
        self.calls = 0
        self.down = False

    def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
        self.calls += 1
        if self.down:
            raise StoreError("connection refused (simulated)")
        bad = [w.snapshot.task_id for w in writes if w.snapshot.task_id in self.refused]
        if bad:
            raise StoreError(f"cannot store task {bad[0]!r} (simulated bad value)")
        return super().save_many(writes)


def test_one_refused_task_does_not_hold_back_the_others(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = PickyStore({"bad"})
    # a long batching delay keeps the background thread out: only the explicit flushes
    # below write, so the store calls they make can be counted
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)
    clock = FakeClock()
    for task_id in ("a", "bad", "b", "c"):
        writer.record(StateMachine.create(task_id, "x", clock=clock).snapshot)
    assert writer.flush() is False
    assert {s.task_id for s in store.query()} == {"a", "b", "c"}
    assert writer.failures[-1].task_ids == ("bad",)
    assert "simulated bad value" in writer.failures[-1].error
    # from now on the refused task is written on its own: the others go in one batch
    for task_id in ("d", "e"):
        writer.record(StateMachine.create(task_id, "x", clock=clock).snapshot)
    store.calls = 0
    assert writer.flush() is False
    assert store.calls == 2  # one batch for d and e, one single write for the quarantined task
    assert {"d", "e"} <= {s.task_id for s in store.query()}
    store.refused.clear()  # the value becomes storable (or the store is fixed)
    assert writer.flush() is True
    assert store.get("bad") is not None
    writer.close()


def test_an_outage_is_not_hammered_one_write_at_a_time(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = PickyStore(set())
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)  # explicit flushes only
    clock = FakeClock()
    for i in range(50):
        writer.record(StateMachine.create(f"t{i}", "x", clock=clock).snapshot)
    store.down = True
    assert writer.flush() is False
    assert store.calls <= 4  # the batch, then three single writes, then it gives up
    failure = writer.failures[-1]
    assert len(failure.task_ids) == 20  # a few are named, and the entry says how many failed
    assert failure.error.endswith("(50 tasks; the first 20 are named)")
    store.down = False
    assert writer.flush() is True
    assert len(store.query()) == 50
    writer.close()


def test_a_large_flush_is_split_into_bounded_transactions(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = PickyStore(set())
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)  # explicit flushes only
    clock = FakeClock()
    sizes: list[int] = []
    original = store.save_many

    def sized(writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
        sizes.append(len(writes))
        return original(writes)

    store.save_many = sized  # type: ignore[method-assign]
    count = MAX_BATCH * 2 + 7
    machines = [StateMachine.create(f"t{i}", "x", clock=clock) for i in range(count)]
    for machine in machines:
        machine.mark_queued()
        writer.record(machine.snapshot, machine.transitions)
    assert writer.flush() is True
    assert sizes == [MAX_BATCH, MAX_BATCH, 7]
    assert store.status_counts() == {TaskStatus.QUEUED: count}
    for machine in (machines[0], machines[MAX_BATCH], machines[-1]):
        assert store.history(machine.task_id) == list(machine.transitions)
    writer.close()


def test_an_outage_in_the_first_transaction_keeps_the_rest_for_later(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = PickyStore(set())
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)  # explicit flushes only
    clock = FakeClock()
    count = MAX_BATCH * 3
    for i in range(count):
        writer.record(StateMachine.create(f"t{i}", "x", clock=clock).snapshot)
    store.down = True
    assert writer.flush() is False
    assert store.calls <= 4  # the first transaction, three single writes, then it gives up
    assert writer.pending_count == count  # nothing lost: every write is still pending
    assert "connection refused" in writer.failures[-1].error
    store.down = False
    store.calls = 0
    assert writer.flush() is True
    assert store.calls == 3
    assert len(store.query()) == count
    assert writer.pending_count == 0
    writer.close()


def test_unstorable_writes_at_the_head_never_keep_the_rest_out_of_a_working_store(
    make_writer: Callable[..., StoreWriter],
) -> None:
    bad = {f"bad-{i}" for i in range(6)}
    store = PickyStore(bad)
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)  # explicit flushes only
    clock = FakeClock()
    for task_id in [*sorted(bad), "good-0", "good-1", "good-2"]:
        writer.record(StateMachine.create(task_id, "x", clock=clock).snapshot)
    # the first single writes fail (they are the unstorable ones): that looks like an outage,
    # so the first flush writes nothing; later flushes probe from further on and get through
    flushes = 0
    while store.get("good-2") is None and flushes < 10:
        writer.flush()
        flushes += 1
    assert {s.task_id for s in store.query()} == {"good-0", "good-1", "good-2"}
    assert flushes <= 3  # probes start at 0, 3, then 6: the first good one
    assert writer.pending_count == len(bad)  # kept for when the values become storable
    store.refused.clear()
    assert writer.flush() is True
    assert len(store.query()) == 9
    writer.close()


def test_a_store_that_raises_something_else_than_store_error_loses_nothing(
    make_writer: Callable[..., StoreWriter],
) -> None:
    class Buggy(InMemoryTaskStore):
        broken = True

        def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
            if self.broken:
                raise RuntimeError("a bug in the store's driver")
            return super().save_many(writes)

    store = Buggy()
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)  # explicit flushes only
    machine = StateMachine.create("t1", "x", clock=FakeClock())
    writer.record(machine.snapshot, durable=True)  # does not raise: the task is unaffected
    assert writer.failures[-1].error == "RuntimeError: a bug in the store's driver"
    assert writer.pending_count == 1
    store.broken = False
    assert writer.flush() is True
    assert store.get("t1") is not None
    writer.close()


def test_a_conflict_a_store_raises_instead_of_returning_is_a_conflict_not_a_failure(
    make_writer: Callable[..., StoreWriter],
) -> None:
    class RaisesConflicts(InMemoryTaskStore):
        calls = 0

        def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
            self.calls += 1
            if any(w.snapshot.task_id == "taken" for w in writes):
                raise ConcurrencyConflict("another writer has it", task_id="taken")
            return super().save_many(writes)

    store = RaisesConflicts()
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)  # explicit flushes only
    clock = FakeClock()
    for task_id in ("taken", "free"):
        writer.record(StateMachine.create(task_id, "x", clock=clock).snapshot)
    assert writer.flush() is True
    assert writer.diverged("taken")  # the store's version wins, as for a returned conflict
    assert store.get("free") is not None
    assert writer.pending_count == 0  # nothing left to retry forever
    calls = store.calls
    assert writer.flush() is True
    assert store.calls == calls
    writer.close()


def test_a_durable_write_racing_close_is_still_flushed(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = InMemoryTaskStore()
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)
    told = threading.Event()
    original_flush = writer.flush

    def flush_then_a_late_record() -> bool:  # another thread records right after the last flush
        ok = original_flush()
        late = threading.Thread(
            target=lambda: writer.record(
                StateMachine.create("late", "x", clock=FakeClock()).snapshot,
                on_durable=told.set,
            )
        )
        late.start()
        late.join(10)
        return ok

    def slow_to_notice_close() -> bool:  # the background thread looks only once close() ran
        deadline = time.monotonic() + 5
        while not writer._closed and time.monotonic() < deadline:
            time.sleep(0.001)
        return writer._closed

    writer.flush = flush_then_a_late_record  # type: ignore[method-assign]
    writer._is_closed = slow_to_notice_close  # type: ignore[method-assign]
    writer.record(StateMachine.create("early", "x", clock=FakeClock()).snapshot)
    writer.close()
    assert told.wait(10)  # its wait() would otherwise never return
    assert store.get("late") is not None


# ---------------------------------------------------------------- stores written in memory
def test_an_in_memory_store_takes_a_durable_write_on_the_recording_thread(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = InMemoryTaskStore()
    assert store.writes_in_memory
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)
    machine = StateMachine.create("t1", "extract", clock=FakeClock())
    writer.record(machine.snapshot)  # not durable: pending
    machine.mark_queued()
    called_on: list[threading.Thread] = []
    writer.record(
        machine.snapshot,
        machine.transitions[-1:],
        on_durable=lambda: called_on.append(threading.current_thread()),
    )
    # told before record() returned, on this thread, with both writes in the store
    assert called_on == [threading.current_thread()]
    stored = store.get("t1")
    assert stored is not None
    assert stored.status is TaskStatus.QUEUED
    assert [t.to_status for t in store.history("t1")] == [TaskStatus.QUEUED]
    assert writer.pending_count == 0
    writer.close()


class _GatedMemory(InMemoryTaskStore):
    """In memory, but its first write is held at a gate."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = threading.Event()
        self.entered = threading.Event()

    def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
        if not self.entered.is_set():
            self.entered.set()
            assert self.gate.wait(10)
        return super().save_many(writes)


def test_a_durable_write_during_a_flush_is_left_to_that_flush_without_waiting(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = _GatedMemory()
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)
    first = StateMachine.create("t1", "extract", clock=FakeClock())
    second = StateMachine.create("t2", "extract", clock=FakeClock())
    told: list[str] = []
    holder = threading.Thread(
        target=writer.record,
        args=(first.snapshot,),
        kwargs={"on_durable": lambda: told.append("t1")},
    )
    holder.start()
    assert store.entered.wait(10)  # t1's flush holds the flush lock, its write at the gate
    writer.record(second.snapshot, on_durable=lambda: told.append("t2"))  # returns at once
    assert told == []
    store.gate.set()
    holder.join(10)
    for _ in range(1000):  # the holder (or the background thread) flushes t2 next
        if len(told) == 2:
            break
        time.sleep(0.01)
    assert sorted(told) == ["t1", "t2"]
    assert store.get("t2") is not None
    writer.close()


@pytest.mark.parametrize("holder_flush", ["inline", "blocking"])
def test_a_durable_write_left_to_a_flush_under_way_is_written_by_its_holder(
    make_writer: Callable[..., StoreWriter], holder_flush: str
) -> None:
    # the recording thread neither waits nor wakes the background thread: the holder of
    # the flush lock looks again once it released it
    store = _GatedMemory()
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)
    first = StateMachine.create("t1", "extract", clock=FakeClock())
    second = StateMachine.create("t2", "extract", clock=FakeClock())
    told: dict[str, threading.Thread] = {}
    writer.record(first.snapshot)  # pending, not durable (no background thread is woken)
    holding = (
        writer.flush
        if holder_flush == "blocking"
        else partial(writer.record, first.snapshot.evolve(label="x"), on_durable=lambda: None)
    )
    holder = threading.Thread(target=holding)
    holder.start()
    assert store.entered.wait(10)  # the holder's flush holds the lock, its write at the gate
    writer.record(second.snapshot, on_durable=lambda: told.update(t2=threading.current_thread()))
    assert told == {}  # returned at once, untold
    store.gate.set()
    holder.join(10)
    for _ in range(1000):
        if "t2" in told:
            break
        time.sleep(0.01)
    assert store.get("t2") is not None
    if holder_flush == "inline":  # the holder took it after its own write
        assert told["t2"] is holder
    else:  # a blocking flush handed it to the background thread as it released the lock
        assert told["t2"].name == "chongming-store-writer"
    writer.close()


def test_a_failing_in_memory_store_leaves_the_write_pending_for_the_background_retry(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = FlakyStore()
    store.down = True
    writer = make_writer(store, clock=FakeClock(), retry_interval=0.01)
    machine = StateMachine.create("t1", "extract", clock=FakeClock())
    told = threading.Event()
    writer.record(machine.snapshot, on_durable=told.set)
    assert told.is_set()  # attempted: a failing store never holds a task back
    assert not writer.healthy
    assert writer.pending_count == 1
    assert "simulated outage" in writer.failures[-1].error
    store.down = False
    for _ in range(1000):
        if store.get("t1") is not None:
            break
        time.sleep(0.01)
    assert store.get("t1") is not None  # retried by the background thread, nothing lost
    writer.close()


# ---------------------------------------------------------------- recording never waits
def test_recording_never_waits_for_a_lock_a_flush_or_another_recorder_holds(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = GatedStore()
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)
    first = StateMachine.create("t1", "extract", clock=FakeClock())
    flusher = threading.Thread(
        target=writer.record, args=(first.snapshot,), kwargs={"durable": True}
    )
    flusher.start()
    assert store.entered.wait(10)  # a flush is writing (flush lock held, store at its gate)
    returned = threading.Event()
    with writer._lock:  # as if a thread holding it had lost the GIL inside
        second = StateMachine.create("t2", "extract", clock=FakeClock())

        def record() -> None:
            writer.record(second.snapshot)
            returned.set()

        recorder = threading.Thread(target=record)
        recorder.start()
        assert returned.wait(10)  # recorded without waiting for either lock
    recorder.join(10)
    # t2 recorded; t1 is being written, not in the store yet: both still pending
    assert writer.pending_count == 2
    store.gate.set()
    flusher.join(10)
    assert writer.flush()
    assert writer.pending_count == 0
    assert store.get("t2") is not None
    writer.close()


def test_forget_drops_the_writes_recorded_before_it(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = InMemoryTaskStore()
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)
    kept = StateMachine.create("kept", "extract", clock=FakeClock())
    dropped = StateMachine.create("dropped", "extract", clock=FakeClock())
    writer.record(kept.snapshot)
    writer.record(dropped.snapshot)
    assert writer.pending_count == 2
    writer.forget("dropped")
    assert writer.pending_count == 1
    assert writer.flush()
    assert store.get("kept") is not None
    assert store.get("dropped") is None
    writer.close()


def test_durable_writes_recorded_during_a_flush_share_the_next_one_even_when_it_fails(
    make_writer: Callable[..., StoreWriter],
) -> None:
    class Down(InMemoryTaskStore):
        writes_in_memory = False

        def __init__(self) -> None:
            super().__init__()
            self.calls = 0
            self.gate = threading.Event()
            self.entered = threading.Event()

        def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
            self.calls += 1
            self.entered.set()
            assert self.gate.wait(10)
            raise StoreError("store unavailable (simulated outage)")

    store = Down()
    writer = make_writer(store, clock=FakeClock(), flush_interval=60, retry_interval=60)
    snaps = [StateMachine.create(f"t{i}", "x", clock=FakeClock()).snapshot for i in range(6)]
    first = threading.Thread(target=writer.record, args=(snaps[0],), kwargs={"durable": True})
    first.start()
    assert store.entered.wait(10)  # the first flush is at the (failing) store
    others = [
        threading.Thread(target=writer.record, args=(s,), kwargs={"durable": True})
        for s in snaps[1:]
    ]
    for thread in others:
        thread.start()
    for _ in range(1000):  # all five recorded, waiting behind the first flush
        if len(writer._inbox) == 5:
            break
        time.sleep(0.001)
    store.gate.set()
    for thread in [first, *others]:
        thread.join(10)
    # the first flush: its one write; the next one takes all five (one batch + 3 probes);
    # the callers whose writes that flush took return without flushing again (each flushing
    # again would make 4 more calls, 21 in all)
    assert store.calls == 5
    assert writer.pending_count == 6  # nothing lost: kept for when the store is back
    writer.close(flush=False)


def test_a_burst_the_store_does_not_keep_up_with_is_written_by_the_recording_thread(
    make_writer: Callable[..., StoreWriter],
) -> None:
    from chongming_runtime.persistence._writer import BACKLOG

    class Counting(InMemoryTaskStore):
        writes_in_memory = False

        def __init__(self) -> None:
            super().__init__()
            self.threads: set[threading.Thread] = set()

        def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
            self.threads.add(threading.current_thread())
            return super().save_many(writes)

    store = Counting()
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)  # background: idle
    for i in range(BACKLOG):
        writer.record(StateMachine.create(f"t{i}", "x", clock=FakeClock()).snapshot)
    assert writer.pending_count == BACKLOG  # up to the mark: left to the background
    writer.record(StateMachine.create("last", "x", clock=FakeClock()).snapshot)
    assert writer.pending_count == 0  # beyond it: this thread wrote the backlog itself
    assert threading.current_thread() in store.threads
    assert store.get("last") is not None
    assert store.get("t0") is not None
    writer.close()


def test_a_failing_in_memory_store_is_retried_by_the_background_thread_not_per_write(
    make_writer: Callable[..., StoreWriter],
) -> None:
    class Down(FlakyStore):
        def __init__(self) -> None:
            super().__init__()
            self.callers: list[threading.Thread] = []

        def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
            self.callers.append(threading.current_thread())
            return super().save_many(writes)

    store = Down()
    store.down = True
    writer = make_writer(store, clock=FakeClock(), retry_interval=0.01)
    told = [threading.Event() for _ in range(5)]
    for i, event in enumerate(told):
        writer.record(
            StateMachine.create(f"t{i}", "x", clock=FakeClock()).snapshot, on_durable=event.set
        )
    assert all(event.wait(10) for event in told)  # every write attempted, none lost
    here = [t for t in store.callers if t is threading.current_thread()]
    assert len(here) == 1  # only the first write was tried on this thread
    assert writer.pending_count == 5
    store.down = False
    assert writer.flush()
    assert all(store.get(f"t{i}") is not None for i in range(5))
    writer.close()


def test_an_interrupted_flush_still_tells_every_waiter(
    make_writer: Callable[..., StoreWriter],
) -> None:
    class Interrupted(InMemoryTaskStore):
        def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
            raise KeyboardInterrupt

    writer = make_writer(Interrupted(), clock=FakeClock(), flush_interval=60)
    told: list[str] = []
    writer.record(StateMachine.create("t0", "x", clock=FakeClock()).snapshot)
    with pytest.raises(KeyboardInterrupt):  # flushed on this thread (written in memory)
        writer.record(
            StateMachine.create("t1", "x", clock=FakeClock()).snapshot,
            on_durable=lambda: told.append("t1"),
        )
    assert told == ["t1"]  # its waiter is not left hanging
    writer.close(flush=False)


def test_a_side_path_update_never_reaches_a_finished_tasks_row(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = InMemoryTaskStore()
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)
    clock = FakeClock()
    until = clock.now()
    machine = StateMachine(
        StateMachine.create("t1", "x", clock=clock).snapshot.evolve(
            lease_owner="me", lease_until=until
        ),
        clock=clock,
    )
    writer.record(machine.snapshot)
    machine.mark_queued()
    machine.mark_starting(executor="thread")
    machine.mark_running()
    writer.record(machine.snapshot, machine.transitions)
    assert writer.flush()
    # a renewal read while the task ran, recorded just before its terminal write is taken
    writer.touch(TouchUpdate("t1", lease_owner="me", lease_until=until, progress=Progress(1)))
    machine.mark_succeeded()
    writer.record(machine.snapshot, machine.transitions[-1:])
    assert writer.flush()
    # and one recorded after the terminal write was made
    writer.touch(TouchUpdate("t1", lease_owner="me", lease_until=until, progress=Progress(2)))
    assert writer.flush()
    stored = store.get("t1")
    assert stored is not None
    assert stored.status is TaskStatus.SUCCEEDED
    assert stored.lease_until is None  # a finished task holds no lease
    assert stored.progress is None
    writer.close()


def test_a_retried_task_takes_side_path_updates_again(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = InMemoryTaskStore()
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)
    clock = FakeClock()
    machine = StateMachine.create("t1", "x", max_attempts=2, clock=clock)
    writer.record(machine.snapshot)
    machine.mark_queued()
    machine.mark_starting(executor="thread")
    machine.mark_running()
    machine.mark_cancelled()
    writer.record(machine.snapshot, machine.transitions)
    assert writer.flush()
    writer.touch(TouchUpdate("t1", progress=Progress(1)))  # finished: dropped
    assert writer.flush()
    stored = store.get("t1")
    assert stored is not None
    assert stored.progress is None
    retried = StateMachine(machine.snapshot.evolve(status=TaskStatus.QUEUED), clock=clock)
    writer.record(retried.snapshot)  # live again (as a controller retry writes it)
    assert writer.flush()
    writer.touch(TouchUpdate("t1", progress=Progress(2)))
    assert writer.flush()
    stored = store.get("t1")
    assert stored is not None
    assert stored.progress is not None
    assert stored.progress.done == 2
    writer.close()


def _interrupting_once(method: str) -> InMemoryTaskStore:
    """A store whose `method` raises KeyboardInterrupt on its first call (a Ctrl-C there)."""
    store = InMemoryTaskStore()
    real = getattr(store, method)
    armed = [True]

    def once(*args: Any) -> Any:
        if armed:
            armed.clear()
            raise KeyboardInterrupt
        return real(*args)

    setattr(store, method, once)
    return store


def test_an_interrupted_flush_keeps_the_writes_it_had_taken(
    make_writer: Callable[..., StoreWriter],
) -> None:
    """A Ctrl-C inside the store's write (the main thread flushing) must not drop the batch:
    the next flush writes it, history and all."""

    store = _interrupting_once("save_many")
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)
    machine = StateMachine.create("t1", "x", clock=FakeClock())
    writer.record(machine.snapshot)
    machine.mark_queued()
    machine.mark_starting(executor="thread")
    writer.record(machine.snapshot, machine.transitions)
    with pytest.raises(KeyboardInterrupt):
        writer.flush()
    assert writer.pending_count == 1  # still waiting, not forgotten
    machine.mark_running()
    writer.record(machine.snapshot, machine.transitions[-1:])
    assert writer.flush()
    stored = store.get("t1")
    assert stored is not None
    assert stored.status is TaskStatus.RUNNING
    assert [t.to_status for t in store.history("t1")] == [
        TaskStatus.QUEUED,
        TaskStatus.STARTING,
        TaskStatus.RUNNING,
    ]
    writer.close()


def test_an_interrupted_flush_keeps_the_touches_it_had_taken(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = _interrupting_once("touch_many")
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)
    machine = StateMachine.create("t1", "x", clock=FakeClock())
    writer.record(machine.snapshot)
    assert writer.flush()
    writer.touch(TouchUpdate("t1", progress=Progress(3, total=10)))
    with pytest.raises(KeyboardInterrupt):
        writer.flush()
    assert writer.flush()
    stored = store.get("t1")
    assert stored is not None
    assert stored.progress == Progress(3, total=10)
    writer.close()


def _trail(store: InMemoryTaskStore, task_id: str) -> list[TaskStatus]:
    return [t.to_status for t in store.history(task_id)]


def _answer_lost(error: BaseException) -> tuple[InMemoryTaskStore, Callable[[], None]]:
    """A store whose next write, once armed, goes in and then raises `error` (its answer is
    lost: a Ctrl-C during COMMIT, a connection dropped after it)."""
    store = InMemoryTaskStore()
    real = store.save_many
    armed: list[bool] = []

    def committed_then_raising(writes: Sequence[SnapshotWrite]) -> Any:
        result = real(writes)
        if armed:
            armed.clear()
            raise error
        return result

    store.save_many = committed_then_raising  # type: ignore[method-assign]
    return store, lambda: armed.append(True)


def test_a_write_the_store_committed_just_before_a_ctrl_c_is_not_written_again(
    make_writer: Callable[..., StoreWriter],
) -> None:
    """SQLite raises a Ctrl-C that arrived during COMMIT after the commit; psycopg re-raises
    it after the statement finished. The next flush asks the store instead of writing the
    same version again (which would look like another process's write: a conflict)."""
    store, arm = _answer_lost(KeyboardInterrupt())
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)
    machine = StateMachine.create("t1", "x", clock=FakeClock())
    writer.record(machine.snapshot)
    assert writer.flush()
    machine.mark_queued()
    writer.record(machine.snapshot, machine.transitions[-1:])
    arm()
    with pytest.raises(KeyboardInterrupt):
        writer.flush()
    machine.mark_starting(executor="thread")
    writer.record(machine.snapshot, machine.transitions[-1:])
    assert writer.flush()
    assert not writer.diverged("t1")
    assert writer.failures == []
    stored = store.get("t1")
    assert stored is not None
    assert stored.status is TaskStatus.STARTING
    assert _trail(store, "t1") == [TaskStatus.QUEUED, TaskStatus.STARTING]
    assert writer.pending_count == 0


def test_single_writes_made_before_a_ctrl_c_are_not_written_again(
    make_writer: Callable[..., StoreWriter],
) -> None:
    """A batch the store refused is written one task at a time; a Ctrl-C during the third
    such write leaves the first two in the store."""

    class Refusing(InMemoryTaskStore):
        interrupt_on_single = 0
        singles = 0

        def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
            if len(writes) == 1 and self.interrupt_on_single:
                self.singles += 1
                if self.singles == self.interrupt_on_single:
                    self.interrupt_on_single = 0
                    raise KeyboardInterrupt
            if any(w.snapshot.task_id == "bad" for w in writes):
                raise StoreError("cannot store this one")
            return super().save_many(writes)

    store = Refusing()
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)
    for task_id in ("a", "b", "bad", "c"):
        writer.record(StateMachine.create(task_id, "x", clock=FakeClock()).snapshot)
    store.interrupt_on_single = 3  # 'a' and 'b' went in alone; the write of 'bad' is cut
    with pytest.raises(KeyboardInterrupt):
        writer.flush()
    assert store.get("a") is not None
    assert not writer.flush()  # 'bad' is still refused
    assert not writer.diverged("a")
    assert not writer.diverged("b")
    assert store.get("c") is not None
    assert {f.error for f in writer.failures} == {"StoreError: cannot store this one"}


def test_a_batch_the_memory_store_took_in_part_before_a_ctrl_c_is_completed(
    make_writer: Callable[..., StoreWriter],
) -> None:
    """The memory store writes item by item: a signal between two items leaves half a batch."""

    class Halfway(InMemoryTaskStore):
        armed = False

        def _create(self, snapshot: Any, transitions: Any) -> None:
            if self.armed and snapshot.task_id == "b":
                self.armed = False
                raise KeyboardInterrupt
            super()._create(snapshot, transitions)

    store = Halfway()
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)
    first = StateMachine.create("a", "x", clock=FakeClock())
    writer.record(first.snapshot)
    writer.record(StateMachine.create("b", "x", clock=FakeClock()).snapshot)
    store.armed = True
    with pytest.raises(KeyboardInterrupt):
        writer.flush()
    assert store.get("a") is not None
    assert store.get("b") is None
    first.mark_queued()
    writer.record(first.snapshot, first.transitions[-1:])
    assert writer.flush()
    assert not writer.diverged("a")
    assert store.get("b") is not None
    assert _trail(store, "a") == [TaskStatus.QUEUED]


def test_writes_in_doubt_wait_while_the_store_cannot_be_asked(
    make_writer: Callable[..., StoreWriter],
) -> None:
    class Flaky(InMemoryTaskStore):
        interrupt = False
        down = False

        def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
            result = super().save_many(writes)
            if self.interrupt:
                self.interrupt = False
                raise KeyboardInterrupt
            return result

        def query(self, query: TaskQuery | None = None) -> list[TaskSnapshot]:
            if self.down:
                raise StoreError("the store is down")
            return super().query(query)

    store = Flaky()
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)
    machine = StateMachine.create("t1", "x", clock=FakeClock())
    writer.record(machine.snapshot)
    store.interrupt = True
    with pytest.raises(KeyboardInterrupt):
        writer.flush()
    store.down = True
    machine.mark_queued()
    writer.record(machine.snapshot, machine.transitions[-1:])
    assert not writer.flush()  # not written blindly: kept, and the failure is reported
    assert writer.pending_count == 1
    assert "the store is down" in writer.failures[-1].error
    store.down = False
    assert writer.flush()
    assert not writer.diverged("t1")
    stored = store.get("t1")
    assert stored is not None
    assert stored.status is TaskStatus.QUEUED
    assert _trail(store, "t1") == [TaskStatus.QUEUED]


def test_writes_kept_by_an_interrupted_flush_are_written_without_another_record(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = _interrupting_once("save_many")
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)
    machine = StateMachine.create("t1", "x", clock=FakeClock())
    with pytest.raises(KeyboardInterrupt):
        writer.record(machine.snapshot, durable=True)
    deadline = time.monotonic() + 10
    while store.get("t1") is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert store.get("t1") is not None  # the background thread wrote it (no batching wait)
    writer.close()


def test_a_write_that_failed_after_it_went_in_is_not_taken_for_another_writers(
    make_writer: Callable[..., StoreWriter],
) -> None:
    """PostgreSQL: the connection drops after the commit, before its answer, and the store's
    own retry cannot reach the server. The write is in the store although it failed; the
    next flush asks instead of meeting its own version as a conflict (the task was never
    written again: its end was lost)."""
    store, arm = _answer_lost(StoreError("server closed the connection unexpectedly"))
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)
    machine = StateMachine.create("t1", "x", clock=FakeClock())
    writer.record(machine.snapshot)
    assert writer.flush()
    machine.mark_queued()
    machine.mark_starting(executor="thread")
    writer.record(machine.snapshot, machine.transitions)
    arm()
    assert not writer.flush()  # reported as failed
    machine.mark_running()
    machine.mark_succeeded(outcome=42)
    writer.record(machine.snapshot, machine.transitions[-2:])
    assert writer.flush()
    assert not writer.diverged("t1")
    stored = store.get("t1")
    assert stored is not None
    assert stored.status is TaskStatus.SUCCEEDED
    assert stored.outcome == 42
    assert _trail(store, "t1") == [
        TaskStatus.QUEUED,
        TaskStatus.STARTING,
        TaskStatus.RUNNING,
        TaskStatus.SUCCEEDED,
    ]
    writer.close()


def test_a_batch_that_failed_after_it_went_in_is_not_written_again_task_by_task(
    make_writer: Callable[..., StoreWriter],
) -> None:
    """A batch the store refused is written one task at a time (D34); when the batch had gone
    in and only its answer was lost, each single write met its own version, was taken for
    another writer's, and the tasks were never written again (their ends lost)."""
    store, arm = _answer_lost(StoreError("server closed the connection unexpectedly"))
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)
    machines = [StateMachine.create(task_id, "x", clock=FakeClock()) for task_id in ("a", "b")]
    for machine in machines:
        writer.record(machine.snapshot)
    arm()
    writer.flush()
    for machine in machines:
        machine.mark_queued()
        writer.record(machine.snapshot, machine.transitions[-1:])
    assert writer.flush()
    assert not writer.diverged("a")
    assert not writer.diverged("b")
    assert not [f for f in writer.failures if "ConcurrencyConflict" in f.error]
    # the store did fail, even though every write went in: it is said (§8.9)
    assert [f.error for f in writer.failures] == [
        "StoreError: server closed the connection unexpectedly (the writes went in: found "
        "in the store or written one by one)"
    ]
    assert _trail(store, "a") == _trail(store, "b") == [TaskStatus.QUEUED]
    writer.close()


def test_a_batch_that_failed_is_kept_in_doubt_while_the_store_cannot_be_asked(
    make_writer: Callable[..., StoreWriter],
) -> None:
    class Down(InMemoryTaskStore):
        answers = True
        queries = True

        def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
            result = super().save_many(writes)
            if not self.answers:
                raise StoreError("server closed the connection unexpectedly")
            return result

        def query(self, query: TaskQuery | None = None) -> list[TaskSnapshot]:
            if not self.queries:
                raise StoreError("the store is down")
            return super().query(query)

    store = Down()
    writer = make_writer(store, clock=FakeClock(), flush_interval=60)
    for task_id in ("a", "b"):
        writer.record(StateMachine.create(task_id, "x", clock=FakeClock()).snapshot)
    store.answers = store.queries = False
    assert not writer.flush()
    assert writer.pending_count == 2
    store.answers = store.queries = True
    assert writer.flush()
    assert not writer.diverged("a")
    assert not writer.diverged("b")
    assert writer.pending_count == 0


def test_a_renewal_while_a_write_is_in_doubt_waits_for_it_and_is_no_conflict(
    make_writer: Callable[..., StoreWriter],
) -> None:
    """A write that went in but answered with an error is in doubt: a touch of the same task
    in that flush is fenced to no version this writer knows, so it waits until the write is
    settled (fenced to the version before, it was refused, and the task taken for another
    writer's: D108)."""
    store, arm = _answer_lost(StoreError("connection dropped after COMMIT (simulated)"))
    clock = FakeClock()
    writer = make_writer(store, clock=clock, flush_interval=0, retry_interval=60)
    machine = StateMachine.create("t1", "extract", clock=clock)
    machine.mark_queued()
    writer.record(machine.snapshot, machine.transitions, durable=True)
    arm()
    started = machine.mark_starting()
    until = clock.now() + timedelta(seconds=30)
    writer.record(machine.snapshot, (started,))
    writer.touch(TouchUpdate("t1", lease_owner="me", lease_until=until))
    assert not writer.flush()  # the write went in; its answer was an error
    assert not writer.diverged("t1")
    finished = machine.mark_running(), machine.mark_succeeded(outcome=1)
    writer.record(machine.snapshot, finished, durable=True)
    assert writer.flush()
    assert not writer.diverged("t1")
    stored = store.get("t1")
    assert stored is not None
    assert stored.status is TaskStatus.SUCCEEDED
    assert [t.to_status for t in store.history("t1")] == [
        TaskStatus.QUEUED,
        TaskStatus.STARTING,
        TaskStatus.RUNNING,
        TaskStatus.SUCCEEDED,
    ]
