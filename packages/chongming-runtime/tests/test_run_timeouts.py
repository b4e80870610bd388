"""Timeouts (§6, R1, R2): three independent deadlines on the clock, never a status."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from chongming_core import FailureKind, FakeClock, FixedBackoff, RetryPolicy, TaskStatus, Timeout
from chongming_runtime import TaskContext, TaskRun
from run_helpers import path, st, stop_flag, timeout_kind

S = TaskStatus


def cooperative(entered: threading.Event) -> Callable[[TaskContext], None]:
    def body(ctx: TaskContext) -> None:
        entered.set()
        while True:
            ctx.checkpoint()
            time.sleep(0.001)  # a slice of work

    return body


def test_a_per_attempt_timeout_requests_a_stop_without_entering_stopping() -> None:
    clock = FakeClock()
    entered = threading.Event()
    release = threading.Event()
    observed: list[TaskStatus] = []

    def body(ctx: TaskContext) -> None:
        entered.set()
        release.wait(30)
        observed.append(run.status)
        assert ctx.is_stop_requested
        ctx.checkpoint()  # raises: the timeout set the stop flag

    run = TaskRun(body, clock=clock, timeout=Timeout(per_attempt=10))
    run.start()
    assert entered.wait(10)
    clock.advance(9.9)
    assert not stop_flag(run)
    clock.advance(0.1)
    assert stop_flag(run)
    assert st(run) is S.RUNNING  # R2: no `stopping`, no timeout status
    release.set()
    outcome = run.wait(10)
    assert observed == [S.RUNNING]
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_ATTEMPT
    assert outcome.failure.retryable is True
    assert "per-attempt timeout of 10s" in outcome.failure.message
    assert path(run)[-1] == (S.RUNNING, S.FAILED)
    assert S.STOPPING not in {t.to_status for t in run.transitions}


def test_a_timeout_is_retried_through_retry_wait() -> None:
    clock = FakeClock()
    entered = threading.Event()
    run = TaskRun(
        cooperative(entered),
        clock=clock,
        timeout=Timeout(per_attempt=5),
        retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(0)),
    )
    run.start()
    assert entered.wait(10)
    clock.advance(5)
    for _ in range(5000):
        snap = run.snapshot  # read under the run's lock: status and timers agree
        if snap.attempt == 2 and snap.status is S.RUNNING:
            break
        threading.Event().wait(0.002)
    assert run.snapshot.attempt == 2
    clock.advance(5)
    outcome = run.wait(10)
    assert outcome.status is S.FAILED
    assert [a.failure.kind for a in outcome.attempts if a.failure] == [
        FailureKind.TIMEOUT_ATTEMPT,
        FailureKind.TIMEOUT_ATTEMPT,
    ]
    assert (S.RUNNING, S.RETRY_WAIT) in path(run)


def test_idle_measures_the_time_since_the_last_checkpoint_and_rearms_after_beats() -> None:
    clock = FakeClock()
    entered = threading.Event()
    step = threading.Event()
    stepped = threading.Event()

    def body(ctx: TaskContext) -> None:
        entered.set()
        while True:
            step.wait(30)
            step.clear()
            ctx.checkpoint()
            stepped.set()

    run = TaskRun(body, clock=clock, timeout=Timeout(idle=5))
    run.start()
    assert entered.wait(10)
    for _ in range(3):  # beat every 4s: never 5s of silence
        clock.advance(4)
        stepped.clear()
        step.set()
        assert stepped.wait(10)
    assert timeout_kind(run) is None
    clock.advance(4.9)
    assert timeout_kind(run) is None
    clock.advance(0.1)  # 5s since the last checkpoint
    assert timeout_kind(run) is FailureKind.TIMEOUT_IDLE
    assert st(run) is S.RUNNING
    step.set()
    outcome = run.wait(10)
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_IDLE
    assert "no checkpoint() or heartbeat for 5s" in outcome.failure.message


def test_heartbeat_beat_keeps_an_idle_timeout_away_and_progress_does_not() -> None:
    clock = FakeClock()
    entered = threading.Event()
    step = threading.Event()
    stepped = threading.Event()
    actions: list[str] = []

    def body(ctx: TaskContext) -> None:
        entered.set()
        while True:
            step.wait(30)
            step.clear()
            if ctx.is_stop_requested:
                return
            action = actions.pop(0)
            if action == "beat":
                ctx.heartbeat.beat()
            else:
                ctx.progress(1)
            stepped.set()

    run = TaskRun(body, clock=clock, timeout=Timeout(idle=5))
    run.start()
    assert entered.wait(10)
    actions.extend(["beat", "progress"])
    clock.advance(4)
    stepped.clear()
    step.set()
    assert stepped.wait(10)
    clock.advance(4)  # 4s after the beat: fine
    assert timeout_kind(run) is None
    stepped.clear()
    step.set()  # progress only
    assert stepped.wait(10)
    clock.advance(1)  # 5s after the beat: progress did not count
    assert timeout_kind(run) is FailureKind.TIMEOUT_IDLE
    step.set()
    outcome = run.wait(10)
    # The body saw the stop flag and returned: the attempt still ends as the timeout's
    # failure, its value not kept (§6, R2) — only an operator's stop ends it succeeded.
    assert outcome.status is S.FAILED
    assert outcome.value is None
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_IDLE
    assert outcome.failure.message.endswith("the body then returned, and its value was not kept")


def test_an_unwinding_timeout_that_misses_the_window_ends_lost_naming_the_timeout() -> None:
    clock = FakeClock()
    entered = threading.Event()
    release = threading.Event()

    def body(ctx: TaskContext) -> None:
        entered.set()
        release.wait(30)

    run = TaskRun(body, clock=clock, timeout=Timeout(idle=3), graceful_stop=2)
    run.start()
    assert entered.wait(10)
    clock.advance(3)
    assert st(run) is S.RUNNING
    clock.advance(2)
    assert st(run) is S.LOST
    failure = run.snapshot.failure
    assert failure is not None
    assert failure.kind is FailureKind.LOST
    assert failure.retryable is True
    assert "idle timeout" in failure.message
    assert "graceful window of 2s" in failure.message
    assert path(run)[-1] == (S.RUNNING, S.LOST)
    release.set()


def test_start_timeout_before_the_task_starts_cancels_it_r1() -> None:
    clock = FakeClock()
    run = TaskRun(lambda ctx: 1, clock=clock, timeout=Timeout(start=30), admission=lambda r: None)
    run.start()
    assert st(run) is S.QUEUED
    clock.advance(29.9)
    assert st(run) is S.QUEUED
    clock.advance(0.1)
    outcome = run.wait(1)
    assert outcome.status is S.CANCELLED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_START
    assert outcome.failure.retryable is True
    assert path(run) == [(S.PENDING, S.QUEUED), (S.QUEUED, S.CANCELLED)]


def test_start_timeout_stops_counting_once_the_attempt_runs() -> None:
    clock = FakeClock()
    entered = threading.Event()
    release = threading.Event()

    def body(ctx: TaskContext) -> str:
        entered.set()
        release.wait(30)
        ctx.checkpoint()
        return "ran"

    run = TaskRun(body, clock=clock, timeout=Timeout(start=1))
    run.start()
    assert entered.wait(10)
    clock.advance(100)
    release.set()
    assert run.wait(10).value == "ran"


def test_start_timeout_while_starting_fails_through_the_normal_edge() -> None:
    clock = FakeClock()
    calls: list[int] = []

    class AdvanceOnStarting:
        def on_transition(self, run: TaskRun, transition: object, snapshot: object) -> None:
            if getattr(transition, "to_status", None) is S.STARTING:
                clock.advance(10)  # the launch is slow: the start timeout expires meanwhile

        def on_side_update(self, run: TaskRun, snapshot: object) -> None:
            pass

    run = TaskRun(
        lambda ctx: calls.append(1),
        clock=clock,
        timeout=Timeout(start=5),
        listeners=[AdvanceOnStarting()],
    )
    run.start()
    outcome = run.wait(10)
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_START
    assert path(run)[-1] == (S.STARTING, S.FAILED)
    assert calls == []  # the body never ran


def test_the_earliest_deadline_wins() -> None:
    clock = FakeClock()
    entered = threading.Event()
    release = threading.Event()

    def body(ctx: TaskContext) -> None:
        entered.set()
        release.wait(30)
        ctx.checkpoint()

    run = TaskRun(body, clock=clock, timeout=Timeout(per_attempt=4, idle=6))
    run.start()
    assert entered.wait(10)
    clock.advance(5)  # per-attempt (4s) came first; the graceful window (5s) is still open
    assert run._attempt is not None
    assert timeout_kind(run) is FailureKind.TIMEOUT_ATTEMPT
    clock.advance(1.5)  # the idle deadline (6s) passes too, but the first expiry stands
    assert timeout_kind(run) is FailureKind.TIMEOUT_ATTEMPT
    release.set()
    outcome = run.wait(10)
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_ATTEMPT


def test_an_inline_body_past_its_graceful_window_is_not_called_lost_when_it_returns() -> None:
    """An inline body runs on the caller's own thread, inside `start()`: it cannot be
    abandoned, and its end is known before anyone is told. Past an idle timeout and its
    graceful window it ends as a body that returned after a timeout does (`failed`, kind
    `timeout_idle`), never `lost` ("may still be running") for a body that has finished."""
    from chongming_runtime.executors.inline import InlineExecutor

    clock = FakeClock()
    side: list[str] = []

    def deaf(ctx: TaskContext) -> str:
        ctx.checkpoint()
        clock.advance(61)  # past the idle limit: the stop is requested
        clock.advance(100)  # past the graceful window
        side.append("wrote the row")
        return "done"

    run = TaskRun(
        deaf, executor=InlineExecutor(), clock=clock, timeout=Timeout(idle=60), graceful_stop=5
    )
    run.start()
    outcome = run.outcome()
    assert side == ["wrote the row"]
    assert outcome.status is TaskStatus.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_IDLE
    assert "may still be running" not in outcome.failure.message

    def stopped_late(ctx: TaskContext) -> str:
        ctx.checkpoint()
        run.stop("an operator")  # from the body's own thread: the inline caller's
        clock.advance(100)  # past the graceful window
        return "value"  # returned after a stop, as a body that checks the flag does

    run = TaskRun(stopped_late, executor=InlineExecutor(), clock=clock, graceful_stop=5)
    run.start()
    assert run.outcome().status is TaskStatus.SUCCEEDED  # R7: a value after a stop counts
