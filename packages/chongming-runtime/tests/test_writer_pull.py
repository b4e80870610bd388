"""StoreWriter.record_run: a run's writes taken from it when a flush takes them."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from chongming_core import (
    ConcurrencyConflict,
    FakeClock,
    InMemoryTaskStore,
    SnapshotWrite,
    StateMachine,
    TaskSnapshot,
    TaskStatus,
    Transition,
)
from chongming_runtime import Controller, TaskRun
from chongming_runtime.persistence._writer import StoreWriter
from chongming_runtime.run import _task_run
from chongming_runtime.testing import wait_until

S = TaskStatus


class MachineRun:
    """A `WrittenRun` over a bare state machine, counting the snapshots it hands out."""

    def __init__(self, machine: StateMachine) -> None:
        self.machine = machine
        self.task_id = machine.task_id
        self.taken = len(machine.transitions)
        self.takes = 0
        self.lock = threading.Lock()

    def take_write(self) -> tuple[TaskSnapshot, Sequence[Transition]] | None:
        with self.lock:
            transitions = self.machine.transitions
            if self.taken >= len(transitions):
                return None
            start, self.taken = self.taken, len(transitions)
            self.takes += 1
            return self.machine.snapshot, transitions[start:]


class CountingStore(InMemoryTaskStore):
    """An in-memory store that counts the rows it is asked to write."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[str, int | None, int]] = []

    def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
        self.rows.extend(
            (w.snapshot.task_id, w.expect_version, w.snapshot.status_version) for w in writes
        )
        return super().save_many(writes)


def _trail(store: InMemoryTaskStore, task_id: str) -> list[TaskStatus]:
    return [t.to_status for t in store.history(task_id)]


def _queued(
    make_writer: Callable[..., StoreWriter],
) -> tuple[CountingStore, StoreWriter, MachineRun]:
    """A writer that flushes only when asked, and a task queued and recorded as a pull."""
    store = CountingStore()
    writer = make_writer(store, clock=FakeClock(), flush_interval=3600)
    run = MachineRun(StateMachine.create("t1", "extract", clock=FakeClock()))
    run.machine.mark_queued()
    writer.record_run(run)
    return store, writer, run


def test_moves_between_two_flushes_are_one_row_with_every_transition(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store, writer, run = _queued(make_writer)
    run.machine.mark_starting(executor="thread")
    writer.record_run(run)
    run.machine.mark_running()
    writer.record_run(run)
    assert writer.pending_count == 1
    assert writer.flush()
    assert store.rows == [("t1", None, 3)]  # created at its latest version, once
    assert _trail(store, "t1") == [S.QUEUED, S.STARTING, S.RUNNING]
    assert run.takes == 1
    run.machine.mark_succeeded(outcome=7)
    writer.record_run(run, durable=True)  # returns once a flush took it
    assert store.rows[-1] == ("t1", 3, 4)
    stored = store.get("t1")
    assert stored is not None
    assert (stored.status, stored.outcome) == (S.SUCCEEDED, 7)
    assert _trail(store, "t1") == [S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]


def test_a_pull_an_earlier_flush_emptied_still_tells_its_caller(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store, writer, run = _queued(make_writer)
    # the task finishes; a flush takes its end before the end's own pull is queued
    run.machine.mark_starting(executor="thread")
    run.machine.mark_running()
    run.machine.mark_succeeded()
    assert writer.flush()
    told = threading.Event()
    writer.record_run(run, on_durable=told.set)
    assert told.wait(5)
    assert store.rows == [("t1", None, 4)]  # nothing more to write for the end's pull
    assert _trail(store, "t1") == [S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]


def test_a_pull_of_a_task_another_process_owns_writes_nothing(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = CountingStore()
    writer = make_writer(store, clock=FakeClock(), flush_interval=3600)
    machine = StateMachine.create("t1", "extract", clock=FakeClock())
    machine.mark_queued()
    store.create(machine.snapshot, machine.transitions)
    other = StateMachine(machine.snapshot, machine.transitions, clock=FakeClock())
    other.mark_stopped(actor="ops")  # another process moved it on
    store.save(other.snapshot, expect_version=1, transitions=other.transitions[-1:])
    writer.adopt("t1", 1)
    run = MachineRun(StateMachine(machine.snapshot, machine.transitions, clock=FakeClock()))
    run.machine.mark_starting(executor="thread")
    writer.record_run(run)
    writer.flush()  # a conflict: the store's version wins
    assert writer.diverged("t1")
    run.machine.mark_running()
    told = threading.Event()
    writer.record_run(run, on_durable=told.set)
    assert told.is_set()  # at once: nothing of it is written any more
    stored = store.get("t1")
    assert stored is not None
    assert stored.status is S.STOPPED


def test_a_controller_run_builds_one_snapshot_for_its_writes_and_one_for_its_end() -> None:
    """A run whose only listener is its controller builds no snapshot per transition:
    the writer takes its state when it flushes (here: at the end, in one row)."""
    store = CountingStore()
    built: list[int] = []
    controller = Controller(store=store, max_parallel=1)
    try:
        gate = threading.Event()
        controller.register("held", lambda ctx: gate.wait(10))
        run = controller.submit("held")
        snapshot_property = StateMachine.snapshot

        def counting(machine: StateMachine) -> TaskSnapshot:
            if machine._changes is not None:  # events since the last one built: one is built
                built.append(machine.version)
            return snapshot_property.fget(machine)  # type: ignore[attr-defined,no-any-return]

        StateMachine.snapshot = property(counting)  # type: ignore[assignment,method-assign]
        try:
            gate.set()
            outcome = run.wait(10)
        finally:
            StateMachine.snapshot = snapshot_property  # type: ignore[method-assign]
        assert outcome.status is S.SUCCEEDED
        # its running state for the writer (or none when the end came first) and its end
        assert 1 <= len(built) <= 2
        assert _trail(store, run.task_id) == [S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]
    finally:
        controller.close()


def test_a_listener_that_reads_snapshots_gets_one_for_every_transition() -> None:
    seen: list[tuple[TaskStatus, TaskStatus | None]] = []

    class Reader:
        def on_transition(
            self, run: TaskRun, transition: Transition, snapshot: TaskSnapshot
        ) -> None:
            seen.append((transition.to_status, None if snapshot is None else snapshot.status))

        def on_side_update(self, run: TaskRun, snapshot: TaskSnapshot) -> None:
            pass

    controller = Controller(max_parallel=1)
    try:
        gate = threading.Event()
        controller.register("held", lambda ctx: gate.wait(10))
        run = controller.submit("held")
        run.add_listener(Reader())
        gate.set()
        assert run.wait(10).status is S.SUCCEEDED
        assert seen  # told the transitions after it was added, each with its own snapshot
        assert all(status is snapshot for status, snapshot in seen)
        assert seen[-1] == (S.SUCCEEDED, S.SUCCEEDED)
    finally:
        controller.close()


def test_a_controller_run_makes_no_event_for_its_moves(monkeypatch: Any) -> None:
    """Its only listener is the controller, a `MovePuller`: a move to queued, starting or
    running is told by `on_moved` (the writer takes the run's state itself), and the one
    event a no-op task makes is its end. Every transition still reaches the store."""
    made: list[TaskStatus | None] = []
    real_event = _task_run.RunEvent

    def counting(snapshot: TaskSnapshot | None, transition: Transition | None = None) -> Any:
        made.append(None if transition is None else transition.to_status)
        return real_event(snapshot, transition)

    monkeypatch.setattr(_task_run, "RunEvent", counting)
    moved: list[TaskStatus] = []
    real_moved = Controller.on_moved

    def on_moved(controller: Controller, run: TaskRun) -> None:
        moved.append(run._machine.status)
        real_moved(controller, run)

    monkeypatch.setattr(Controller, "on_moved", on_moved)
    store = InMemoryTaskStore()
    controller = Controller(store=store, max_parallel=1)
    try:
        controller.register("noop", lambda ctx: None)
        run = controller.submit("noop")
        assert run.wait(10).status is S.SUCCEEDED
        controller.flush()
        assert made == [S.SUCCEEDED]
        assert 1 <= len(moved) <= 3  # several moves may be told by one call
        assert set(moved) <= {S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED}
        assert _trail(store, run.task_id) == [S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]
    finally:
        controller.close()


def test_a_listener_added_to_a_controller_run_is_told_every_later_move() -> None:
    """A listener that is not a `MovePuller` turns the run's moves back into events: it is
    told each later one with its snapshot, and the controller still has them written."""
    seen: list[tuple[TaskStatus, TaskStatus]] = []

    class Reader:
        def on_transition(
            self, run: TaskRun, transition: Transition, snapshot: TaskSnapshot
        ) -> None:
            seen.append((transition.to_status, snapshot.status))

        def on_side_update(self, run: TaskRun, snapshot: TaskSnapshot) -> None:
            pass

    store = InMemoryTaskStore()
    controller = Controller(store=store, max_parallel=1)
    try:
        gate = threading.Event()
        controller.register("held", lambda ctx: gate.wait(10))
        controller.register("noop", lambda ctx: None)
        first = controller.submit("held")
        second = controller.submit("noop")  # queued behind the first
        second.add_listener(Reader())
        gate.set()
        assert first.wait(10).status is S.SUCCEEDED
        assert second.wait(10).status is S.SUCCEEDED
        assert seen == [(S.STARTING, S.STARTING), (S.RUNNING, S.RUNNING), (S.SUCCEEDED,) * 2]
        controller.flush()
        assert _trail(store, second.task_id) == [S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]
    finally:
        controller.close()


def test_a_puller_that_raises_is_logged_and_the_run_goes_on(caplog: Any) -> None:
    told: list[TaskStatus] = []

    class Puller:
        pulls_moves = True
        reads_snapshots = False

        def on_moved(self, run: TaskRun) -> None:
            told.append(run._machine.status)
            if len(told) == 1:
                raise RuntimeError("a puller's bug")

        def on_transition(
            self, run: TaskRun, transition: Transition, snapshot: TaskSnapshot | None
        ) -> None:
            told.append(transition.to_status)

        def on_side_update(self, run: TaskRun, snapshot: TaskSnapshot) -> None:
            pass

    run = TaskRun(lambda ctx: "done", listeners=[Puller()])
    run.start()
    outcome = run.wait(10)
    assert outcome.status is S.SUCCEEDED
    assert outcome.value == "done"
    assert told[-1] is S.SUCCEEDED  # the end is a transition, told after every move
    assert len(told) >= 2
    assert "a puller's bug" in caplog.text


def test_a_claimed_start_queues_no_pull(
    monkeypatch: Any, make_controller: Callable[..., Controller]
) -> None:
    """The claim wrote the task's `starting` (D165): telling it to the controller has its
    writer take nothing, so no pull is queued for it (nor the writer woken)."""
    pulled: list[TaskStatus] = []
    real_record_run = StoreWriter.record_run

    def record_run(writer: StoreWriter, run: Any, **kwargs: Any) -> None:
        pulled.append(run._machine.status)
        real_record_run(writer, run, **kwargs)

    monkeypatch.setattr(StoreWriter, "record_run", record_run)
    store = InMemoryTaskStore()
    feeder = make_controller(store=store, owner="web")
    worker = make_controller(store=store, owner="w1", max_parallel=1)
    gate = threading.Event()
    worker.register("held", lambda ctx: gate.wait(10))
    task_id = feeder.enqueue("held")
    pulled.clear()  # the feeder's own writes
    worker.serve()
    wait_until(lambda: getattr(store.get(task_id), "status", None) is S.RUNNING)
    assert S.STARTING not in pulled  # the claimed start: nothing to take
    gate.set()
    assert feeder.wait(task_id, timeout=10).status is S.SUCCEEDED
    assert _trail(store, task_id) == [S.QUEUED, S.STARTING, S.RUNNING, S.SUCCEEDED]
