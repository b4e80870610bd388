"""04 — retries: max_attempts counts the first try, give_up_on wins, history is kept.

Run: python examples/04_retries.py
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

from chongming_task import (
    FakeClock,
    FixedBackoff,
    InlineExecutor,
    RetryPolicy,
    TaskContext,
    TaskRun,
    TaskStatus,
    run_task,
)


def flaky(ctx: TaskContext) -> str:
    if ctx.attempt < 3:
        raise ConnectionError(f"attempt {ctx.attempt}: the service is busy")
    return f"worked on attempt {ctx.attempt}"


def invalid(ctx: TaskContext) -> None:
    raise ValueError("bad input: retrying will not help")


def main() -> None:
    policy = RetryPolicy(max_attempts=5, backoff=FixedBackoff(0), give_up_on=(ValueError,))
    outcome = run_task(flaky, retry=policy, executor=InlineExecutor())
    print(outcome.value)
    for attempt in outcome.attempts:
        reason = attempt.failure.message if attempt.failure else "-"
        print(f"  attempt {attempt.number}: {attempt.status.value:<10} {reason}")
    assert outcome.ok
    assert [a.status for a in outcome.attempts] == [
        TaskStatus.RETRY_WAIT,
        TaskStatus.RETRY_WAIT,
        TaskStatus.SUCCEEDED,
    ]

    outcome = run_task(invalid, retry=policy, executor=InlineExecutor())
    assert outcome.failure is not None
    print("give_up_on:", outcome.status.value, len(outcome.attempts), "attempt(s)")
    assert outcome.status is TaskStatus.FAILED
    assert len(outcome.attempts) == 1

    # The wait between attempts is the retry_wait status plus a clock timer: no thread
    # sleeps for it. A FakeClock makes the 60 s backoff instant and deterministic.
    clock = FakeClock()
    run = TaskRun(flaky, clock=clock, retry=RetryPolicy(max_attempts=3, backoff=FixedBackoff(60)))
    run.start()
    for number in (1, 2):
        wait_until(functools.partial(waiting_after, run, number))
        print(f"after attempt {number}:", run.status.value, "retry_at", run.snapshot.retry_at)
        clock.advance(60)
    assert run.wait(10).value == "worked on attempt 3"
    print("with backoff:", run.status.value)


def waiting_after(run: TaskRun, number: int) -> bool:
    snapshot = run.snapshot
    return snapshot.attempt == number and snapshot.status is TaskStatus.RETRY_WAIT


def wait_until(predicate: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


if __name__ == "__main__":
    main()
