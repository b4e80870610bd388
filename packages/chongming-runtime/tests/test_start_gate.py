"""A body begins only once its task's row is in the store (D105): `StoreWriter.when_stored`,
the `StartGate` over it, and what a controller does while a start waits for its store.

The store here is the in-memory store taken for one outside this process
(`writes_in_memory` False): the writer batches its writes as it would a file's or a
server's, and the controller gates every start on it. It can be taken down, locked, or
made to hold a write until the test lets it go.
"""

from __future__ import annotations

import multiprocessing
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import runtime_proc_tasks
from chongming_core import (
    ConcurrencyConflict,
    FailureKind,
    FakeClock,
    InMemoryTaskStore,
    SnapshotWrite,
    StateMachine,
    StoreError,
    TaskStatus,
    Timeout,
    TouchUpdate,
)
from chongming_runtime import Controller, Pipeline, ProcessExecutor
from chongming_runtime.persistence._start_gate import StartGate
from chongming_runtime.persistence._writer import StoreWriter
from chongming_runtime.testing import Gate, wait_until
from pause_helpers import Steps

S = TaskStatus
BEGUN = frozenset({S.STARTING, S.RUNNING})


class StoreElsewhere(InMemoryTaskStore):
    """The in-memory store, written as if it were outside this process.

    `down` fails every write, `locked` fails it as a lock held elsewhere would (D66), and
    clearing `held` makes the next write wait until it is set again (`holding` is set
    meanwhile). `commits` lists each write that went in: (task id, status) per task.
    """

    writes_in_memory = False

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.locked = False
        self.held = threading.Event()
        self.held.set()
        self.holding = threading.Event()
        self.commits: list[list[tuple[str, TaskStatus]]] = []
        self.committers: list[threading.Thread] = []

    def _refuse(self) -> None:
        if self.locked:
            raise StoreError("database is locked (simulated)", locked=True)
        if self.down:
            raise StoreError("store unavailable (simulated outage)")

    def save_many(self, writes: Sequence[SnapshotWrite]) -> list[ConcurrencyConflict]:
        writes = list(writes)
        if not self.held.is_set():
            self.holding.set()
            assert self.held.wait(10), "the test never let a held write go"
        self._refuse()
        conflicts = super().save_many(writes)
        self.commits.append([(w.snapshot.task_id, w.snapshot.status) for w in writes])
        self.committers.append(threading.current_thread())
        return conflicts

    def touch_many(self, updates: Sequence[TouchUpdate]) -> int:
        self._refuse()
        return super().touch_many(updates)


class Launches:
    """Launch callables that note the thread they ran on."""

    def __init__(self) -> None:
        self.ran: list[tuple[str, threading.Thread]] = []
        self.done = threading.Event()

    def launch(self, name: str) -> Callable[[], None]:
        def run() -> None:
            self.ran.append((name, threading.current_thread()))
            self.done.set()

        return run

    def names(self) -> list[str]:
        return [name for name, _ in self.ran]


def _starting(writer: StoreWriter, task_id: str) -> StateMachine:
    """A task created, queued and starting, every step recorded (not durably)."""
    machine = StateMachine.create(task_id, "noop")
    writer.record(machine.snapshot)
    queued = machine.mark_queued()
    writer.record(machine.snapshot, (queued,))
    starting = machine.mark_starting(executor="thread")
    writer.record(machine.snapshot, (starting,))
    return machine


def _writer_of(
    make_writer: Callable[..., StoreWriter], store: StoreElsewhere, **options: Any
) -> tuple[StoreWriter, StateMachine]:
    """A writer on `store` (with `options`) that recorded task "t" up to ``starting``."""
    writer = make_writer(store, **options)
    return writer, _starting(writer, "t")


def _down() -> StoreElsewhere:
    store = StoreElsewhere()
    store.down = True
    return store


def _holding() -> StoreElsewhere:
    """A store whose next write waits until the test sets `held` again."""
    store = StoreElsewhere()
    store.held.clear()
    return store


# ------------------------------------------------------------------ the writer's side


def test_a_row_stored_already_is_answered_at_once_with_no_call(
    make_writer: Callable[..., StoreWriter],
) -> None:
    writer, machine = _writer_of(make_writer, StoreElsewhere())
    assert writer.flush()
    called: list[str] = []
    assert writer.when_stored("t", machine.version, lambda: called.append("t")) is True
    assert writer.when_stored("t", machine.version - 1, lambda: called.append("t")) is True
    assert called == []


def test_the_call_comes_after_the_flush_that_stored_the_row(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = _holding()
    # no batching delay could explain a prompt flush: asking for the row wakes the writer
    writer, machine = _writer_of(make_writer, store, flush_interval=60)
    stored = threading.Event()
    assert writer.when_stored("t", machine.version, stored.set) is False
    assert store.holding.wait(10)  # the flush is in the store's hands
    assert not stored.is_set()
    store.held.set()
    assert stored.wait(10)
    row = store.get("t")
    assert row is not None
    assert (row.status, row.status_version) == (S.STARTING, machine.version)


def test_a_flush_that_failed_opens_it_all_the_same(
    make_writer: Callable[..., StoreWriter],
) -> None:
    """A store failure never holds a task back (guide §8.9; D106): the start goes ahead
    once a flush tried its row, and the failure is in `failures`."""
    store = _down()
    writer, machine = _writer_of(make_writer, store, flush_interval=60, retry_interval=60)
    stored = threading.Event()
    assert writer.when_stored("t", machine.version, stored.set) is False
    assert stored.wait(10)
    assert writer.failures
    assert store.get("t") is None
    store.down = False
    assert writer.flush()  # the store catches up
    row = store.get("t")
    assert row is not None
    assert row.status is S.STARTING


def test_a_flush_that_found_the_store_locked_opens_it_too(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = StoreElsewhere()
    store.locked = True
    writer, machine = _writer_of(make_writer, store, retry_interval=60)
    stored = threading.Event()
    told = threading.Event()
    assert writer.when_stored("t", machine.version, stored.set) is False
    other = StateMachine.create("other", "noop")
    writer.record(other.snapshot, (), on_durable=told.set)
    assert told.wait(10)  # a durable write's caller is told when the flush gives up (D66)
    assert stored.wait(10)  # and a start goes ahead: its own try would wait as long
    assert "locked" in writer.failures[-1].error


def test_a_task_another_writer_owns_is_opened(make_writer: Callable[..., StoreWriter]) -> None:
    store = StoreElsewhere()
    theirs = StateMachine.create("t", "theirs")
    store.create(theirs.snapshot, theirs.transitions)  # the id went in from elsewhere first
    writer, machine = _writer_of(make_writer, store)
    opened = threading.Event()
    writer.when_stored("t", machine.version, opened.set)
    assert opened.wait(10)  # the store's row wins (D27): nothing more is coming for it
    assert writer.diverged("t")
    assert writer.when_stored("t", machine.version + 5, opened.clear) is True


def test_a_later_call_for_the_same_task_replaces_the_earlier(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = _holding()
    writer, machine = _writer_of(make_writer, store, flush_interval=60)
    calls: list[str] = []
    opened = threading.Event()

    def second() -> None:
        calls.append("second")
        opened.set()

    writer.when_stored("t", machine.version, lambda: calls.append("first"))
    writer.when_stored("t", machine.version, second)
    store.held.set()
    assert opened.wait(10)
    assert calls == ["second"]


# ------------------------------------------------------------------ the gate


def test_the_gate_launches_at_once_on_the_callers_thread_when_the_row_is_in(
    make_writer: Callable[..., StoreWriter],
) -> None:
    writer = make_writer(StoreElsewhere())
    machine = _starting(writer, "t")
    assert writer.flush()
    launches = Launches()
    StartGate(writer).carry("t", machine.version, launches.launch("t"))
    assert launches.ran == [("t", threading.current_thread())]


def test_the_gate_launches_in_order_on_a_thread_that_did_not_flush(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = _holding()
    writer = make_writer(store)
    gate = StartGate(writer)
    launches = Launches()
    names = [f"t{i}" for i in range(5)]
    for name in names:
        gate.carry(name, _starting(writer, name).version, launches.launch(name))
    assert store.holding.wait(10)
    assert launches.ran == []
    store.held.set()
    wait_until(lambda: len(launches.ran) == len(names), "every launch")
    assert launches.names() == names
    flushers = set(store.committers)
    assert not flushers & {thread for _, thread in launches.ran}
    assert threading.current_thread() not in {thread for _, thread in launches.ran}


def test_a_hand_off_is_made_by_the_thread_that_flushed(
    make_writer: Callable[..., StoreWriter],
) -> None:
    store = _holding()
    writer, machine = _writer_of(make_writer, store)
    launches = Launches()
    StartGate(writer).hand_off("t", machine.version, launches.launch("t"))
    assert store.holding.wait(10)
    assert launches.ran == []
    store.held.set()
    assert launches.done.wait(10)
    assert launches.ran == [("t", store.committers[-1])]  # a thread executor's launch


# ------------------------------------------------------------------ through a controller


def _reading(
    make_controller: Callable[..., Controller], **options: Any
) -> tuple[StoreElsewhere, Controller, dict[str, TaskStatus | None]]:
    """A controller on a store of its own, with task "reads": its body notes the status
    its task's row has in the store when it begins (None: no row)."""
    store = StoreElsewhere()
    controller = make_controller(store=store, **options)
    seen: dict[str, TaskStatus | None] = {}

    def reads(ctx: Any) -> None:
        row = store.get(ctx.task_id)
        seen[ctx.task_id] = None if row is None else row.status

    controller.register("reads", reads)
    return store, controller, seen


def _recording(
    make_controller: Callable[..., Controller], **options: Any
) -> tuple[StoreElsewhere, Controller, list[str]]:
    """A controller on a store whose next write is held, with task "record": its body
    notes its id."""
    store = _holding()
    controller = make_controller(store=store, **options)
    ran: list[str] = []
    controller.register("record", lambda ctx: ran.append(ctx.task_id))
    return store, controller, ran


def test_every_body_finds_its_row_in_the_store_when_it_begins(
    make_controller: Callable[..., Controller],
) -> None:
    _, controller, seen = _reading(make_controller, max_parallel=4)
    runs = [controller.submit("reads") for _ in range(40)]
    for run in runs:
        assert run.wait(10).status is S.SUCCEEDED
    assert {seen[run.task_id] for run in runs} <= BEGUN, seen


def test_every_pipeline_node_finds_its_row_in_the_store_when_it_begins(
    make_controller: Callable[..., Controller],
) -> None:
    _, controller, seen = _reading(make_controller, max_parallel=4)
    pipeline = Pipeline("rows")
    first = pipeline.node("reads", node_id="first")
    pipeline.node("reads", node_id="second", depends_on=[first])
    pipeline.node("reads", node_id="third", depends_on=[first])
    outcome = controller.submit_pipeline(pipeline).wait(timeout=10)
    assert {node.status for node in outcome.nodes.values()} == {S.SUCCEEDED}
    assert len(seen) == 3
    assert set(seen.values()) <= BEGUN, seen


def test_the_starts_recorded_during_a_commit_share_the_next_one(
    make_controller: Callable[..., Controller],
) -> None:
    store = StoreElsewhere()
    controller = make_controller(store=store, max_parallel=5)
    first, held, second = Gate(), Gate(), Gate()
    controller.register("first", first.body)
    controller.register("held", held.body)
    controller.register("second", second.body)
    try:
        for index in range(4):
            controller.submit("first", f"a{index}")
        first.wait_started(4)
        assert controller.flush()
        store.held.clear()
        controller.submit("held")  # the fifth slot; the commit of its start is held
        assert store.holding.wait(10)
        queued = [controller.submit("second", f"b{index}") for index in range(4)]
        first.release()  # four slots free at once: the four queued runs start meanwhile
        gates = controller._writer._gates
        wait_until(lambda: all(run.task_id in gates for run in queued), "the four starts")
        assert second.started == []  # no body began while its row waited
        store.held.set()
        second.wait_started(4)
    finally:
        store.held.set()
        for gate in (first, held, second):
            gate.release()
    ids = {run.task_id for run in queued}
    with_starts = [c for c in store.commits if any(t in ids and s is S.STARTING for t, s in c)]
    assert len(with_starts) == 1, with_starts
    assert {t for t, s in with_starts[0] if s is S.STARTING} >= ids


def test_while_the_store_holds_the_row_no_body_begins_and_the_start_timeout_counts(
    make_controller: Callable[..., Controller],
) -> None:
    clock = FakeClock()
    store, controller, ran = _recording(make_controller, clock=clock)
    run = controller.submit("record", timeout=Timeout(start=5))
    assert store.holding.wait(10)
    assert run.status is S.STARTING
    clock.advance(6)
    wait_until(lambda: run.status is S.FAILED, "the start timeout")
    store.held.set()
    outcome = run.wait(10)
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_START
    assert controller.flush()
    gate = controller._start_gate
    assert gate is not None
    wait_until(lambda: not gate._opened and not gate._carrying, "the opened gate to be served")
    assert ran == []  # its attempt ended while it waited: no carrier was started for it


def test_a_stop_while_the_start_waits_for_the_store_ends_it_without_its_body(
    make_controller: Callable[..., Controller],
) -> None:
    clock = FakeClock()
    store, controller, ran = _recording(make_controller, clock=clock, graceful_stop=1)
    run = controller.submit("record")
    assert store.holding.wait(10)
    assert controller.stop(run.task_id, reason="not now")
    assert run.status is S.STOPPING
    clock.advance(2)  # its graceful window passes: no body began, and none will
    wait_until(lambda: run.status is S.STOPPED, "the graceful window")
    store.held.set()
    outcome = run.wait(10)
    assert outcome.status is S.STOPPED
    assert outcome.failure is not None
    assert "its body had not begun" in outcome.failure.message
    assert controller.flush()
    assert ran == []


def test_close_while_starts_wait_for_the_store_returns_and_runs_no_body(
    make_controller: Callable[..., Controller],
) -> None:
    store, controller, ran = _recording(make_controller, graceful_stop=0.05)
    runs = [controller.submit("record") for _ in range(3)]
    assert store.holding.wait(10)
    threading.Timer(0.5, store.held.set).start()  # close() waits for their ends' writes
    outcomes = controller.close(timeout=10)
    assert [o.status for o in outcomes] == [S.STOPPED] * 3
    assert [r.status for r in runs] == [S.STOPPED] * 3
    assert ran == []


def test_a_start_that_waited_for_the_store_runs_once_the_store_took_its_row(
    make_controller: Callable[..., Controller],
) -> None:
    store, controller, seen = _reading(make_controller)
    store.held.clear()
    run = controller.submit("reads")
    assert store.holding.wait(10)
    assert run.status is S.STARTING
    store.held.set()
    assert run.wait(10).status is S.SUCCEEDED
    assert seen[run.task_id] in BEGUN


def test_while_the_store_is_down_tasks_run_on_and_the_failure_is_reported(
    make_controller: Callable[..., Controller],
) -> None:
    """Guide §8.9 point 3: a store failure fails no task and holds none back; it only
    costs observability, and never silently (D106)."""
    store, controller, seen = _reading(make_controller, max_parallel=2)
    store.down = True
    runs = [controller.submit("reads") for _ in range(3)]
    assert [run.wait(10).status for run in runs] == [S.SUCCEEDED] * 3
    assert controller.persist_failures
    assert {seen[run.task_id] for run in runs} == {None}  # they began with no row in it
    store.down = False
    assert controller.flush()  # the store catches up
    for run in runs:
        row = store.get(run.task_id)
        assert row is not None
        assert row.status is S.SUCCEEDED


def test_no_child_process_is_started_before_its_row_is_in_the_store(
    tmp_path: Path, make_controller: Callable[..., Controller]
) -> None:
    store = _holding()
    controller = make_controller(store=store, executor=ProcessExecutor())
    controller.register("count", runtime_proc_tasks.count_steps)  # a child can import it
    steps = Steps(tmp_path / "steps")
    run = controller.submit("count", str(steps))  # a launch would have spawned the child here
    assert store.holding.wait(10)
    child = f"chongming-task-{run.task_id}-1"
    assert child not in {process.name for process in multiprocessing.active_children()}
    assert run.status is S.STARTING
    assert steps.count() == 0
    store.held.set()
    wait_until(lambda: steps.count() > 0, "the body's first step", timeout=30)
    row = store.get(run.task_id)
    assert row is not None
    assert row.status in BEGUN
    assert controller.stop(run.task_id)
    assert run.wait(30).status is S.STOPPED
