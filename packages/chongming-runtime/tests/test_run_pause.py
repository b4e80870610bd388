"""Pause and resume (§4.2, §4.3, R3): confirmed only at a checkpoint, no timeouts while paused."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from chongming_core import (
    ConfigurationError,
    FailureKind,
    FakeClock,
    FixedBackoff,
    RetryPolicy,
    SystemClock,
    TaskStatus,
    Timeout,
)
from chongming_runtime import InlineExecutor, TaskContext, TaskRun
from chongming_runtime.testing import spin, wait_until
from run_helpers import path, st, stop_flag, timeout_kind

S = TaskStatus


def looping(entered: threading.Event) -> Callable[[TaskContext], None]:
    def body(ctx: TaskContext) -> None:
        entered.set()
        spin(ctx)  # a slice of work at a time, a checkpoint between slices

    return body


def in_thread(fn: Callable[[], bool]) -> tuple[threading.Thread, list[bool]]:
    results: list[bool] = []
    thread = threading.Thread(target=lambda: results.append(fn()), daemon=True)
    thread.start()
    return thread, results


def test_pause_returns_true_only_once_suspended_and_resume_goes_back_to_running() -> None:
    entered = threading.Event()
    run = TaskRun(looping(entered))
    run.start()
    assert entered.wait(10)
    assert run.pause(timeout=10) is True
    assert st(run) is S.PAUSED
    assert run.snapshot.paused_in_place is True
    assert [t.trigger for t in run.transitions[-2:]] == ["control:pause", "runtime:paused"]
    assert run.resume() is True
    assert st(run) is S.RUNNING
    assert run.transitions[-1].trigger == "control:resume"
    assert run.resume() is False  # nothing to resume any more
    run.stop()
    run.wait(10)
    assert path(run)[3:7] == [
        (S.RUNNING, S.PAUSING),
        (S.PAUSING, S.PAUSED),
        (S.PAUSED, S.RUNNING),
        (S.RUNNING, S.STOPPING),
    ]


def test_the_paused_body_really_waits_at_its_checkpoint() -> None:
    counter = [0]
    entered = threading.Event()

    def body(ctx: TaskContext) -> None:
        while True:
            ctx.checkpoint()
            counter[0] += 1
            entered.set()
            time.sleep(0.001)  # a slice of work

    run = TaskRun(body)
    run.start()
    assert entered.wait(10)
    assert run.pause(timeout=10)
    frozen = counter[0]
    threading.Event().wait(0.05)
    assert counter[0] == frozen
    run.resume()
    wait_until(lambda: counter[0] > frozen)
    run.stop()
    assert run.wait(10).status is S.STOPPED


def test_a_pause_window_without_checkpoint_is_aborted_and_returns_false() -> None:
    clock = FakeClock()
    entered = threading.Event()
    release = threading.Event()

    def body(ctx: TaskContext) -> str:
        entered.set()
        release.wait(30)  # busy, no checkpoint
        return "done"

    run = TaskRun(body, clock=clock, pause_timeout=5)
    run.start()
    assert entered.wait(10)
    thread, results = in_thread(run.pause)
    wait_until(lambda: run.status is S.PAUSING)
    clock.advance(4.9)
    assert st(run) is S.PAUSING
    clock.advance(0.1)
    thread.join(10)
    assert results == [False]
    assert st(run) is S.RUNNING
    assert run.transitions[-1].trigger == "runtime:pause_aborted"
    assert path(run)[-2:] == [(S.RUNNING, S.PAUSING), (S.PAUSING, S.RUNNING)]
    assert not run._attempt.control.pause_requested  # type: ignore[union-attr]
    release.set()
    assert run.wait(10).value == "done"


def test_a_body_that_returns_while_pausing_aborts_the_pause_then_succeeds() -> None:
    clock = FakeClock()
    entered = threading.Event()
    release = threading.Event()

    def body(ctx: TaskContext) -> int:
        entered.set()
        release.wait(30)
        return 7

    run = TaskRun(body, clock=clock)
    run.start()
    assert entered.wait(10)
    thread, results = in_thread(lambda: run.pause(timeout=60))
    wait_until(lambda: run.status is S.PAUSING)
    release.set()
    thread.join(10)
    assert results == [False]
    outcome = run.wait(10)
    assert outcome.value == 7
    assert path(run)[-3:] == [
        (S.RUNNING, S.PAUSING),
        (S.PAUSING, S.RUNNING),
        (S.RUNNING, S.SUCCEEDED),
    ]


def test_resume_while_pausing_withdraws_the_pause() -> None:
    entered = threading.Event()
    release = threading.Event()

    def body(ctx: TaskContext) -> str:
        entered.set()
        release.wait(30)
        ctx.checkpoint()  # the pause was withdrawn: passes
        return "ok"

    run = TaskRun(body, clock=FakeClock())
    run.start()
    assert entered.wait(10)
    thread, results = in_thread(run.pause)
    wait_until(lambda: run.status is S.PAUSING)
    assert run.resume() is True
    thread.join(10)
    assert results == [False]
    assert run.transitions[-1].trigger == "control:resume"
    release.set()
    assert run.wait(10).value == "ok"


def test_pause_returns_within_its_window_when_the_clocks_timer_is_late() -> None:
    # a clock of its own, whose one timer thread another callback keeps busy (a slow
    # listener told on that thread, say): the window's timer cannot fire on time
    clock = SystemClock()
    entered = threading.Event()
    release = threading.Event()

    def body(ctx: TaskContext) -> str:
        entered.set()
        release.wait(30)  # busy, no checkpoint
        return "done"

    run = TaskRun(body, clock=clock)
    run.start()
    assert entered.wait(10)
    busy = threading.Event()
    unblock = threading.Event()

    def keep_busy() -> None:
        busy.set()
        unblock.wait(20)

    clock.call_later(0, keep_busy)
    assert busy.wait(10)
    began = time.monotonic()
    try:
        assert run.pause(timeout=0.2) is False
        elapsed = time.monotonic() - began
    finally:
        unblock.set()
    assert elapsed < 5, f"pause(timeout=0.2) returned after {elapsed:.1f}s"
    assert st(run) is S.RUNNING
    assert run.transitions[-1].trigger == "runtime:pause_aborted"
    assert not run._attempt.control.pause_requested  # type: ignore[union-attr]
    release.set()
    assert run.wait(10).value == "done"


def test_a_pause_that_joins_a_longer_one_returns_within_its_own_window() -> None:
    entered = threading.Event()
    release = threading.Event()

    def body(ctx: TaskContext) -> None:
        entered.set()
        release.wait(30)  # busy, no checkpoint, until the test lets it reach one
        spin(ctx)

    run = TaskRun(body)
    run.start()
    assert entered.wait(10)
    first, first_result = in_thread(lambda: run.pause(timeout=20))
    wait_until(lambda: run.status is S.PAUSING)
    began = time.monotonic()
    try:
        assert run.pause(timeout=0.2) is False  # not confirmed within its window
        elapsed = time.monotonic() - began
        assert st(run) is S.PAUSING  # the first pause goes on, under its own window
    finally:
        release.set()
    assert elapsed < 5, f"pause(timeout=0.2) returned after {elapsed:.1f}s"
    first.join(10)
    assert first_result == [True]
    assert st(run) is S.PAUSED
    assert [t.to_status for t in run.transitions].count(S.PAUSING) == 1
    run.stop()
    assert run.wait(10).status is S.STOPPED


@pytest.mark.parametrize("timeout", [0, -1, float("nan"), float("inf"), True, "5"])
def test_a_pause_window_must_be_a_finite_number_of_seconds(timeout: object) -> None:
    entered = threading.Event()
    run = TaskRun(looping(entered))
    run.start()
    assert entered.wait(10)
    before = run.transitions
    with pytest.raises(ConfigurationError, match="pause timeout must be > 0 seconds and finite"):
        run.pause(timeout=timeout)  # type: ignore[arg-type]
    assert run.transitions == before
    assert st(run) is S.RUNNING
    run.stop()
    assert run.wait(10).status is S.STOPPED


def test_inline_executor_cannot_pause_and_says_so() -> None:
    entered = threading.Event()
    release = threading.Event()

    def body(ctx: TaskContext) -> str:
        entered.set()
        release.wait(30)
        ctx.checkpoint()
        return "ok"

    run = TaskRun(body, executor=InlineExecutor())
    starter = threading.Thread(target=run.start, daemon=True)
    starter.start()
    assert entered.wait(10)
    before = run.transitions
    assert run.pause(timeout=1) is False
    assert run.transitions == before
    release.set()
    starter.join(10)
    assert st(run) is S.SUCCEEDED


def test_pause_before_start_holds_nothing_and_resumes_to_queued_then_starts() -> None:
    admitted: list[TaskRun] = []
    run = TaskRun(lambda ctx: "ran", admission=admitted.append)
    run.start()
    assert st(run) is S.QUEUED
    assert run.pause() is True  # immediate: nothing is running
    assert st(run) is S.PAUSED
    assert run.snapshot.paused_in_place is False
    assert run.resume() is True
    assert st(run) is S.QUEUED
    assert len(admitted) == 2  # the scheduler is asked again
    run.dispatch()
    assert run.wait(10).value == "ran"
    assert path(run) == [
        (S.PENDING, S.QUEUED),
        (S.QUEUED, S.PAUSED),
        (S.PAUSED, S.QUEUED),
        (S.QUEUED, S.STARTING),
        (S.STARTING, S.RUNNING),
        (S.RUNNING, S.SUCCEEDED),
    ]


def test_pause_during_retry_wait_cancels_the_backoff_and_resume_restarts() -> None:
    clock = FakeClock()
    attempts: list[int] = []

    def body(ctx: TaskContext) -> str:
        attempts.append(ctx.attempt)
        if ctx.attempt == 1:
            raise RuntimeError("first fails")
        return "second"

    run = TaskRun(body, clock=clock, retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(30)))
    run.start()
    wait_until(lambda: run.status is S.RETRY_WAIT)
    assert run.pause() is True
    clock.advance(60)  # the backoff would have fired by now
    assert st(run) is S.PAUSED
    assert attempts == [1]
    run.resume()
    assert run.wait(10).value == "second"
    assert path(run)[3:] == [
        (S.RUNNING, S.RETRY_WAIT),
        (S.RETRY_WAIT, S.PAUSED),
        (S.PAUSED, S.QUEUED),
        (S.QUEUED, S.STARTING),
        (S.STARTING, S.RUNNING),
        (S.RUNNING, S.SUCCEEDED),
    ]


def test_no_timeout_fires_while_paused() -> None:
    clock = FakeClock()
    entered = threading.Event()
    run = TaskRun(looping(entered), clock=clock, timeout=Timeout(start=1, per_attempt=4, idle=3))
    run.start()
    assert entered.wait(10)
    assert run.pause(timeout=10)
    clock.advance(100)  # idle (3s), per-attempt (4s) and start (1s) would all have fired
    assert st(run) is S.PAUSED
    assert timeout_kind(run) is None
    assert not stop_flag(run)
    run.stop()
    outcome = run.wait(10)
    assert outcome.status is S.STOPPED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.CANCELLED


def test_per_attempt_counts_running_time_only_the_remainder_is_kept_across_a_pause() -> None:
    clock = FakeClock()
    entered = threading.Event()
    run = TaskRun(looping(entered), clock=clock, timeout=Timeout(per_attempt=10))
    run.start()
    assert entered.wait(10)
    clock.advance(2)  # 2s of running time
    assert run.pause(timeout=10)
    clock.advance(100)
    run.resume()
    clock.advance(7.9)  # 2 + 7.9 = 9.9s of running time
    assert timeout_kind(run) is None
    assert st(run) is S.RUNNING
    clock.advance(0.1)  # 10s of running time: the per-attempt timeout fires
    outcome = run.wait(10)
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_ATTEMPT


def test_elapsed_is_the_running_time_the_attempt_timeout_counts() -> None:
    """ELAPSED and the per-attempt limit agree on what running time is: a pause in place
    counts in neither, and is shown as paused time instead (D88)."""
    clock = FakeClock()
    entered = threading.Event()
    run = TaskRun(looping(entered), clock=clock, timeout=Timeout(per_attempt=10))
    run.start()
    assert entered.wait(10)
    clock.advance(2)
    assert run.pause(timeout=10)
    clock.advance(100)
    assert run.snapshot.elapsed(clock.now()) == 2.0
    assert run.snapshot.paused_for(clock.now()) == 100.0
    run.resume()
    clock.advance(8)  # the per-attempt timeout fires at 10 s of running time
    outcome = run.wait(10)
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_ATTEMPT
    ended = outcome.snapshot
    assert ended.elapsed(clock.now()) == 10.0
    assert ended.paused_for(clock.now()) == 100.0


def test_a_stopped_paused_task_ran_only_until_its_pause() -> None:
    clock = FakeClock()
    entered = threading.Event()
    run = TaskRun(looping(entered), clock=clock)
    run.start()
    assert entered.wait(10)
    clock.advance(3)
    assert run.pause(timeout=10)
    clock.advance(50)
    run.stop(reason="not needed")
    outcome = run.wait(10)
    assert outcome.status is S.STOPPED
    assert outcome.snapshot.elapsed(clock.now()) == 3.0
    assert outcome.snapshot.attempts[-1].paused_seconds == 50.0
