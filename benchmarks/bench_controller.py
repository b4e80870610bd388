"""Controller benchmarks: throughput, persistence, latency, memory and cross-process stop.

Every figure is printed next to a baseline measured in the same run:

1. 10,000 no-op tasks through ``Controller(max_parallel=4)`` (thread executor,
   in-memory store) against a bare ``ThreadPoolExecutor(4)``, best of 3 runs each:
   the process's CPU time per task (goal <= 50 us) and the rate (goal >= 0.2x the
   pool's).
2. The same on a SQLite file (goal >= 1.0x the store alone) and on PostgreSQL (goal
   >= 1.8x the store alone), every transition and its history persisted, against the
   store alone writing the same rows in batches of 100; and, to show what the runtime
   adds, against the store alone writing the rows the controller writes (queued; starting;
   running with the end) in the batches it writes them in.
3. Submit-to-result latency of one no-op task on a SQLite file (goal p50 <= 2 ms),
   against ``ThreadPoolExecutor.submit().result()`` and one durable store commit.
4. Memory per queued task: RSS growth for 100,000 tasks queued behind one blocking
   task (``max_parallel=1``, SQLite file), against a bare pool's queue (goal <= 1.2 KiB).
5. Cross-process stop latency: ``stop()`` in this process until ``stopped`` is in
   the store, for a task held by another process that checkpoints every 20 ms
   (goal p95 <= 250 ms on SQLite, <= 50 ms on PostgreSQL), against the same stop
   issued in the holding process.

PostgreSQL parts use ``CHONGMING_TEST_POSTGRES`` (default
``postgresql://postgres@127.0.0.1:5432/test``) with a unique schema that is dropped
afterwards; they are skipped with a note when the server is unreachable.

Run: ``python benchmarks/run.py controller`` (or ``make bench``).
"""

from __future__ import annotations

import contextlib
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from chongming_core import (
    InMemoryTaskStore,
    SnapshotWrite,
    StateMachine,
    TaskStatus,
    TaskStore,
)
from chongming_runtime import Controller, TaskContext
from chongming_store_sqlite import SqliteTaskStore

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # run or loaded by path
from _postgres import drop_schema, postgres_dsn

HERE = Path(__file__).resolve()
CHECKPOINT_EVERY = 0.02


# ---------------------------------------------------------------------------- task bodies
def noop(ctx: TaskContext) -> None:
    """A task that does nothing."""
    return None


def _noop_plain() -> None:
    return None


def spin(ctx: TaskContext) -> None:
    """Checkpoint every 20 ms until stopped."""
    while True:
        ctx.checkpoint()
        time.sleep(CHECKPOINT_EVERY)


# ---------------------------------------------------------------------------- helpers
def _goal(ok: bool) -> str:
    return "OK" if ok else "MISSED"


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


@contextlib.contextmanager
def _sqlite_store(folder: str, name: str) -> Iterator[SqliteTaskStore]:
    store = SqliteTaskStore(os.path.join(folder, f"{name}.db"))
    try:
        yield store
    finally:
        store.close()


@contextlib.contextmanager
def _postgres_store(dsn: str) -> Iterator[Any]:
    from chongming_store_postgres import PostgresTaskStore

    schema = f"chongming_bench_{uuid.uuid4().hex[:12]}"
    store = PostgresTaskStore(dsn, schema=schema)
    try:
        yield store
    finally:
        store.close()
        drop_schema(dsn, schema)


# ---------------------------------------------------------------------------- 1 + 2: throughput
def pool_rate(tasks: int, workers: int = 4) -> float:
    """No-op tasks per second through a bare ThreadPoolExecutor (best of 3)."""
    best = 0.0
    for _ in range(3):
        with ThreadPoolExecutor(max_workers=workers) as pool:
            started = time.perf_counter()
            futures = [pool.submit(_noop_plain) for _ in range(tasks)]
            for future in futures:
                future.result()
            best = max(best, tasks / (time.perf_counter() - started))
    return best


def controller_rate(store: TaskStore, tasks: int, *, check_history: bool) -> float:
    """No-op tasks per second through Controller(max_parallel=4): submit all, then wait all."""
    return controller_run(store, tasks, check_history=check_history)[0]


def controller_run(store: TaskStore, tasks: int, *, check_history: bool) -> tuple[float, float]:
    """`controller_rate`, and the process's CPU seconds per task (every thread's)."""
    controller = Controller(store=store, max_parallel=4)
    controller.register("noop", noop)
    gc.collect()
    cpu = time.process_time()
    started = time.perf_counter()
    runs = [controller.submit("noop") for _ in range(tasks)]
    outcomes = controller.wait_all(timeout=600)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu
    if len(outcomes) != tasks or any(o.status is not TaskStatus.SUCCEEDED for o in outcomes):
        raise RuntimeError("not every benchmark task succeeded")
    if check_history:
        counts = store.status_counts()
        if counts.get(TaskStatus.SUCCEEDED, 0) < tasks:
            raise RuntimeError(f"the store does not hold every finished task: {counts}")
        for run in (runs[0], runs[len(runs) // 2], runs[-1]):
            trail = [t.to_status for t in store.history(run.task_id)]
            expected = [_S.QUEUED, _S.STARTING, _S.RUNNING, _S.SUCCEEDED]
            if trail != expected:
                raise RuntimeError(f"history of {run.task_id} is {trail}, expected {expected}")
    controller.close()
    return tasks / elapsed, cpu / tasks


_S = TaskStatus


def store_rate(store: TaskStore, tasks: int, batch: int = 100) -> float:
    """The store alone: create + 4 saves (with their transitions) per task, in batches."""
    rounds: list[list[list[SnapshotWrite]]] = []
    for start in range(0, tasks, batch):
        machines = [
            StateMachine.create(f"store-{uuid.uuid4().hex[:12]}", "noop")
            for _ in range(min(batch, tasks - start))
        ]
        steps: list[list[SnapshotWrite]] = [[SnapshotWrite(m.snapshot, None) for m in machines]]
        moves: list[Callable[[StateMachine], object]] = [
            lambda m: m.mark_queued(),
            lambda m: m.mark_starting(executor="thread"),
            lambda m: m.mark_running(pid=1),
            lambda m: m.mark_succeeded(),
        ]
        for move in moves:
            step = []
            for m in machines:
                version = m.version
                move(m)
                step.append(SnapshotWrite(m.snapshot, version, (m.transitions[-1],)))
            steps.append(step)
        rounds.append(steps)
    started = time.perf_counter()
    for steps in rounds:
        for writes in steps:
            store.save_many(writes)
    return tasks / (time.perf_counter() - started)


def store_same_writes_rate(store: TaskStore, tasks: int, burst: int = 500, slots: int = 4) -> float:
    """The store alone writing the rows the controller writes, in its batch sizes (counted
    in its ``save_many`` calls): each task created ``queued`` in bursts of `burst` (the
    submits), then commits of `slots` starts with the running-and-end of the `slots` tasks
    started before (a body waits for its start's commit; its end goes in the next one)."""
    machines = [StateMachine.create(f"same-{uuid.uuid4().hex[:12]}", "noop") for _ in range(tasks)]
    creates: list[list[SnapshotWrite]] = []
    for start in range(0, tasks, burst):
        batch = []
        for m in machines[start : start + burst]:
            m.mark_queued()
            batch.append(SnapshotWrite(m.snapshot, None, tuple(m.transitions)))
        creates.append(batch)
    commits: list[list[SnapshotWrite]] = []
    ending: list[SnapshotWrite] = []
    for start in range(0, tasks + slots, slots):
        starting = []
        for m in machines[start : start + slots]:
            version = m.version
            m.mark_starting(executor="thread")
            starting.append(SnapshotWrite(m.snapshot, version, (m.transitions[-1],)))
        commits.append(starting + ending)
        ending = []
        for m in machines[start : start + slots]:
            version = m.version
            m.mark_running(pid=1)
            m.mark_succeeded()
            ending.append(SnapshotWrite(m.snapshot, version, tuple(m.transitions[-2:])))
    started = time.perf_counter()
    for batch in creates:
        store.save_many(batch)
    for batch in commits:
        if batch:
            store.save_many(batch)
    return tasks / (time.perf_counter() - started)


def bench_throughput(folder: str, dsn: str | None) -> None:
    tasks = 10_000
    pool = pool_rate(tasks)
    # best of 3 for both, as for the pool: the first run also pays for imports and threads
    runs = [controller_run(InMemoryTaskStore(), tasks, check_history=False) for _ in range(3)]
    memory = max(rate for rate, _ in runs)
    cpu_us = min(cpu for _, cpu in runs) * 1e6
    ratio = memory / pool
    print(
        f"1. {tasks:,} no-op tasks, max_parallel=4, thread executor, in-memory store: "
        f"{cpu_us:.0f} us of CPU per task (goal <= 50 us: {_goal(cpu_us <= 50)}); "
        f"Controller {memory:,.0f}/s vs ThreadPoolExecutor(4) {pool:,.0f}/s "
        f"-> {ratio:.2f}x (goal >= 0.2x: {_goal(ratio >= 0.2)})",
        flush=True,
    )
    # each baseline writes as many tasks as the controller beside it: a store writes a few
    # thousand tasks faster per task than ten thousand
    with _sqlite_store(folder, "store-only") as store:
        alone = store_rate(store, tasks)
    with _sqlite_store(folder, "throughput") as store:
        rate = controller_rate(store, tasks, check_history=True)
    with _sqlite_store(folder, "same-writes") as store:
        same = store_same_writes_rate(store, tasks)
    print(
        f"2. SQLite file: Controller {rate:,.0f} tasks/s, every transition persisted, vs the "
        f"store alone {alone:,.0f} tasks/s (create + 4 saves, batches of 100) "
        f"-> {rate / alone:.2f}x (goal >= 1.0x: {_goal(rate >= alone)}); "
        f"vs the store alone writing the controller's rows in its batches {same:,.0f} "
        f"tasks/s -> {rate / same:.2f}x (the runtime adds {1e6 / rate - 1e6 / same:.0f} us "
        "per task)",
        flush=True,
    )
    if dsn is None:
        return
    with _postgres_store(dsn) as store:
        alone = store_rate(store, 3_000)
    with _postgres_store(dsn) as store:
        rate = controller_rate(store, 3_000, check_history=True)
    with _postgres_store(dsn) as store:
        same = store_same_writes_rate(store, 3_000)
    print(
        f"   PostgreSQL: Controller {rate:,.0f} tasks/s vs the store alone {alone:,.0f} "
        f"tasks/s -> {rate / alone:.2f}x (goal >= 1.8x: {_goal(rate >= 1.8 * alone)}); "
        f"vs the store alone writing the controller's rows in its batches {same:,.0f} "
        f"tasks/s -> {rate / same:.2f}x (the runtime adds {1e6 / rate - 1e6 / same:.0f} us "
        "per task)",
        flush=True,
    )


# ---------------------------------------------------------------------------- 3: latency
def bench_latency(folder: str) -> None:
    samples = 300
    pooled: list[float] = []
    with ThreadPoolExecutor(max_workers=4) as pool:
        for _ in range(samples):
            started = time.perf_counter()
            pool.submit(_noop_plain).result()
            pooled.append(time.perf_counter() - started)
    commits: list[float] = []
    with _sqlite_store(folder, "commit") as store:
        for _ in range(samples):
            machine = StateMachine.create(f"c-{uuid.uuid4().hex[:12]}", "noop")
            started = time.perf_counter()
            store.save_many([SnapshotWrite(machine.snapshot, None)])
            commits.append(time.perf_counter() - started)
    latencies: list[float] = []
    with _sqlite_store(folder, "latency") as store:
        controller = Controller(store=store, max_parallel=4)
        controller.register("noop", noop)
        for i in range(samples + 20):
            started = time.perf_counter()
            controller.submit("noop").wait(60)
            if i >= 20:  # the first ones warm up the threads and connections
                latencies.append(time.perf_counter() - started)
        controller.close()
    p50 = statistics.median(latencies) * 1e3
    print(
        f"3. submit-to-result of one no-op task, SQLite file: p50 {p50:.2f} ms, p95 "
        f"{_percentile(latencies, 0.95) * 1e3:.2f} ms over {samples} tasks; baselines: pool "
        f"submit().result() p50 {statistics.median(pooled) * 1e3:.3f} ms, one store commit p50 "
        f"{statistics.median(commits) * 1e3:.2f} ms (goal p50 <= 2 ms: {_goal(p50 <= 2.0)})",
        flush=True,
    )


# ---------------------------------------------------------------------------- 4: memory
def _rss() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _memory_child(kind: str, count: int, folder: str) -> None:
    """Print the RSS growth per queued task (runs in a fresh process)."""
    release = threading.Event()
    gc.collect()
    if kind == "pool":
        pool = ThreadPoolExecutor(max_workers=1)
        pool.submit(release.wait, 60)
        time.sleep(0.05)
        gc.collect()
        before = _rss()
        for _ in range(count):
            pool.submit(_noop_plain)
        gc.collect()
        after = _rss()
    else:
        store = SqliteTaskStore(os.path.join(folder, "memory.db"))
        controller = Controller(store=store, max_parallel=1)
        controller.register("block", lambda ctx: release.wait(120))
        controller.register("noop", noop)
        blocker = controller.submit("block")
        while blocker.status is not TaskStatus.RUNNING:
            time.sleep(0.001)
        controller.flush()
        gc.collect()
        before = _rss()
        for _ in range(count):
            controller.submit("noop")
        controller.flush()
        gc.collect()
        after = _rss()
        if controller.queued_count != count:
            raise RuntimeError(f"expected {count} queued tasks, got {controller.queued_count}")
    print(f"{(after - before) / count:.1f}", flush=True)
    os._exit(0)  # skip the teardown of 100,000 queued tasks


def _memory_per_task(kind: str, count: int, folder: str) -> float:
    result = subprocess.run(
        [sys.executable, str(HERE), "--memory", kind, str(count), folder],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"the memory child failed: {result.stderr[-2000:]}")
    return float(result.stdout.strip().splitlines()[-1])


def bench_memory(folder: str) -> None:
    count = 100_000
    pool = _memory_per_task("pool", count, folder)
    queued = _memory_per_task("controller", count, folder)
    print(
        f"4. memory per queued task ({count:,} behind one blocking task, max_parallel=1, SQLite "
        f"file): {queued:,.0f} B vs a ThreadPoolExecutor queue item {pool:,.0f} B "
        f"-> {queued / max(pool, 1.0):.1f}x (goal <= 1,229 B: {_goal(queued <= 1229)})",
        flush=True,
    )


# ---------------------------------------------------------------------------- 5: stop latency
def _open_store(kind: str, target: str) -> Any:
    if kind == "sqlite":
        return SqliteTaskStore(target)
    from chongming_store_postgres import PostgresTaskStore

    dsn, schema = target.split("#", 1)
    return PostgresTaskStore(dsn, schema=schema)


def _stop_worker(kind: str, target: str, count: int) -> None:
    """Hold `count` spinning tasks until they are stopped (runs in another process)."""
    store = _open_store(kind, target)
    controller = Controller(store=store, max_parallel=count, owner="bench-worker")
    controller.register("spin", spin)
    for i in range(count):
        controller.submit("spin", task_id=f"spin-{i}")
    print("ready", flush=True)
    try:
        controller.wait_all(timeout=240)
    finally:
        controller.close(timeout=30, close_store=True)


def _wait_status(store: TaskStore, task_id: str, status: TaskStatus, timeout: float) -> float:
    """Poll `store` every millisecond until `task_id` is `status`; returns when it was seen."""
    deadline = time.perf_counter() + timeout
    while True:
        snapshot = store.get(task_id)
        now = time.perf_counter()
        if snapshot is not None and snapshot.status is status:
            return now
        if now >= deadline:
            found = None if snapshot is None else snapshot.status.value
            raise TimeoutError(f"{task_id} did not become {status.value} (it is {found})")
        time.sleep(0.001)


def _stop_latencies(store: TaskStore, console: Controller, count: int) -> list[float]:
    latencies = []
    for i in range(count):
        task_id = f"spin-{i}"
        _wait_status(store, task_id, TaskStatus.RUNNING, 60)
        time.sleep(0.005 + (i % 4) * 0.005)  # land the stop at varied points of the 20 ms cycle
        started = time.perf_counter()
        if not console.stop(task_id, reason="benchmark"):
            raise RuntimeError(f"stop({task_id!r}) was refused")
        latencies.append(_wait_status(store, task_id, TaskStatus.STOPPED, 30) - started)
    return latencies


def _cross_process(kind: str, target: str, store: TaskStore, count: int) -> list[float]:
    worker = subprocess.Popen(
        [sys.executable, str(HERE), "--stop-worker", kind, target, str(count)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert worker.stdout is not None
        if worker.stdout.readline().strip() != "ready":
            raise RuntimeError("the stop worker did not start")
        console = Controller(store=store, owner="bench-console")
        return _stop_latencies(store, console, count)
    finally:
        try:
            worker.wait(timeout=60)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()


def _same_process(store: TaskStore, count: int) -> list[float]:
    controller = Controller(store=store, max_parallel=count, owner="bench-local")
    controller.register("spin", spin)
    for i in range(count):
        controller.submit("spin", task_id=f"spin-{i}")
    try:
        return _stop_latencies(store, controller, count)
    finally:
        controller.close(timeout=30)


def _report_stop(label: str, remote: list[float], local: list[float], goal_ms: float) -> None:
    p50, p95 = statistics.median(remote) * 1e3, _percentile(remote, 0.95) * 1e3
    print(
        f"   {label}: p50 {p50:.1f} ms, p95 {p95:.1f} ms over {len(remote)} stops; in the holding "
        f"process p50 {statistics.median(local) * 1e3:.1f} ms, p95 "
        f"{_percentile(local, 0.95) * 1e3:.1f} ms (goal p95 <= {goal_ms:g} ms: "
        f"{_goal(p95 <= goal_ms)})",
        flush=True,
    )


def bench_stop(folder: str, dsn: str | None) -> None:
    count = 20
    print(
        "5. cross-process stop latency, stop() here -> 'stopped' in the store, task checkpoints "
        "every 20 ms:",
        flush=True,
    )
    path = os.path.join(folder, "stop.db")
    with SqliteTaskStore(path) as store:
        remote = _cross_process("sqlite", path, store, count)
    with _sqlite_store(folder, "stop-local") as store:
        local = _same_process(store, count)
    _report_stop("SQLite file (poll_interval 0.1 s)", remote, local, 250)
    if dsn is None:
        return
    with _postgres_store(dsn) as store:
        remote = _cross_process("postgres", f"{dsn}#{store.schema}", store, count)
    with _postgres_store(dsn) as store:
        local = _same_process(store, count)
    _report_stop("PostgreSQL (LISTEN/NOTIFY)", remote, local, 50)


# ---------------------------------------------------------------------------- main
def main() -> None:
    """Measure and print every figure."""
    dsn = postgres_dsn()
    with tempfile.TemporaryDirectory(prefix="chongming-bench-") as folder:
        bench_throughput(folder, dsn)
        bench_latency(folder)
        bench_memory(folder)
        bench_stop(folder, dsn)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--memory":
        _memory_child(sys.argv[2], int(sys.argv[3]), sys.argv[4])
    elif len(sys.argv) > 1 and sys.argv[1] == "--stop-worker":
        _stop_worker(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        main()
