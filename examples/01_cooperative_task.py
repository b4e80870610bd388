"""01 — a cooperative task: checkpoint(), progress, logs, and a stop that is honoured.

Run: python examples/01_cooperative_task.py
"""

from __future__ import annotations

import threading
import time

from chongming_task import FailureKind, TaskContext, TaskRun, TaskStatus


def copy_rows(ctx: TaskContext, rows: int) -> int:
    """Copy rows one by one; every round cooperates with stop/pause and beats."""
    copied = 0
    for index in range(1, rows + 1):
        ctx.checkpoint()  # stop -> TaskCancelled, pause -> wait here, heartbeat
        time.sleep(0.001)  # the real work
        copied += 1
        ctx.progress(index, total=rows, unit="rows")
    ctx.log(f"copied {copied} rows")
    return copied


def main() -> None:
    run = TaskRun(copy_rows, (50,), task_id="copy-1", name="copy")
    run.start()
    outcome = run.wait(timeout=30)
    print("finished:", outcome.status.value, "value:", outcome.value, "logs:", run.logs)
    assert outcome.ok
    assert outcome.value == 50

    # The same body under a stop request: it ends `stopped`, not `failed`.
    started = threading.Event()

    def endless(ctx: TaskContext) -> None:
        started.set()
        while True:
            ctx.checkpoint()
            time.sleep(0.001)

    run = TaskRun(endless, task_id="endless-1")
    run.start()
    assert started.wait(10)
    run.stop(reason="maintenance")
    outcome = run.wait(timeout=30)
    assert outcome.failure is not None
    print("stopped:", outcome.status.value, outcome.failure.kind.value, outcome.failure.message)
    for record in run.transitions:
        print(f"  {record.from_status.value:>8} -> {record.to_status.value:<8} by {record.trigger}")
    assert outcome.status is TaskStatus.STOPPED
    assert outcome.failure.kind is FailureKind.CANCELLED
    assert outcome.failure.retryable is False


if __name__ == "__main__":
    main()
