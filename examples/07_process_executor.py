"""07 — ProcessExecutor: a hard stop, crash isolation, and the pid of the child.

The task functions are module-level (a spawned child imports them by name) and
the script is guarded by ``if __name__ == "__main__":`` (spawn re-imports it).

Run: python examples/07_process_executor.py
"""

from __future__ import annotations

import os
import signal
import time

from chongming_task import (
    ConfigurationError,
    FailureKind,
    ProcessExecutor,
    TaskContext,
    TaskRun,
    TaskStatus,
    run_task,
    task,
)


@task
def crunch(ctx: TaskContext, n: int) -> dict[str, int]:
    """CPU-bound work in its own process (no GIL shared with the supervisor)."""
    total = 0
    for index in range(n):
        if index % 10_000 == 0:
            ctx.checkpoint()
        total += index * index
    ctx.log(f"crunched {n} numbers")
    return {"total": total, "pid": os.getpid()}


def stubborn(ctx: TaskContext) -> None:
    """Ignores SIGTERM and never checks for a stop: only a kill ends it."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ctx.progress(1, message="ignoring stops from now on")
    while True:
        time.sleep(0.01)


def crash(ctx: TaskContext) -> None:
    """Dies like a native extension gone wrong."""
    os.kill(os.getpid(), signal.SIGSEGV)


def main() -> None:
    outcome = run_task(crunch, 200_000, executor=ProcessExecutor())
    print(
        "crunch:",
        outcome.status.value,
        "child pid",
        outcome.snapshot.pid,
        "(we are",
        os.getpid(),
        ")",
    )
    assert outcome.ok
    assert outcome.snapshot.pid == outcome.value["pid"] != os.getpid()

    run = TaskRun(stubborn, executor=ProcessExecutor(kill_after=0.3), graceful_stop=0.3)
    run.start()
    deadline = time.monotonic() + 30
    while run.snapshot.progress is None:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    run.stop(reason="it has to go")
    outcome = run.wait(timeout=30)
    assert outcome.failure is not None
    print("stubborn:", outcome.status.value, "-", outcome.failure.message)
    assert outcome.status is TaskStatus.STOPPED  # really ended, so not `lost`

    outcome = run_task(crash, executor=ProcessExecutor())
    assert outcome.failure is not None
    print("crash:", outcome.status.value, outcome.failure.kind.value, "-", outcome.failure.message)
    assert outcome.failure.kind is FailureKind.NONZERO_EXIT
    print("the supervising process is still here:", os.getpid())

    try:
        TaskRun(lambda ctx: 1, executor=ProcessExecutor())
    except ConfigurationError as error:
        print("refused at submit:", str(error)[:90], "...")
    else:
        raise AssertionError("a lambda must be refused")


if __name__ == "__main__":
    main()
