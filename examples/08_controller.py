"""08 — many tasks through one Controller: names, queue, table, controls (guide §8.1–§8.5).

Run: python examples/08_controller.py
"""

from __future__ import annotations

import threading
import time
from typing import Any

from chongming_task import ConcurrencyPolicy, ConfigurationError, TaskStatus
from chongming_task.controller import Controller, render_table

release = threading.Event()


def extract(ctx: Any, source: str) -> int:
    """Pretend to read rows from `source`."""
    ctx.checkpoint()
    return len(source)


def transform(ctx: Any, rows: int) -> int:
    """Work in batches until released (so the queue is visible)."""
    while not release.is_set():
        ctx.checkpoint()
        release.wait(0.005)
    return rows * 2


def main() -> None:
    """Register, submit beyond the limit, look at the table, stop one, wait for the rest."""
    controller = Controller(
        concurrency=ConcurrencyPolicy(max_parallel=2, limits={"db": 1}), graceful_stop=2
    )
    controller.register("extract", extract, tags={"io"})
    controller.register("transform", transform)

    # names, never code: an unregistered name is refused
    try:
        controller.submit("delete_everything")
    except ConfigurationError as refused:
        print(f"refused: {refused}")

    for i in range(4):
        controller.submit("transform", 100 * (i + 1), task_id=f"t{i}", label=f"转换-{i + 1}")
    deadline = time.monotonic() + 10
    while controller.active_count < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    print(render_table(controller.list_tasks()))
    assert controller.active_count == 2  # really holding execution slots
    assert controller.queued_count == 2  # accepted, waiting for a slot (ELAPSED shows '-')
    assert controller.stats().unfinished == 4

    # a queued task is stopped at once, without an intermediate state
    assert controller.stop("t3", reason="手工干预") is True
    assert [t.to_status for t in controller.history("t3")] == [
        TaskStatus.QUEUED,
        TaskStatus.STOPPED,
    ]

    release.set()
    outcomes = controller.wait_all(timeout=30)
    print(render_table(controller.list_tasks()))
    assert [o.status for o in outcomes] == [TaskStatus.SUCCEEDED] * 3 + [TaskStatus.STOPPED]
    assert outcomes[0].value == 200
    stats = controller.stats()
    print(f"succeeded={stats.succeeded} stopped={stats.stopped} unfinished={stats.unfinished}")
    controller.close()


if __name__ == "__main__":
    main()
