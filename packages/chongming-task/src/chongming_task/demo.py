"""``make demo``: the product's main job on the embedded default store.

Run it with ``python -m chongming_task.demo``. It creates a SQLite database under
``./.demo/``, runs a small pipeline in-process through the library, then drives a
long-running worker through the command line (``python -m chongming_cli``):
starts it in one process, pauses, resumes and stops it from others; then one
process enqueues durable tasks that two worker processes share, and it ends by
printing ``ps``, ``stats`` and the worker's ``history``. The database is left for
you to inspect (``chongming-task --db .demo/tasks.db dashboard``).
"""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from chongming_core import TaskSnapshot, TaskStatus
from chongming_runtime import Controller, Pipeline
from chongming_store_sqlite import SqliteTaskStore

WORKER_ID = "orders-worker"
S = TaskStatus


def _cli(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """One ``chongming-task`` command, echoed and printed like a terminal session: notes
    (stderr) and results (stdout) in the order the command wrote them."""
    shown = " ".join(a if " " not in a else repr(a) for a in args)
    print(f"\n$ chongming-task --db {db} {shown}")
    done = subprocess.run(
        [sys.executable, "-m", "chongming_cli", "--db", str(db), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        text=True,
        timeout=60,
        check=False,
    )
    print(done.stdout.rstrip())
    print(f"(exit code {done.returncode})")
    return done


def _wait_for(
    db: Path, task_id: str, predicate: Callable[[TaskSnapshot], bool], timeout: float = 20
) -> TaskSnapshot:
    deadline = time.monotonic() + timeout
    with SqliteTaskStore(db) as store:
        while time.monotonic() < deadline:
            snapshot = store.get(task_id)
            if snapshot is not None and predicate(snapshot):
                return snapshot
            time.sleep(0.05)
    raise TimeoutError(f"task {task_id!r} did not get there within {timeout:g}s")


def _fresh_database() -> Path:
    folder = Path(".demo")
    folder.mkdir(exist_ok=True)
    db = folder / "tasks.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    return db


def run_pipeline(db: Path) -> None:
    """extract -> transform -> load, in-process, on the same SQLite file the CLI uses."""
    try:
        demo_tasks = importlib.import_module("chongming_cli.demo_tasks")
    except ImportError as exc:
        raise SystemExit(
            f"the demo drives the command line, which is not installed ({exc}); install it "
            'with: pip install "chongming-task[cli]"'
        ) from exc
    print("1. A pipeline, run in-process through the library (extract -> transform -> load)")
    with SqliteTaskStore(db) as store:
        controller = Controller(store=store, owner="demo-pipeline")
        controller.register_module(demo_tasks)
        pipeline = Pipeline("nightly")
        extract = pipeline.node("extract", "2026-10-02", node_id="extract", label="抽取")
        transform = pipeline.node("transform", node_id="transform", depends_on=[extract])
        pipeline.node("load", node_id="load", depends_on=[transform], label="装载")
        try:
            outcome = controller.submit_pipeline(pipeline).wait(30)
        finally:
            controller.close()
    print(f"   pipeline {outcome.status.value}:")
    for node_id, node in outcome.nodes.items():
        print(f"   - {node_id}: {node.status.value}, value {node.value!r}")


def drive_worker(db: Path) -> int:
    """Start the worker with ``run`` in one process, control it from others."""
    print("\n2. A long-running worker, started by `chongming-task run` in its own process")
    runner = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "chongming_cli",
            "--db",
            str(db),
            "run",
            "worker",
            "--tasks",
            "chongming_cli.demo_tasks",
            "--task-id",
            WORKER_ID,
            "--label",
            "订单同步",
            "--arg",
            "source=demo://orders",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        _wait_for(db, WORKER_ID, lambda s: s.status is S.RUNNING and s.progress is not None)
        print("   ... and controlled from other processes:")
        _cli(db, "pause", WORKER_ID)
        _wait_for(db, WORKER_ID, lambda s: s.status is S.PAUSED)
        _cli(db, "status", WORKER_ID)
        _cli(db, "resume", WORKER_ID)
        _wait_for(db, WORKER_ID, lambda s: s.status is S.RUNNING)
        _cli(db, "stop", WORKER_ID, "--reason", "demo finished")
        output, _ = runner.communicate(timeout=30)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.communicate()
    print("\n   the `run` process ended with:")
    print("   " + output.rstrip().replace("\n", "\n   "))
    print(f"   (exit code {runner.returncode})")
    return runner.returncode


def share_durable_work(db: Path) -> None:
    """`submit` enqueues by name; two `worker` processes claim and share the tasks."""
    print("\n4. Durable tasks: this process enqueues, two worker processes share the work")
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "chongming_cli",
                "--db",
                str(db),
                "--owner",
                owner,
                "worker",
                "--tasks",
                "chongming_cli.demo_tasks",
                "--max-parallel",
                "2",
                "--grace",
                "10",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            text=True,
        )
        for owner in ("worker-a", "worker-b")
    ]
    try:
        for proc in workers:
            assert proc.stdout is not None
            print("   " + proc.stdout.readline().rstrip())
        days = [f"2026-10-{day:02d}" for day in range(3, 9)]
        ids = []
        for day in days:
            done = _cli(db, "submit", "extract", "--tasks", "chongming_cli.demo_tasks",
                        "--arg", f"day={day}", "--task-id", f"extract-{day}")  # fmt: skip
            ids.append(f"extract-{day}")
            if done.returncode != 0:
                raise SystemExit("the demo could not enqueue a task")
        _cli(db, "submit", "transform", "--tasks", "chongming_cli.demo_tasks", "--arg", "factor=3",
             "--task-id", "transform-x3", "--wait")  # fmt: skip
        ran_by: dict[str, list[str]] = {}
        for task_id in ids:
            snapshot = _wait_for(db, task_id, lambda s: s.is_terminal)
            ran_by.setdefault(snapshot.lease_owner or "?", []).append(task_id)
        for owner, tasks in sorted(ran_by.items()):
            print(f"   {owner} ran {len(tasks)}: {', '.join(tasks)}")
        _cli(db, "nodes")
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in workers:
            try:
                output, _ = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                output, _ = proc.communicate()
            print("   " + output.rstrip().replace("\n", "\n   "))
            print(f"   (exit code {proc.returncode})")


def main() -> None:
    """Pipeline, worker, controls, then the tables; under a minute."""
    db = _fresh_database()
    run_pipeline(db)
    drive_worker(db)
    print("\n3. A task that fails: `run` exits 3 (the command worked, the task did not succeed)")
    _cli(db, "run", "fail", "--tasks", "chongming_cli.demo_tasks", "--task-id", "flaky-source")
    share_durable_work(db)
    print("\n5. What the store holds now")
    _cli(db, "ps")
    _cli(db, "stats")
    _cli(db, "history", WORKER_ID)
    print(
        f"\nThe database is left at {db}; look around with (from the repository, "
        "`uv run` finds the project's environment; `make dashboard` does the last one):\n"
        f"  uv run chongming-task --db {db} ps\n"
        f"  uv run chongming-task --db {db} dashboard"
    )


if __name__ == "__main__":
    main()
