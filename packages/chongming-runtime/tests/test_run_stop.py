"""Stop: request -> graceful window -> fallback (§4.1, §4.4, §4.5, R3, R7)."""

from __future__ import annotations

import threading
import time

from chongming_core import (
    FailureKind,
    FakeClock,
    FixedBackoff,
    RetryPolicy,
    TaskCancelled,
    TaskStatus,
)
from chongming_runtime import TaskContext, TaskRun
from run_helpers import path, st

S = TaskStatus
RUNNING_PATH = [(S.PENDING, S.QUEUED), (S.QUEUED, S.STARTING), (S.STARTING, S.RUNNING)]


def cooperative(entered: threading.Event) -> object:
    def body(ctx: TaskContext) -> None:
        entered.set()
        while True:
            ctx.checkpoint()
            time.sleep(0.001)  # a slice of work

    return body


def test_a_cooperative_stop_ends_stopped_with_kind_cancelled_not_retryable() -> None:
    entered = threading.Event()
    run = TaskRun(
        cooperative(entered),  # type: ignore[arg-type]
        retry=RetryPolicy(max_attempts=3, backoff=FixedBackoff(0)),
    )
    run.start()
    assert entered.wait(10)
    assert run.stop(reason="发布窗口") is True
    outcome = run.wait(10)
    assert outcome.status is S.STOPPED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.CANCELLED
    assert outcome.failure.retryable is False
    assert "发布窗口" in outcome.failure.message
    assert path(run) == [*RUNNING_PATH, (S.RUNNING, S.STOPPING), (S.STOPPING, S.STOPPED)]
    assert [t.trigger for t in run.transitions[-2:]] == ["control:stop", "runtime:stopped"]
    assert run.transitions[-2].reason == "发布窗口"
    assert len(outcome.attempts) == 1  # a stop is never retried
    assert run.stop() is False  # already terminal


def test_stop_never_blocks_and_an_uncooperative_thread_ends_lost() -> None:
    clock = FakeClock()
    entered = threading.Event()
    release = threading.Event()

    def body(ctx: TaskContext) -> str:
        entered.set()
        release.wait(30)  # never calls checkpoint()
        return "late"

    run = TaskRun(body, clock=clock, graceful_stop=5)
    run.start()
    assert entered.wait(10)
    run.stop(reason="deploy")  # returns at once although the body ignores it
    assert st(run) is S.STOPPING
    clock.advance(4.9)
    assert st(run) is S.STOPPING
    clock.advance(0.1)  # the graceful window ends
    assert st(run) is S.LOST
    outcome = run.wait(1)
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.LOST
    assert outcome.failure.retryable is True
    assert "graceful window of 5s" in outcome.failure.message
    assert "abandoned" in outcome.failure.message
    assert path(run) == [*RUNNING_PATH, (S.RUNNING, S.STOPPING), (S.STOPPING, S.LOST)]
    release.set()  # the abandoned thread returns later: the result is ignored
    deadline = time.monotonic() + 10
    while any(t.name.startswith(f"chongming-task-{run.task_id}") for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the abandoned thread never returned"
        threading.Event().wait(0.01)  # a thread that returned parks under another name
    assert st(run) is S.LOST
    assert run.snapshot.outcome is None


def test_a_body_that_checks_is_stop_requested_and_returns_succeeds_with_its_value() -> None:
    entered = threading.Event()

    def worker(ctx: TaskContext) -> int:
        processed = 0
        while True:
            try:
                ctx.checkpoint()
            except TaskCancelled:
                break  # R7: the race-free form
            processed += 1
            entered.set()
            if ctx.is_stop_requested:
                break
        return processed

    run = TaskRun(worker)
    run.start()
    assert entered.wait(10)
    run.stop(reason="wrap up")
    outcome = run.wait(10)
    assert outcome.status is S.SUCCEEDED
    assert isinstance(outcome.value, int)
    assert outcome.value >= 1
    assert path(run)[-2:] == [(S.RUNNING, S.STOPPING), (S.STOPPING, S.SUCCEEDED)]


def test_a_stop_before_start_is_immediate_with_no_intermediate_state() -> None:
    calls: list[int] = []
    run = TaskRun(lambda ctx: calls.append(1))
    assert run.stop(reason="never mind") is True
    assert st(run) is S.STOPPED
    assert path(run) == [(S.PENDING, S.STOPPED)]
    assert run.transitions[0].trigger == "control:stop"
    assert run.wait(1).failure is not None
    assert calls == []


def test_a_stop_of_a_queued_task_is_immediate() -> None:
    run = TaskRun(lambda ctx: 1, admission=lambda r: None)
    run.start()
    assert st(run) is S.QUEUED
    run.stop()
    assert path(run) == [(S.PENDING, S.QUEUED), (S.QUEUED, S.STOPPED)]
    run.dispatch()  # nothing left to start
    assert st(run) is S.STOPPED


def test_a_stop_during_retry_wait_is_immediate_and_cancels_the_backoff() -> None:
    clock = FakeClock()

    def body(ctx: TaskContext) -> None:
        raise RuntimeError("flaky")

    run = TaskRun(body, clock=clock, retry=RetryPolicy(max_attempts=3, backoff=FixedBackoff(60)))
    run.start()
    done = threading.Event()
    for _ in range(1000):
        if run.status is S.RETRY_WAIT:
            break
        done.wait(0.01)
    assert st(run) is S.RETRY_WAIT
    run.stop(reason="give up")
    assert st(run) is S.STOPPED
    assert path(run)[-1] == (S.RETRY_WAIT, S.STOPPED)
    clock.advance(120)  # the backoff timer was cancelled: no new attempt
    assert st(run) is S.STOPPED
    assert run.snapshot.attempt == 1


def test_stopping_a_task_paused_in_place_goes_through_running_and_stopping() -> None:
    entered = threading.Event()
    run = TaskRun(cooperative(entered))  # type: ignore[arg-type]
    run.start()
    assert entered.wait(10)
    assert run.pause(timeout=10) is True
    run.stop(reason="stop while paused")
    outcome = run.wait(10)
    assert outcome.status is S.STOPPED
    assert path(run)[-5:] == [
        (S.RUNNING, S.PAUSING),
        (S.PAUSING, S.PAUSED),
        (S.PAUSED, S.RUNNING),
        (S.RUNNING, S.STOPPING),
        (S.STOPPING, S.STOPPED),
    ]
    assert run.transitions[-3].trigger == "control:stop"  # the trigger names the stop (R3)


def test_except_exception_around_the_loop_does_not_swallow_the_stop() -> None:
    entered = threading.Event()
    swallowed: list[BaseException] = []

    def body(ctx: TaskContext) -> str:
        try:
            while True:
                ctx.checkpoint()
                entered.set()
                time.sleep(0.001)  # a slice of work
        except Exception as exc:  # meant for business errors only
            swallowed.append(exc)
            return "swallowed"

    run = TaskRun(body)
    run.start()
    assert entered.wait(10)
    run.stop()
    outcome = run.wait(10)
    assert outcome.status is S.STOPPED
    assert swallowed == []


def test_a_stop_while_starting_skips_the_body() -> None:
    calls: list[int] = []
    holder: list[TaskRun] = []

    class StopOnStarting:
        def on_transition(self, run: TaskRun, transition: object, snapshot: object) -> None:
            if getattr(transition, "to_status", None) is S.STARTING:
                run.stop(reason="changed my mind")

        def on_side_update(self, run: TaskRun, snapshot: object) -> None:
            pass

    run = TaskRun(lambda ctx: calls.append(1), listeners=[StopOnStarting()])
    holder.append(run)
    run.start()
    outcome = run.wait(10)
    assert outcome.status is S.STOPPED
    assert calls == []
    assert path(run) == [
        (S.PENDING, S.QUEUED),
        (S.QUEUED, S.STARTING),
        (S.STARTING, S.STOPPING),
        (S.STOPPING, S.STOPPED),
    ]


def test_a_body_raising_while_stopping_fails_without_retry() -> None:
    entered = threading.Event()

    def body(ctx: TaskContext) -> None:
        try:
            while True:
                ctx.checkpoint()
                entered.set()
                time.sleep(0.001)  # a slice of work
        finally:
            if ctx.is_stop_requested:
                raise RuntimeError("cleanup failed")

    run = TaskRun(body, retry=RetryPolicy(max_attempts=3, backoff=FixedBackoff(0)))
    run.start()
    assert entered.wait(10)
    run.stop()
    outcome = run.wait(10)
    assert outcome.status is S.FAILED
    assert path(run)[-1] == (S.STOPPING, S.FAILED)
    assert len(outcome.attempts) == 1


def test_cancel_before_start_is_immediate() -> None:
    run = TaskRun(lambda ctx: 1, admission=lambda r: None)
    run.start()
    assert run.cancel(reason="upstream failed") is True
    outcome = run.wait(1)
    assert outcome.status is S.CANCELLED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.CANCELLED
    assert outcome.failure.retryable is False
    assert path(run) == [(S.PENDING, S.QUEUED), (S.QUEUED, S.CANCELLED)]
    assert run.cancel() is False


def test_cancel_of_a_running_task_unwinds_it_to_cancelled_without_stopping() -> None:
    entered = threading.Event()
    run = TaskRun(
        cooperative(entered),  # type: ignore[arg-type]
        retry=RetryPolicy(max_attempts=3, backoff=FixedBackoff(0)),
    )
    run.start()
    assert entered.wait(10)
    assert run.cancel(reason="fail_fast") is True
    outcome = run.wait(10)
    assert outcome.status is S.CANCELLED
    assert path(run)[-1] == (S.RUNNING, S.CANCELLED)
    assert S.STOPPING not in {t.to_status for t in run.transitions}
    assert len(outcome.attempts) == 1  # never retried


def test_cancel_of_a_task_paused_in_place_goes_back_to_running_first() -> None:
    entered = threading.Event()
    run = TaskRun(cooperative(entered))  # type: ignore[arg-type]
    run.start()
    assert entered.wait(10)
    assert run.pause(timeout=10)
    run.cancel(reason="fail_fast")
    assert run.wait(10).status is S.CANCELLED
    assert path(run)[-2:] == [(S.PAUSED, S.RUNNING), (S.RUNNING, S.CANCELLED)]
    assert run.transitions[-2].trigger == "orchestrator:cancel"
