"""14 — restart recovery: a crashed worker's tasks become `lost`, honestly (guide §8.11).

A worker process is started, runs a task, and is killed with SIGKILL. This
process then reconciles with a clock set past the dead worker's lease (as a
process started later would see it): the in-flight task is marked lost, the
finished one keeps its result, and nothing is left `running`.

Run: python examples/14_reconcile.py
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from chongming_task import Controller, FakeClock, SqliteTaskStore, TaskStatus

WORKER = textwrap.dedent(
    """
    import sys, time
    from chongming_task import Controller, SqliteTaskStore

    def forever(ctx):
        while True:
            ctx.checkpoint()
            time.sleep(0.01)

    controller = Controller(store=SqliteTaskStore(sys.argv[1]), owner="worker-1", lease_ttl=5)
    controller.register("forever", forever)
    controller.register("quick", lambda ctx: {"rows": 3})
    controller.submit("quick", task_id="finished").wait(10)
    controller.submit("forever", task_id="in-flight")
    controller.flush()
    print("ready", flush=True)
    time.sleep(60)
    """
)


def main() -> None:
    """Kill a worker, then reconcile from another process's point of view."""
    folder = Path(os.environ.get("CHONGMING_EXAMPLE_TMP") or tempfile.mkdtemp())
    db = folder / "reconcile.db"
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(db)], stdout=subprocess.PIPE, text=True
    )
    assert worker.stdout is not None
    assert worker.stdout.readline().strip() == "ready"
    deadline = time.monotonic() + 10
    store = SqliteTaskStore(db)
    while (snap := store.get("in-flight")) is None or snap.status is not TaskStatus.RUNNING:
        assert time.monotonic() < deadline, "the worker's task never showed up running"
        time.sleep(0.02)
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait(timeout=10)
    print(f"worker killed; the store still says: {store.get('in-flight').status.value}")  # type: ignore[union-attr]

    # A new process starts. Its clock is past the dead worker's lease (lease_ttl=5).
    clock = FakeClock(start=store.get("in-flight").lease_until)  # type: ignore[union-attr]
    clock.advance(1)
    survivor = Controller(store=store, owner="worker-2", clock=clock)
    preview = survivor.reconcile(dry_run=True)
    print(f"dry run: would mark lost {[s.task_id for s in preview.lost]}")
    report = survivor.reconcile()
    lost = store.get("in-flight")
    finished = store.get("finished")
    assert lost is not None
    assert finished is not None
    print(f"in-flight: {lost.status.value} ({lost.failure.message if lost.failure else ''})")
    print(f"finished: {finished.status.value} {finished.outcome}")
    assert [s.task_id for s in report.lost] == ["in-flight"]
    assert lost.status is TaskStatus.LOST
    assert finished.status is TaskStatus.SUCCEEDED
    assert finished.outcome == {"rows": 3}
    assert survivor.stats().running == 0
    survivor.close(close_store=True)


if __name__ == "__main__":
    main()
