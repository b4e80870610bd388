"""09 — a long-running worker: the three ways it ends after a stop (guide §4.5).

=================================  ===========  ============
body                               final state  value
=================================  ===========  ============
lets checkpoint() raise            stopped      none
returns once a stop is requested   succeeded    kept
never calls checkpoint()           lost         none
=================================  ===========  ============

Run: python examples/09_long_running.py
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path

from chongming_task import (
    Controller,
    FailureKind,
    SqliteTaskStore,
    TaskCancelled,
    TaskContext,
    TaskRun,
    TaskStatus,
    task,
)


@task
def worker(ctx: TaskContext, source: str) -> int:
    """Process batches until asked to stop, then return how many were processed.

    The guide's short form ``while not ctx.is_stop_requested: ctx.checkpoint(); ...``
    has a race (R7): a stop landing between the test and the checkpoint makes the
    checkpoint raise, and the task ends `stopped` without its value. This form is
    race-free: the checkpoint's TaskCancelled is caught right there and turned into
    a normal exit, so whenever the stop lands the task returns what it processed.
    """
    processed = 0
    while True:
        try:
            ctx.checkpoint()  # without it the worker cannot be stopped at all
        except TaskCancelled:
            break  # stop requested: leave the loop and keep the result
        processed += 1
        ctx.progress(processed, unit="batch")
        time.sleep(0.002)
    ctx.log(f"stop requested; processed {processed} batches from {source}")
    return processed


def abrupt(ctx: TaskContext) -> None:
    while True:  # let checkpoint() raise: the task ends at once, without a value
        ctx.checkpoint()
        time.sleep(0.002)


def deaf(ctx: TaskContext, release: threading.Event) -> None:
    release.wait(30)  # never calls checkpoint(): a stop cannot reach it


def start_and_stop(run: TaskRun) -> None:
    run.start()
    deadline = time.monotonic() + 10
    while run.status is not TaskStatus.RUNNING:
        assert time.monotonic() < deadline
        time.sleep(0.001)
    time.sleep(0.05)
    run.stop(reason="release window")


def main() -> None:
    run = TaskRun(abrupt, task_id="abrupt")
    start_and_stop(run)
    outcome = run.wait(timeout=10)
    print(f"{'abrupt':>8}: {outcome.status.value:<9} value={outcome.value}")
    assert outcome.status is TaskStatus.STOPPED
    assert outcome.value is None

    run = TaskRun(worker, ("kafka://orders",), task_id="orders-worker")
    start_and_stop(run)
    outcome = run.wait(timeout=10)
    print(f"{'worker':>8}: {outcome.status.value:<9} value={outcome.value}  ({run.logs[-1]})")
    assert outcome.status is TaskStatus.SUCCEEDED  # stopping -> succeeded: stop is a request
    assert isinstance(outcome.value, int)
    assert outcome.value > 0
    assert [t.to_status for t in run.transitions][-2:] == [
        TaskStatus.STOPPING,
        TaskStatus.SUCCEEDED,
    ]

    release = threading.Event()
    run = TaskRun(deaf, (release,), task_id="deaf", graceful_stop=0.2)
    start_and_stop(run)
    outcome = run.wait(timeout=10)
    assert outcome.failure is not None
    print(
        f"{'deaf':>8}: {outcome.status.value:<9} value={outcome.value}  ({outcome.failure.message})"
    )
    assert outcome.status is TaskStatus.LOST  # honest: the thread may still be running
    assert outcome.failure.kind is FailureKind.LOST
    release.set()

    through_the_controller()


def through_the_controller() -> None:
    """The same worker managed by a Controller on a SQLite file: pause, resume, stop."""
    folder = Path(os.environ.get("CHONGMING_EXAMPLE_TMP") or tempfile.mkdtemp())
    controller = Controller(store=SqliteTaskStore(folder / "workers.db"), owner="node-a")
    controller.register("worker", worker)
    run = controller.submit("worker", "kafka://orders", task_id="orders-worker")
    deadline = time.monotonic() + 10
    while run.status is not TaskStatus.RUNNING:
        assert time.monotonic() < deadline
        time.sleep(0.001)
    # everyday "hold on a moment" is pause/resume, not stop: stop is final
    assert controller.pause("orders-worker") is True  # confirmed: suspended at a checkpoint
    assert controller.active_count == 1  # a paused task keeps its slot
    assert controller.resume("orders-worker") is True
    assert controller.stop("orders-worker", reason="发布窗口") is True
    outcome = controller.wait("orders-worker", timeout=10)
    print(f"{'managed':>8}: {outcome.status.value:<9} value={outcome.value}")
    assert outcome.status is TaskStatus.SUCCEEDED
    assert isinstance(outcome.value, int)
    statuses = [t.to_status for t in controller.history("orders-worker")]
    assert TaskStatus.PAUSED in statuses
    assert statuses[-2:] == [TaskStatus.STOPPING, TaskStatus.SUCCEEDED]
    stored = controller.store.get("orders-worker")  # durable before wait() returned
    assert stored is not None
    assert stored.outcome == outcome.value
    controller.close(close_store=True)


if __name__ == "__main__":
    main()
