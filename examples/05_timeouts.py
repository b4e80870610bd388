"""05 — timeouts: start, per_attempt and idle are independent; the earliest wins.

A timeout requests a stop and records timeout_* as the failure kind; it is never a
status of its own. FakeClock makes the deadlines instant: nothing here waits for them.

Run: python examples/05_timeouts.py
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from chongming_task import FailureKind, FakeClock, TaskContext, TaskRun, TaskStatus, Timeout


def wait_until(predicate: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def main() -> None:
    clock = FakeClock()
    stuck = threading.Event()
    release = threading.Event()

    def hangs_then_notices(ctx: TaskContext) -> None:
        stuck.set()
        release.wait(30)  # e.g. a connection that hangs: no checkpoint() meanwhile
        ctx.checkpoint()  # the idle timeout set the stop flag: this raises

    run = TaskRun(hangs_then_notices, clock=clock, timeout=Timeout(per_attempt=600, idle=60))
    run.start()
    assert stuck.wait(10)
    clock.advance(60)  # 60 s without a checkpoint
    print("after 60s of silence:", run.status.value, "(still running: R2, no 'timeout' status)")
    assert run.status is TaskStatus.RUNNING
    release.set()
    outcome = run.wait(10)
    assert outcome.failure is not None
    print(outcome.status.value, outcome.failure.kind.value, "-", outcome.failure.message)
    assert outcome.failure.kind is FailureKind.TIMEOUT_IDLE
    assert outcome.failure.retryable

    # A body that never unwinds after its timeout: the thread is abandoned -> lost.
    clock = FakeClock()
    entered = threading.Event()
    never = threading.Event()

    def ignores_everything(ctx: TaskContext) -> None:
        entered.set()
        never.wait(30)

    run = TaskRun(ignores_everything, clock=clock, timeout=Timeout(per_attempt=10), graceful_stop=5)
    run.start()
    assert entered.wait(10)
    clock.advance(15)  # 10 s budget + 5 s graceful window
    outcome = run.wait(10)
    assert outcome.failure is not None
    print(outcome.status.value, outcome.failure.kind.value, "-", outcome.failure.message)
    assert outcome.status is TaskStatus.LOST
    assert "per-attempt timeout of 10s" in outcome.failure.message
    never.set()

    # Time spent paused does not count: neither idle nor per_attempt fires while paused.
    clock = FakeClock()
    started = threading.Event()

    def loop(ctx: TaskContext) -> None:
        started.set()
        while True:
            ctx.checkpoint()
            time.sleep(0.001)

    run = TaskRun(loop, clock=clock, timeout=Timeout(per_attempt=10, idle=3))
    run.start()
    assert started.wait(10)
    assert run.pause(timeout=5)
    clock.advance(3600)
    print("paused for an hour:", run.status.value)
    assert run.status is TaskStatus.PAUSED
    run.stop()
    assert run.wait(10).status is TaskStatus.STOPPED
    wait_until(lambda: run.done)


if __name__ == "__main__":
    main()
