"""The `Scheduler` alone: admission, dispatch and accounting of runs it knows only as
`SchedulableRun` (guide §8.4, §8.8; D37, D38, D39, D54; R4)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

import pytest

from chongming_core import ACTIVE_STATUSES, StateMachine, TaskSnapshot, TaskStatus
from chongming_runtime.controller._scheduler import Scheduler
from chongming_runtime.testing import wait_until

S = TaskStatus
WAIT = 10.0


class FakeRun:
    """A run that records what the scheduler asks of it (a `SchedulableRun`)."""

    def __init__(
        self,
        task_id: str,
        *,
        priority: int = 0,
        tags: Iterable[str] = (),
        bucket: int | None = None,
        started: list[str] | None = None,
    ) -> None:
        self.task_id = task_id
        self._snapshot = StateMachine.create(
            task_id, "t", priority=priority, tags=tags, bucket=bucket
        ).snapshot
        self.status = S.QUEUED
        self.admitted = False
        self.started = started if started is not None else []
        self.stops: list[tuple[str | None, str | None]] = []
        self.finish_holds = 0
        self.body_running = False  # an abandoned body still executing (D54)
        self.when_returns: list[Callable[[], None]] = []
        self.kick_error: BaseException | None = None

    def stop(self, reason: str | None = None, *, actor: str | None = None) -> bool:
        self.stops.append((reason, actor))
        self.status = S.STOPPED
        return True

    def scheduling_snapshot(self) -> TaskSnapshot:
        return self._snapshot

    def admit_now(self) -> bool:
        if self.status is not S.QUEUED:
            return False
        self.admitted = True
        return True

    def kick(self) -> None:
        if self.kick_error is not None:
            raise self.kick_error
        self.status = S.RUNNING
        self.started.append(self.task_id)

    def needs_slot(self) -> tuple[TaskStatus, bool]:
        if self.status is S.QUEUED:
            return self.status, self.admitted
        if self.body_running:
            return self.status, True
        return self.status, self.status in ACTIVE_STATUSES

    def when_body_returns(self, callback: Callable[[], None]) -> bool:
        if not self.body_running:
            return False
        self.when_returns.append(callback)
        return True

    def hold_finish(self) -> Callable[[], None]:
        self.finish_holds += 1
        return lambda: None

    def end(self, status: TaskStatus, scheduler: Scheduler) -> None:
        """Move to `status` and have `scheduler` account for it, as a controller does."""
        self.status = status
        self.admitted = False
        scheduler.account(self, self.task_id, ended=status.is_terminal, keep_one=False)


class Runs:
    """The runs a test's scheduler finds by id, and the order they started in."""

    def __init__(self) -> None:
        self.by_id: dict[str, FakeRun] = {}
        self.started: list[str] = []

    def make(
        self,
        task_id: str,
        *,
        priority: int = 0,
        tags: Iterable[str] = (),
        bucket: int | None = None,
    ) -> FakeRun:
        run = FakeRun(task_id, priority=priority, tags=tags, bucket=bucket, started=self.started)
        self.by_id[task_id] = run
        return run


@pytest.fixture
def runs() -> Runs:
    return Runs()


def _scheduler(
    runs: Runs,
    max_parallel: int,
    *,
    max_per_bucket: int | None = None,
    limits: dict[str, int] | None = None,
) -> Scheduler:
    return Scheduler(
        max_parallel,
        limits=limits,
        max_per_bucket=max_per_bucket,
        find=runs.by_id.get,
        actor="node-1",
    )


def test_admitted_runs_start_up_to_capacity_then_by_priority_and_arrival(runs: Runs) -> None:
    scheduler = _scheduler(runs, 1)
    first = runs.make("first")
    scheduler.admit(first)
    for task_id, priority in (("low-1", 0), ("high", 5), ("low-2", 0)):
        scheduler.admit(runs.make(task_id, priority=priority))
    assert runs.started == ["first"]
    assert scheduler.active == 1
    assert scheduler.queued_ids() == ["high", "low-1", "low-2"]
    first.end(S.SUCCEEDED, scheduler)
    assert runs.started == ["first", "high"]
    runs.by_id["high"].end(S.FAILED, scheduler)
    runs.by_id["low-1"].end(S.SUCCEEDED, scheduler)
    assert runs.started == ["first", "high", "low-1", "low-2"]
    assert scheduler.queued_ids() == []


def test_a_full_bucket_or_resource_is_scanned_past_and_its_task_keeps_its_place(
    runs: Runs,
) -> None:
    scheduler = _scheduler(runs, 4, max_per_bucket=1, limits={"gpu": 1})
    for task_id, tags, bucket in (
        ("b3-first", [], 3),
        ("b3-second", [], 3),
        ("gpu-first", ["gpu"], None),
        ("gpu-second", ["gpu"], None),
        ("b4", [], 4),
    ):
        scheduler.admit(runs.make(task_id, tags=tags, bucket=bucket))
    assert runs.started == ["b3-first", "gpu-first", "b4"]
    assert scheduler.active_in_bucket(3) == 1
    assert scheduler.queued_ids() == ["b3-second", "gpu-second"]
    runs.by_id["gpu-first"].end(S.SUCCEEDED, scheduler)
    assert runs.started[-1] == "gpu-second"
    runs.by_id["b3-first"].end(S.SUCCEEDED, scheduler)
    assert runs.started[-1] == "b3-second"


def test_room_says_how_many_more_could_start_for_tags_and_a_bucket(runs: Runs) -> None:
    scheduler = _scheduler(runs, 4, max_per_bucket=2, limits={"gpu": 1})
    assert scheduler.room() == 4
    scheduler.admit(runs.make("a", bucket=7))
    scheduler.admit(runs.make("g", tags=["gpu"]))
    assert scheduler.room() == 2
    assert scheduler.room(bucket=7) == 1  # the bucket leaves less than the slots
    assert scheduler.room(bucket=8) == 2
    assert scheduler.room(["gpu"]) == 0  # the one gpu unit is held
    assert scheduler.room(["cpu"], bucket=7) == 1  # an unlimited tag takes only slots


def test_a_run_that_left_the_queue_before_its_turn_is_not_started(runs: Runs) -> None:
    scheduler = _scheduler(runs, 1)
    holder, waiting = runs.make("holder"), runs.make("waiting")
    scheduler.admit(holder)
    scheduler.admit(waiting)
    waiting.end(S.PAUSED, scheduler)  # paused before its start: out of the queue (D38)
    assert scheduler.queued_ids() == []
    holder.end(S.SUCCEEDED, scheduler)
    assert runs.started == ["holder"]
    assert scheduler.active == 0


def test_accounting_reads_the_state_now_not_the_one_told(runs: Runs) -> None:
    """A late `paused` of a run resumed and started meanwhile keeps its slot (D38)."""
    scheduler = _scheduler(runs, 1)
    run, behind = runs.make("run"), runs.make("behind")
    scheduler.admit(run)
    scheduler.admit(behind)
    # told "paused" while it runs again: its state now (running) keeps the slot
    scheduler.account(run, "run", ended=False, keep_one=False)
    assert scheduler.active == 1
    assert runs.started == ["run"]
    assert scheduler.queued_ids() == ["behind"]


def test_an_abandoned_body_keeps_its_slot_until_it_returns(runs: Runs) -> None:
    scheduler = _scheduler(runs, 1)
    lost, behind = runs.make("lost"), runs.make("behind")
    scheduler.admit(lost)
    scheduler.admit(behind)
    lost.body_running = True
    lost.end(S.LOST, scheduler)  # its body still executes (D54)
    assert runs.started == ["lost"]
    assert scheduler.active == 1
    assert lost.finish_holds == 0  # accounted on this thread: nothing posted
    lost.body_running = False
    (returned,) = lost.when_returns
    returned()
    assert runs.started == ["lost", "behind"]


def test_a_run_admitted_after_close_is_stopped_and_never_started(runs: Runs) -> None:
    scheduler = _scheduler(runs, 2)
    scheduler.close("node going down")
    late = runs.make("late")
    scheduler.admit(late)
    assert late.stops == [("node going down", "node-1")]  # R4
    assert runs.started == []
    assert scheduler.queued_ids() == []


def test_one_run_that_fails_to_start_does_not_keep_the_others_from_starting(
    runs: Runs,
) -> None:
    scheduler = _scheduler(runs, 3)
    broken, fine = runs.make("broken"), runs.make("fine")
    broken.kick_error = RuntimeError("cannot start")
    scheduler.dispatch([broken, fine])
    assert runs.started == ["fine"]


def test_runs_after_an_interrupted_start_are_started_elsewhere(runs: Runs) -> None:
    scheduler = _scheduler(runs, 3)
    first, second = runs.make("first"), runs.make("second")
    first.kick_error = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt):
        scheduler.dispatch([first, second])
    wait_until(lambda: runs.started == ["second"], "the run after the interrupted one")


def test_a_finish_told_while_another_thread_holds_the_lock_is_posted_to_it(
    runs: Runs,
) -> None:
    """The finishing thread never waits for the lock (D39); the holder accounts for it,
    and the run let in starts once the lock is let go."""
    scheduler = _scheduler(runs, 1)
    done, behind = runs.make("done"), runs.make("behind")
    scheduler.admit(done)
    scheduler.admit(behind)
    held, let_go = threading.Event(), threading.Event()

    def hold() -> None:
        with scheduler.lock:
            held.set()
            assert let_go.wait(WAIT)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(WAIT)
    done.end(S.SUCCEEDED, scheduler)  # returns at once
    assert done.finish_holds == 1  # its wait() waits for the posted accounting
    assert runs.started == ["done"]
    let_go.set()
    holder.join(WAIT)
    wait_until(lambda: runs.started == ["done", "behind"], "the run let in by the finish")
    assert scheduler.active == 1
