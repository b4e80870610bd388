"""Scale by design (ARCHITECTURE §4.4): threads only for running attempts, timers for waiting.

10,000 running attempts cost 10,000 threads (one daemon thread each, no helper
threads); 10,000 tasks waiting in ``retry_wait`` cost no thread at all: their
backoff is a timer on the clock.
"""

from __future__ import annotations

import threading

import pytest

from chongming_core import FakeClock, FixedBackoff, RetryPolicy, TaskStatus
from chongming_runtime import TaskContext, TaskRun
from chongming_runtime.support import _thread_cache as thread_cache
from chongming_runtime.testing import wait_until

S = TaskStatus
N = 10_000
SLACK = 5  # the clock's timer thread and the like


def task_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("chongming-task-scale-")]


def join_task_threads() -> None:
    """Wait until every attempt's thread has returned, then let parked threads exit."""
    # a thread is renamed when it parks
    wait_until(lambda: task_threads() == [], "the task threads to park", timeout=60)
    thread_cache._CACHE.clear()


@pytest.mark.slow
def test_ten_thousand_running_attempts_use_one_thread_each_and_nothing_more() -> None:
    # One event per task (not one shared event): waking 10,000 threads on one lock
    # would measure the herd, not the runtime.
    releases = [threading.Event() for _ in range(N)]
    arrived = threading.Semaphore(0)

    def body(ctx: TaskContext, index: int) -> None:
        arrived.release()
        releases[index].wait(120)
        ctx.checkpoint()  # raises: the run was stopped meanwhile

    clock = FakeClock()  # the graceful windows are timers that never need to fire here
    thread_cache._CACHE.clear()  # no parked thread from earlier tests: each attempt starts one
    baseline = threading.active_count()
    runs = [TaskRun(body, (i,), task_id=f"scale-{i}", clock=clock) for i in range(N)]
    try:
        for run in runs:
            run.start()
        for _ in range(N):
            assert arrived.acquire(timeout=60)
        running = threading.active_count()
        assert N <= running - baseline <= N + SLACK
        assert all(run.status is S.RUNNING for run in runs)
        assert clock.pending_timers == 0  # a running attempt without timeouts needs no timer
        for run, release in zip(runs, releases, strict=True):
            run.stop(reason="scale test")
            release.set()
    finally:
        for release in releases:
            release.set()
    for run in runs:
        assert run.wait(60).status is S.STOPPED
    join_task_threads()
    assert threading.active_count() <= baseline + SLACK


@pytest.mark.slow
def test_ten_thousand_tasks_in_retry_wait_use_no_thread() -> None:
    clock = FakeClock()

    def body(ctx: TaskContext) -> None:
        raise RuntimeError("try again in an hour")

    policy = RetryPolicy(max_attempts=2, backoff=FixedBackoff(3600))
    thread_cache._CACHE.clear()
    baseline = threading.active_count()
    runs = [TaskRun(body, task_id=f"scale-r{i}", clock=clock, retry=policy) for i in range(N)]
    for run in runs:
        run.start()
    wait_until(lambda: all(run.status is S.RETRY_WAIT for run in runs), "retry_wait", timeout=60)
    join_task_threads()
    assert threading.active_count() <= baseline + SLACK  # waiting costs no thread
    assert clock.pending_timers == N  # ... only a timer each
    for run in runs:
        run.stop(reason="enough")
    assert all(run.status is S.STOPPED for run in runs)
    assert clock.pending_timers == 0
