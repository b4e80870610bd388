"""03 — TaskRun control: pause (confirmed at a checkpoint), resume, stop.

Run: python examples/03_task_run_control.py
"""

from __future__ import annotations

import threading
import time

from chongming_task import TaskContext, TaskRun, TaskStatus


def main() -> None:
    counter = [0]
    started = threading.Event()

    def worker(ctx: TaskContext) -> None:
        started.set()
        while True:
            ctx.checkpoint()
            counter[0] += 1
            time.sleep(0.001)

    run = TaskRun(worker, task_id="worker-1", pause_timeout=5)
    run.start()
    assert started.wait(10)

    confirmed = run.pause()  # True only once the body is suspended at a checkpoint
    frozen = counter[0]
    time.sleep(0.05)
    print("paused:", confirmed, run.status.value, "counter frozen:", counter[0] == frozen)
    assert confirmed
    assert run.status is TaskStatus.PAUSED
    assert counter[0] == frozen

    assert run.resume()
    print("resumed:", run.status.value)
    assert run.snapshot.status is TaskStatus.RUNNING

    run.stop(reason="done for today")  # never blocks
    outcome = run.wait(timeout=30)
    print("stopped:", outcome.status.value)
    for record in run.transitions:
        print(
            f"  v{record.status_version} {record.from_status.value} -> {record.to_status.value}"
            f" ({record.trigger})"
        )
    assert outcome.status is TaskStatus.STOPPED
    assert [t.to_status for t in run.transitions][-5:] == [
        TaskStatus.PAUSING,
        TaskStatus.PAUSED,
        TaskStatus.RUNNING,
        TaskStatus.STOPPING,
        TaskStatus.STOPPED,
    ]

    # A pause that no checkpoint confirms is reported honestly: False, back to running.
    release = threading.Event()

    def busy(ctx: TaskContext) -> str:
        release.wait(30)  # a long stretch without checkpoint()
        return "done"

    run = TaskRun(busy, task_id="busy-1")
    run.start()
    confirmed = run.pause(timeout=0.1)
    print("pause of a busy task:", confirmed, run.status.value, run.transitions[-1].trigger)
    assert confirmed is False
    assert run.transitions[-1].trigger == "runtime:pause_aborted"
    release.set()
    assert run.wait(timeout=30).value == "done"


if __name__ == "__main__":
    main()
