"""Nothing ends a background thread of the runtime (D65): the command poller, the touch
timer, a command that raises and the process executor's relay each log what a round raised,
list it in `persist_failures` and go on; a command row nobody can read is completed as
rejected, saying what is wrong, and the stop after it is applied (D64)."""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Collection
from datetime import datetime
from types import SimpleNamespace
from typing import Any

import pytest

from chongming_core import (
    Command,
    FakeClock,
    InMemoryTaskStore,
    Progress,
    StoreError,
    TaskStatus,
)
from chongming_runtime.controller._controller import Controller
from chongming_runtime.controller._lease_keeper import LeaseKeeper
from chongming_runtime.executors import process as process_executor
from chongming_runtime.executors._process_child import _Forwarder
from chongming_runtime.persistence._commands import CommandPoller, new_command
from chongming_runtime.pipeline._coordinator import PipelineCoordinator
from chongming_runtime.pipeline._definition import Pipeline
from chongming_runtime.run._task_run import TaskRun
from chongming_runtime.testing import Closer, spin, wait_until

S = TaskStatus
WAIT = 10.0


@pytest.fixture
def controllers(closer: Closer) -> Callable[..., Controller]:
    def make(**kwargs: Any) -> Controller:
        kwargs.setdefault("graceful_stop", 2.0)
        kwargs.setdefault("poll_interval", 0.01)
        return closer.controller(**kwargs)

    return make


def _failures(controller: Controller, operation: str) -> list[str]:
    return [f.error for f in controller.persist_failures if f.operation == operation]


# ---------------------------------------------------------------- unreadable command rows
@pytest.mark.parametrize(
    ("column", "value", "said"),
    [
        ("issued_at", "not a time", "issued_at is 'not a time', not an ISO-8601 time"),
        ("task_id", b"job-1", "task_id is a blob (b'job-1'), not text"),
        ("action", 3, "action is an integer (3), not text"),
        ("reason", ["a", "list"], "reason is a list (['a', 'list']), not text"),
        ("command_id", b"\xff", "command_id is a blob (b'\\xff'), not text"),
    ],
)
def test_a_row_nobody_can_read_is_rejected_and_the_stop_after_it_is_applied(
    controllers: Callable[..., Controller], column: str, value: object, said: str
) -> None:
    store = InMemoryTaskStore()
    worker = controllers(store=store, owner="worker")
    worker.register("spin", spin)
    run = worker.submit("spin", task_id="job-1")
    wait_until(lambda: store.get("job-1") is not None, "the task to reach the store")
    clock = FakeClock()
    forged = new_command(task_id="job-1", action="stop", issued_by="mallory", clock=clock)
    store.submit_command(dataclasses.replace(forged, **{column: value}))  # type: ignore[arg-type]
    wait_until(lambda: _failures(worker, "command row"), "the unreadable row to be met")
    assert worker._poller.running  # the channel outlived the row

    console = controllers(store=store, owner="console")
    assert console.stop("job-1", reason="after the bad row") is True
    assert run.wait(WAIT).status is S.STOPPED  # the stop was applied, not lost
    stopping = next(t for t in run.transitions if t.to_status is S.STOPPING)
    assert stopping.reason == "after the bad row"
    (row,) = [c for c in store.commands() if c.issued_by == "mallory"]
    assert row.problem is not None
    assert said in row.problem
    assert row.is_complete
    assert row.result is not None
    assert row.result.startswith("rejected: ")
    assert said in row.result
    (entry,) = _failures(worker, "command row")
    assert said in entry
    assert "completed as rejected" in entry
    # nothing of the row was acted on: one stop, the console's
    assert [t.actor for t in run.transitions if t.to_status is S.STOPPING] == ["console (command)"]


# ---------------------------------------------------------------- the command poller
class _RaisingClaims(InMemoryTaskStore):
    """`claim_commands` raises each exception of `raises` in turn, then works."""

    def __init__(self, *raises: BaseException) -> None:
        super().__init__()
        self.raises = list(raises)

    def claim_commands(
        self,
        owner: str,
        *,
        now: datetime,
        lease_seconds: float,
        limit: int = 100,
        task_ids: Collection[str] | None = None,
        buckets: Collection[int] | None = None,
    ) -> list[Command]:
        if self.raises:
            raise self.raises.pop(0)
        return super().claim_commands(
            owner, now=now, lease_seconds=lease_seconds, limit=limit, task_ids=task_ids,
            buckets=buckets,
        )  # fmt: skip


def test_no_exception_of_a_poll_ends_the_command_poller(
    controllers: Callable[..., Controller],
) -> None:
    store = _RaisingClaims(
        RuntimeError("a store's bug"),
        SystemExit("exit from a claim"),
        ValueError("Invalid isoformat string: 'x'"),
    )
    worker = controllers(store=store, owner="worker")
    worker.register("spin", spin)
    run = worker.submit("spin", task_id="job-1")
    wait_until(lambda: not store.raises, "the three failing polls")
    wait_until(lambda: store.get("job-1") is not None, "the task to reach the store")
    console = controllers(store=store, owner="console")
    assert console.stop("job-1") is True
    assert run.wait(WAIT).status is S.STOPPED
    assert _failures(worker, "the command poller") == [
        "RuntimeError: a store's bug",
        "SystemExit: exit from a claim",
        "ValueError: Invalid isoformat string: 'x'",
    ]


def test_a_run_of_failed_polls_is_recorded_once_and_logged_each_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    down = StoreError("store unavailable (simulated)")
    store = _RaisingClaims(down, down, down, StoreError("another failure"))
    reported: list[tuple[str, str]] = []
    poller = CommandPoller(
        store,
        owner="n",
        handler=lambda c: "applied",
        clock=FakeClock(),
        interval=0.001,
        on_error=lambda operation, error: reported.append((operation, error)),
    )
    with caplog.at_level(logging.WARNING, logger="chongming_task.commands"):
        poller.start()
        wait_until(lambda: not store.raises, "the failing polls")
        wait_until(lambda: len(reported) == 2, "both reports")
        poller.stop()
    assert reported == [
        ("command poll", "StoreError: store unavailable (simulated); polling goes on"),
        ("command poll", "StoreError: another failure; polling goes on"),
    ]
    assert caplog.text.count("command poll failed, will retry") == 4


# ---------------------------------------------------------------- the touch timer
def test_no_exception_of_a_tick_ends_the_touch_timer(
    controllers: Callable[..., Controller], monkeypatch: pytest.MonkeyPatch
) -> None:
    # on the real clock's timer thread: a SystemExit raised in a tick used to end that
    # thread, and with it every later lease renewal (the tasks looked dead to reconcile)
    store = InMemoryTaskStore()
    worker = controllers(store=store, owner="worker", touch_interval=0.02, lease_ttl=0.3)
    worker.register("spin", spin)
    raised = threading.Event()
    original = LeaseKeeper._touch_all

    def once(self: LeaseKeeper, runs: list[Any]) -> None:
        if not raised.is_set():
            raised.set()
            raise SystemExit("a bug in a tick")
        original(self, runs)

    monkeypatch.setattr(LeaseKeeper, "_touch_all", once)
    run = worker.submit("spin", task_id="job-1")
    wait_until(raised.is_set, "the failing tick")
    wait_until(lambda: run.status is S.RUNNING, "the task to run")

    def stored_lease() -> object:
        stored = store.get("job-1")
        return stored is not None and stored.lease_until is not None

    # the writer takes the running task to the store a moment after its status changed
    wait_until(stored_lease, "the task's lease in the store")
    first = store.get("job-1")
    assert first is not None
    assert first.lease_until is not None
    wait_until(
        lambda: store.get("job-1").lease_until > first.lease_until,  # type: ignore[union-attr,operator]
        "a lease renewal after the failing tick",
    )
    assert _failures(worker, "the touch timer") == ["SystemExit: a bug in a tick"]


def test_a_failing_tick_on_a_fake_clock_is_recorded_and_the_next_one_runs(
    monkeypatch: pytest.MonkeyPatch,
    make_controller: Callable[..., Controller],
) -> None:
    clock = FakeClock()
    controller = make_controller(store=InMemoryTaskStore(), clock=clock, touch_interval=1.0)
    controller.register("spin", spin)
    ticks: list[str] = []
    original = LeaseKeeper._touch_all

    def flaky(self: LeaseKeeper, runs: list[Any]) -> None:
        ticks.append("tick")
        if len(ticks) == 1:
            raise RuntimeError("touch bug")
        original(self, runs)

    monkeypatch.setattr(LeaseKeeper, "_touch_all", flaky)
    run = controller.submit("spin", task_id="job-1")
    clock.advance(1.0)
    clock.advance(1.0)
    assert ticks == ["tick", "tick"]
    assert _failures(controller, "the touch timer") == ["RuntimeError: touch bug"]
    controller.stop(run.task_id)
    clock.advance(5)
    controller.close(timeout=WAIT)


# ---------------------------------------------------------------- a command's pause
def test_a_pause_command_that_raises_is_recorded_not_left_to_a_traceback(
    controllers: Callable[..., Controller], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = InMemoryTaskStore()
    worker = controllers(store=store, owner="worker")
    worker.register("spin", spin)
    run = worker.submit("spin", task_id="job-1")
    wait_until(lambda: store.get("job-1") is not None, "the task to reach the store")

    def broken(*args: Any, **kwargs: Any) -> bool:
        raise RuntimeError("pause bug")

    # a pause command is requested on the poller's thread, without waiting (D61)
    monkeypatch.setattr(TaskRun, "pause_without_waiting", broken)
    console = controllers(store=store, owner="console")
    console.pause("job-1")
    operation = "the pause command of task 'job-1'"
    wait_until(lambda: _failures(worker, operation), "the failing pause")
    assert _failures(worker, operation) == ["RuntimeError: pause bug"]
    (row,) = [c for c in store.commands() if c.task_id == "job-1"]
    assert row.result == "rejected: RuntimeError: pause bug"
    assert console.stop("job-1") is True  # the channel goes on
    assert run.wait(WAIT).status is S.STOPPED


# ---------------------------------------------------------------- pipeline steps
def test_a_pipeline_step_that_fails_is_listed_for_the_operator(
    controllers: Callable[..., Controller], monkeypatch: pytest.MonkeyPatch
) -> None:
    # a node whose release failed stays blocked: that was only in the log
    controller = controllers(store=InMemoryTaskStore(), owner="worker")
    controller.register("first", lambda ctx: 1)
    controller.register("then", lambda ctx: 2)

    original = PipelineCoordinator._release

    def _release(self: PipelineCoordinator, prun: Any, node_id: str) -> None:
        if node_id == "then":
            raise RuntimeError(f"cannot release {node_id}")
        original(self, prun, node_id)

    monkeypatch.setattr(PipelineCoordinator, "_release", _release)
    pipeline = Pipeline("p")
    first = pipeline.node("first", node_id="first")
    pipeline.node("then", node_id="then", depends_on=[first])
    prun = controller.submit_pipeline(pipeline)
    wait_until(lambda: _failures(controller, "pipeline step _release('then')"), "the failed step")
    assert _failures(controller, "pipeline step _release('then')") == [
        "RuntimeError: cannot release then"
    ]
    controller.stop(prun.task_ids["then"])
    assert prun.wait(WAIT).nodes["then"].status is S.STOPPED


# ---------------------------------------------------------------- the process executor
def test_a_report_of_a_child_that_cannot_be_relayed_is_skipped_not_fatal(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def progress(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("a progress listener's bug")

    attempt = SimpleNamespace(context=SimpleNamespace(task_id="p-1", progress=progress))
    with caplog.at_level(logging.ERROR, logger="chongming_task.runtime"):
        relayed = process_executor._relay_one(
            attempt,  # type: ignore[arg-type]
            ("progress", Progress(1.0).to_dict()),
            None,  # type: ignore[arg-type]
        )
    assert relayed is None  # the supervising thread reads the next report
    assert "relaying a 'progress' report of task 'p-1'" in caplog.text
    result = process_executor._relay_one(attempt, ("returned", 5), None)  # type: ignore[arg-type]
    assert result is not None
    assert result.value == 5


def test_a_failed_send_does_not_end_the_heartbeat_forwarder() -> None:
    sent: list[tuple[Any, ...]] = []
    calls = 0

    class Sender:
        def send(self, message: tuple[Any, ...]) -> None:
            nonlocal calls
            calls += 1
            if calls == 1:
                raise ValueError("cannot send")
            sent.append(message)

    ctx = SimpleNamespace(last_beat=0.0)
    forwarder = _Forwarder(Sender(), 0.005)  # type: ignore[arg-type]
    forwarder.start(ctx)  # type: ignore[arg-type]
    ctx.last_beat = 1.0  # the first beat's send fails
    wait_until(lambda: calls >= 1, "the failing send")
    ctx.last_beat = 2.0
    wait_until(lambda: sent, "a later beat to be forwarded")
    forwarder.close()
    assert sent[0] == ("beat",)
