"""17 — durable work: one process enqueues, two worker processes share it (guide §13).

The producer (this process) registers nothing: it writes tasks by name with JSON
arguments. Two worker processes register the task functions and serve: each claims
queued tasks while it has room, and the store makes sure no task is run twice. The
producer waits for the results through the store, stops a long task on whichever
worker holds it, and then tells the workers to leave.

On a SQLite file by default (workers on one machine); with
``CHONGMING_EXAMPLE_POSTGRES=postgresql://...`` on PostgreSQL (workers on any machine).

Run: python examples/17_workers.py
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from chongming_task import Controller, Job, SqliteTaskStore, TaskStatus, TaskStore


# ---------------------------------------------------------------- the task code (workers only)
def resize(ctx: Any, image: str, width: int) -> dict[str, Any]:
    """Pretend to resize an image; returns what a real one would."""
    ctx.checkpoint()
    time.sleep(0.01)
    return {"image": image, "width": width}


def crawl(ctx: Any, site: str) -> None:
    """Crawl until stopped (checkpoints are where a stop takes effect)."""
    while True:
        ctx.checkpoint()
        time.sleep(0.01)


def open_store(target: str) -> TaskStore:
    """A SQLite file, or ``postgresql://...#schema``."""
    if target.startswith("postgresql://"):
        from chongming_task import PostgresTaskStore

        dsn, schema = target.split("#", 1)
        return PostgresTaskStore(dsn, schema=schema)
    return SqliteTaskStore(target)


def worker(target: str, owner: str, folder: str) -> None:
    """A worker process: serve `resize` and `crawl` from when the file ``go`` exists in
    `folder` (so that both workers start together) until the file ``leave`` does."""
    store = open_store(target)
    controller = Controller(store=store, owner=owner, max_parallel=3, poll_interval=0.02)
    controller.register("resize", resize)
    controller.register("crawl", crawl)
    print("ready", flush=True)
    while not os.path.exists(os.path.join(folder, "go")):
        time.sleep(0.005)
    controller.serve()
    while not os.path.exists(os.path.join(folder, "leave")):
        time.sleep(0.02)
    controller.close(timeout=30)  # finishes (or stops) what it holds, then leaves
    store.close()


# ---------------------------------------------------------------- the producer
def status_of(controller: Controller, task_id: str) -> tuple[TaskStatus, str | None]:
    """The task's status in the store, and who holds it."""
    snapshot = controller.get(task_id)
    assert snapshot is not None, f"{task_id} is not in the store"
    return snapshot.status, snapshot.lease_owner


def main() -> None:
    given = os.environ.get("CHONGMING_EXAMPLE_TMP")
    if given:
        run(Path(given))
        return
    with tempfile.TemporaryDirectory() as scratch:  # removed afterwards, database and all
        run(Path(scratch))


def run(folder: Path) -> None:
    """Enqueue, start two workers in `folder`, follow the work, stop one task, leave."""
    dsn = os.environ.get("CHONGMING_EXAMPLE_POSTGRES")
    target = f"{dsn}#example_{uuid.uuid4().hex[:8]}" if dsn else str(folder / "work.db")
    store = open_store(target)
    producer = Controller(store=store, owner="producer")  # registers nothing

    # enqueue before any worker exists: the tasks wait in the store, durable
    ids = producer.enqueue_many(
        "resize", [Job(f"photo-{i}.jpg", width=320, label=f"缩放 {i}") for i in range(20)]
    )
    long_one = producer.enqueue("crawl", "example.org", task_id="crawl-1")
    print(f"enqueued {len(ids) + 1} tasks; {status_of(producer, ids[0])[0].value} in the store")

    workers = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", target, f"worker-{n}", str(folder)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in (1, 2)
    ]
    try:
        for proc in workers:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
        (folder / "go").touch()  # both start claiming now
        outcomes = [producer.wait(task_id, timeout=60) for task_id in ids]
        assert all(o.status is TaskStatus.SUCCEEDED for o in outcomes)
        assert outcomes[3].value == {"image": "photo-3.jpg", "width": 320}
        by_worker = Counter(status_of(producer, task_id)[1] for task_id in ids)
        print("ran by:", dict(sorted(by_worker.items())))

        # a stop from here reaches the task on whichever worker claimed it
        deadline = time.monotonic() + 30
        while (status := status_of(producer, long_one))[0] is not TaskStatus.RUNNING:
            assert time.monotonic() < deadline, "the crawl never started"
            time.sleep(0.02)
        holder = status[1]
        producer.stop(long_one, reason="enough for today")
        stopped = producer.wait(long_one, timeout=30)
        print(f"{long_one} on {holder}: {stopped.status.value}")
        assert stopped.status is TaskStatus.STOPPED
        print("history:", " -> ".join(t.to_status.value for t in producer.history(long_one)))
    finally:
        (folder / "go").touch()  # a worker still waiting to start leaves at once
        (folder / "leave").touch()
        for proc in workers:
            proc.wait(timeout=60)
        producer.close()
        if dsn:
            store.close()
            import psycopg

            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{target.split("#", 1)[1]}" CASCADE')
        else:
            store.close()
    assert all(proc.returncode == 0 for proc in workers)
    print("both workers left cleanly")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        main()
