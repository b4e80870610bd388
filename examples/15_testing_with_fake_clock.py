"""15 — test your own tasks without sleeping: FakeClock, InlineExecutor, FixedBackoff(0) (§12).

Run: python examples/15_testing_with_fake_clock.py
"""

from __future__ import annotations

import threading
from typing import Any

from chongming_task import FailureKind, TaskStatus
from chongming_task.policies import FixedBackoff, RetryPolicy, Timeout
from chongming_task.run import TaskRun, run_task
from chongming_task.runtime.executors.inline import InlineExecutor
from chongming_task.testing import FakeClock


def test_idle_timeout_fires_without_waiting() -> None:
    """An idle timeout of 60 s, checked in microseconds: the clock is moved, not waited for."""
    clock = FakeClock()
    entered = threading.Event()
    release = threading.Event()

    def stuck(ctx: Any) -> None:
        ctx.checkpoint()
        entered.set()
        release.wait(10)  # "hangs" without a checkpoint
        ctx.checkpoint()  # the stop flag set by the timeout is seen here

    run = TaskRun(stuck, clock=clock, timeout=Timeout(idle=60), graceful_stop=5)
    run.start()
    assert entered.wait(10)
    clock.advance(61)  # the idle deadline fires inside advance()
    release.set()
    outcome = run.wait(timeout=10)
    assert outcome.status is TaskStatus.FAILED
    assert outcome.failure is not None
    assert outcome.failure.kind is FailureKind.TIMEOUT_IDLE
    # assert the trajectory, not only the final status: no "timed out" status exists
    assert [t.to_status for t in run.transitions] == [
        TaskStatus.QUEUED,
        TaskStatus.STARTING,
        TaskStatus.RUNNING,
        TaskStatus.FAILED,
    ]
    print("idle timeout:", [t.to_status.value for t in run.transitions])


def test_retries_without_backoff_waits() -> None:
    """InlineExecutor runs synchronously; FixedBackoff(0) removes the waits between attempts."""
    calls = []

    def flaky(ctx: Any) -> str:
        calls.append(ctx.attempt)
        if len(calls) < 3:
            raise ConnectionError("try again")
        return "ok"

    outcome = run_task(
        flaky,
        executor=InlineExecutor(),
        retry=RetryPolicy(max_attempts=3, backoff=FixedBackoff(0)),
    )
    assert outcome.ok
    assert outcome.value == "ok"
    assert calls == [1, 2, 3]
    assert [a.status for a in outcome.attempts] == [
        TaskStatus.RETRY_WAIT,
        TaskStatus.RETRY_WAIT,
        TaskStatus.SUCCEEDED,
    ]
    print("retries:", [a.status.value for a in outcome.attempts])


def main() -> None:
    """Run both tests as a script (they are plain pytest-style functions)."""
    test_idle_timeout_fires_without_waiting()
    test_retries_without_backoff_waits()


if __name__ == "__main__":
    main()
