"""Retries (§5): budget, retry_on / give_up_on, backoff as a timer, attempt history."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

import pytest

from chongming_core import (
    ExponentialBackoff,
    FailureKind,
    FakeClock,
    FixedBackoff,
    Jitter,
    RetryPolicy,
    TaskCancelled,
    TaskStatus,
)
from chongming_runtime import (
    CommandFailed,
    InlineExecutor,
    TaskContext,
    TaskRun,
    run_command,
    run_task,
)
from chongming_runtime.testing import wait_until
from run_helpers import path, st

S = TaskStatus


def failing(exc: BaseException, calls: list[int]) -> Callable[[TaskContext], None]:
    def body(ctx: TaskContext) -> None:
        calls.append(ctx.attempt)
        raise exc

    return body


def first_fails(calls: list[int]) -> Callable[[TaskContext], str]:
    """A body whose first attempt raises and later ones return "ok"; notes each attempt."""

    def body(ctx: TaskContext) -> str:
        calls.append(ctx.attempt)
        if ctx.attempt == 1:
            raise RuntimeError("first")
        return "ok"

    return body


def test_max_attempts_counts_the_first_try_and_keeps_the_history() -> None:
    calls: list[int] = []
    run = TaskRun(
        failing(RuntimeError("down"), calls),
        retry=RetryPolicy(max_attempts=3, backoff=FixedBackoff(0)),
        executor=InlineExecutor(),
    )
    run.start()
    outcome = run.wait(1)
    assert calls == [1, 2, 3]
    assert outcome.status is S.FAILED
    assert [a.number for a in outcome.attempts] == [1, 2, 3]
    assert [a.status for a in outcome.attempts] == [S.RETRY_WAIT, S.RETRY_WAIT, S.FAILED]
    assert all(
        a.failure is not None and a.failure.kind is FailureKind.EXCEPTION for a in outcome.attempts
    )
    assert path(run) == [
        (S.PENDING, S.QUEUED),
        (S.QUEUED, S.STARTING),
        (S.STARTING, S.RUNNING),
        (S.RUNNING, S.RETRY_WAIT),
        (S.RETRY_WAIT, S.STARTING),
        (S.STARTING, S.RUNNING),
        (S.RUNNING, S.RETRY_WAIT),
        (S.RETRY_WAIT, S.STARTING),
        (S.STARTING, S.RUNNING),
        (S.RUNNING, S.FAILED),
    ]


def test_max_attempts_one_means_no_retry() -> None:
    calls: list[int] = []
    outcome = run_task(failing(RuntimeError("x"), calls), executor=InlineExecutor())
    assert calls == [1]
    assert outcome.status is S.FAILED


def test_give_up_on_wins_over_retry_on() -> None:
    calls: list[int] = []
    policy = RetryPolicy(
        max_attempts=5, backoff=FixedBackoff(0), retry_on=(Exception,), give_up_on=(ValueError,)
    )
    outcome = run_task(failing(ValueError("bad"), calls), retry=policy, executor=InlineExecutor())
    assert calls == [1]
    assert outcome.failure is not None
    assert outcome.failure.retryable is False


def test_exceptions_outside_retry_on_are_not_retried() -> None:
    calls: list[int] = []
    policy = RetryPolicy(max_attempts=5, backoff=FixedBackoff(0), retry_on=(OSError,))
    outcome = run_task(failing(KeyError("k"), calls), retry=policy, executor=InlineExecutor())
    assert calls == [1]
    calls.clear()
    outcome = run_task(failing(OSError("io"), calls), retry=policy, executor=InlineExecutor())
    assert calls == [1, 2, 3, 4, 5]
    assert outcome.status is S.FAILED


def test_task_cancelled_is_never_retried() -> None:
    calls: list[int] = []
    policy = RetryPolicy(max_attempts=5, backoff=FixedBackoff(0), retry_on=(BaseException,))
    outcome = run_task(
        failing(TaskCancelled("raised by hand"), calls), retry=policy, executor=InlineExecutor()
    )
    assert calls == [1]
    assert outcome.status is S.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.CANCELLED
    assert outcome.failure.retryable is False


def test_the_backoff_is_a_clock_timer_in_retry_wait_with_no_thread() -> None:
    clock = FakeClock()
    calls: list[int] = []

    body = first_fails(calls)
    run = TaskRun(body, clock=clock, retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(30)))
    run.start()
    wait_until(lambda: run.status is S.RETRY_WAIT)
    snap = run.snapshot
    assert snap.retry_at == clock.now() + __import__("datetime").timedelta(seconds=30)
    assert snap.failure is not None
    assert snap.failure.message == "RuntimeError: first"
    # the attempt's thread returned (and parked under another name): nothing waits in a thread
    wait_until(lambda: not [t for t in threading.enumerate() if run.task_id in t.name])
    clock.advance(29.9)
    assert st(run) is S.RETRY_WAIT
    assert calls == [1]
    clock.advance(0.1)
    assert run.wait(10).value == "ok"
    assert calls == [1, 2]


def test_a_withdrawn_run_starts_no_attempt_when_its_retry_comes_due() -> None:
    """`withdraw` (a closing worker, before it hands the task back, D207): the backoff no
    longer starts an attempt, and the run ends by a stop, before any start."""
    clock = FakeClock()
    calls: list[int] = []
    gate = threading.Event()

    body = first_fails(calls)
    run = TaskRun(body, clock=clock, retry=RetryPolicy(max_attempts=3, backoff=FixedBackoff(30)))
    run.start()
    wait_until(lambda: run.status is S.RETRY_WAIT)
    assert run.withdraw()
    clock.advance(60)
    run.kick()  # as a scheduler's dispatch would
    assert st(run) is S.RETRY_WAIT
    assert calls == [1]
    assert run.stop("closing")
    assert run.wait(10).status is S.STOPPED
    assert calls == [1]
    assert path(run)[-2:] == [(S.RUNNING, S.RETRY_WAIT), (S.RETRY_WAIT, S.STOPPED)]

    held = TaskRun(lambda ctx: gate.wait(10), clock=clock)
    held.start()
    wait_until(lambda: held.status is S.RUNNING)
    assert not held.withdraw()  # an attempt runs: nothing to withdraw
    gate.set()
    assert held.wait(10).status is S.SUCCEEDED


def test_exponential_backoff_delays_grow() -> None:
    clock = FakeClock()
    calls: list[int] = []
    backoff = ExponentialBackoff(base=1, factor=2, max_delay=300, jitter=Jitter.NONE)
    run = TaskRun(
        failing(RuntimeError("x"), calls),
        clock=clock,
        retry=RetryPolicy(max_attempts=3, backoff=backoff),
    )
    run.start()
    wait_until(lambda: calls == [1] and run.status is S.RETRY_WAIT)
    clock.advance(0.99)
    assert calls == [1]
    clock.advance(0.01)
    wait_until(lambda: calls == [1, 2] and run.status is S.RETRY_WAIT)
    clock.advance(1.99)
    assert calls == [1, 2]
    clock.advance(0.01)
    assert run.wait(10).status is S.FAILED
    assert calls == [1, 2, 3]


def test_run_command_records_nonzero_exit_and_retries() -> None:
    calls: list[int] = []

    def body(ctx: TaskContext) -> int:
        calls.append(ctx.attempt)
        code = 3 if ctx.attempt == 1 else 0
        done = run_command(ctx, [sys.executable, "-c", f"import sys; sys.exit({code})"], poll=0.01)
        return done.returncode

    outcome = run_task(body, retry=RetryPolicy(max_attempts=2, backoff=FixedBackoff(0)))
    assert outcome.ok
    assert outcome.value == 0
    first = outcome.attempts[0].failure
    assert first is not None
    assert first.kind is FailureKind.NONZERO_EXIT
    assert "exited with code 3" in first.message
    assert first.retryable is True


def test_run_command_failure_carries_code_and_stderr() -> None:
    def body(ctx: TaskContext) -> None:
        run_command(
            ctx, [sys.executable, "-c", "import sys; sys.stderr.write('nope'); sys.exit(2)"]
        )

    outcome = run_task(body, executor=InlineExecutor())
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.NONZERO_EXIT
    assert "nope" in outcome.failure.message
    assert outcome.failure.exception_type is not None
    assert outcome.failure.exception_type.endswith("CommandFailed")


def test_run_command_without_check_returns_the_completed_process() -> None:
    def body(ctx: TaskContext) -> list[object]:
        done = run_command(
            ctx, [sys.executable, "-c", "print('hi'); raise SystemExit(4)"], check=False
        )
        return [done.returncode, done.stdout.strip()]

    assert run_task(body, executor=InlineExecutor()).value == [4, "hi"]


def test_run_command_terminates_the_command_on_stop() -> None:
    started = threading.Event()
    pids: list[int] = []

    def body(ctx: TaskContext) -> None:
        started.set()
        run_command(ctx, [sys.executable, "-c", "import time; time.sleep(60)"], poll=0.01)

    run = TaskRun(body)
    run.start()
    assert started.wait(10)
    run.stop(reason="enough")
    outcome = run.wait(20)
    assert outcome.status is S.STOPPED
    del pids


def test_run_command_refuses_a_shell_string() -> None:
    with pytest.raises(Exception, match="non-empty list"):
        run_command(object(), "ls -l")
    error = CommandFailed(["x"], -9)
    assert "killed by signal 9" in str(error)
