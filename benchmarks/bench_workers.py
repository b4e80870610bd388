"""Durable work benchmarks: a producer and worker processes sharing one store.

Every figure is printed next to a baseline measured in the same run (this machine's
absolute speed varies threefold from day to day):

1. Drain: enqueue 10,000 no-op durable tasks (``enqueue_many``), then start two worker
   processes of four threads each; first enqueue to last completion, every transition
   and its history persisted. Baseline: the store alone doing the same writes (the
   create of a queued task, then its starting, running and succeeded saves with their
   transitions, in batches of 100). Goals: >= 1.0x on PostgreSQL, >= 0.3x on SQLite.
2. Enqueue: ``enqueue_many`` (batches of 500) against single ``enqueue`` calls (goal
   >= 3x).
3. Latency: ``enqueue`` here to the body starting in an idle worker process (the body
   returns the time it began), each after an idle pause of 3-11 ms. Baseline on
   PostgreSQL: a bare insert-commit-NOTIFY to LISTEN wake-up round trip after the same
   pauses (goal p50 <= 3x; the same round trip back to back is printed beside it: this
   host takes twice as long to wake an idle process); on SQLite the goal is p50 <= the
   worker's poll interval + 5 ms.
4. An idle worker's CPU over 5 s, from /proc/PID/task/*/schedstat (goal < 1 % of a core).

PostgreSQL parts use ``CHONGMING_TEST_POSTGRES`` (default
``postgresql://postgres@127.0.0.1:5432/test``) with a unique schema dropped afterwards.

Run: ``python benchmarks/run.py workers`` (or ``make bench``).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from chongming_core import SnapshotWrite, StateMachine, TaskStatus, TaskStore
from chongming_runtime import Controller
from chongming_store_sqlite import SqliteTaskStore

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # run or loaded by path
from _postgres import drop_schema, postgres_dsn

HERE = Path(__file__).resolve()
POLL = 0.1  # the workers' poll interval: the default (commands; the claims' fallback)
TASKS = 10_000


def noop(ctx: Any) -> float:
    """Return the time the body began (seconds since the epoch)."""
    return time.time()


def _goal(ok: bool) -> str:
    return "OK" if ok else "MISSED"


def open_store(target: str) -> TaskStore:
    """A SQLite file, or ``postgresql://...#schema``."""
    if target.startswith("postgresql://"):
        from chongming_store_postgres import PostgresTaskStore

        dsn, schema = target.split("#", 1)
        return PostgresTaskStore(dsn, schema=schema)
    return SqliteTaskStore(target)


@contextlib.contextmanager
def _target(kind: str, folder: str, dsn: str | None) -> Iterator[str]:
    """A fresh store location of `kind`, removed afterwards."""
    if kind == "sqlite":
        yield os.path.join(folder, f"work-{uuid.uuid4().hex[:8]}.db")
        return
    assert dsn is not None
    schema = f"chongming_bench_{uuid.uuid4().hex[:12]}"
    try:
        yield f"{dsn}#{schema}"
    finally:
        drop_schema(dsn, schema)


# ---------------------------------------------------------------- worker processes
def _worker(target: str, owner: str, threads: int, leave: str) -> None:
    """Serve `noop` until the file `leave` exists (runs in a process of its own)."""
    store = open_store(target)
    controller = Controller(store=store, owner=owner, max_parallel=threads, poll_interval=POLL)
    controller.register("noop", noop)
    controller.serve()
    print("ready", flush=True)
    while not os.path.exists(leave):
        time.sleep(0.05)
    controller.close(timeout=60)
    store.close()


@contextlib.contextmanager
def workers(target: str, count: int, threads: int, folder: str) -> Iterator[list[Any]]:
    """`count` worker processes serving `target`; they leave at the end of the block."""
    leave = os.path.join(folder, f"leave-{uuid.uuid4().hex[:8]}")
    procs = [
        subprocess.Popen(
            [sys.executable, str(HERE), "--worker", target, f"w{n}", str(threads), leave],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(count)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                raise RuntimeError("a worker did not start")
        yield procs
    finally:
        Path(leave).touch()
        for proc in procs:
            try:
                proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# ---------------------------------------------------------------- 1: drain
def store_alone(store: TaskStore, tasks: int, batch: int = 100) -> float:
    """The store alone: create a queued task, then save starting, running and succeeded."""
    rounds = []
    for start in range(0, tasks, batch):
        machines = []
        for _ in range(min(batch, tasks - start)):
            machine = StateMachine.create(f"alone-{uuid.uuid4().hex[:12]}", "noop", durable=True,
                                          arguments={"args": [], "kwargs": {}})  # fmt: skip
            machine.mark_queued()
            machines.append(machine)
        steps = [[SnapshotWrite(m.snapshot, None, m.transitions) for m in machines]]
        for move in ("starting", "running", "succeeded"):
            step = []
            for m in machines:
                version = m.version
                if move == "starting":
                    m.mark_starting(executor="thread")
                elif move == "running":
                    m.mark_running(pid=1)
                else:
                    m.mark_succeeded()
                step.append(SnapshotWrite(m.snapshot, version, (m.transitions[-1],)))
            steps.append(step)
        rounds.append(steps)
    started = time.perf_counter()
    for steps in rounds:
        for writes in steps:
            store.save_many(writes)
    return tasks / (time.perf_counter() - started)


def drain(target: str, folder: str, tasks: int) -> float:
    """Tasks per second from the first enqueue to the last completion."""
    store = open_store(target)
    producer = Controller(store=store, owner="producer")
    with workers(target, 2, 4, folder):
        started = time.perf_counter()
        for start in range(0, tasks, 1000):
            producer.enqueue_many("noop", [() for _ in range(min(1000, tasks - start))])
        deadline = started + 600
        while store.status_counts().get(TaskStatus.SUCCEEDED, 0) < tasks:
            if time.perf_counter() > deadline:
                raise RuntimeError(f"not drained in 600 s: {store.status_counts()}")
            time.sleep(0.1)  # a count reads every row: not too often
        elapsed = time.perf_counter() - started
    counts = store.status_counts()
    if counts.get(TaskStatus.SUCCEEDED, 0) != tasks or len(counts) != 1:
        raise RuntimeError(f"expected {tasks} succeeded tasks, found {counts}")
    producer.close()
    store.close()
    return tasks / elapsed


# ---------------------------------------------------------------- 2: enqueue rates
def enqueue_rates(target: str) -> tuple[float, float]:
    """(single enqueue calls per second, tasks per second through enqueue_many), each the
    best of three rounds: one round is a fraction of a second, which a busy moment of this
    machine would otherwise decide."""
    store = open_store(target)
    producer = Controller(store=store, owner="producer")
    count = 2000
    single = many = 0.0
    for _ in range(3):
        started = time.perf_counter()
        for _ in range(count):
            producer.enqueue("noop")
        single = max(single, count / (time.perf_counter() - started))
        started = time.perf_counter()
        for _ in range(4):
            producer.enqueue_many("noop", [() for _ in range(500)])
        many = max(many, count / (time.perf_counter() - started))
    producer.close()
    store.close()
    return single, many


# ---------------------------------------------------------------- 3: latency
def idle_gap(i: int) -> float:
    """The pause before sample `i` of a latency: the worker (or listener) is idle, and is
    woken at varied points."""
    return 0.003 + (i % 5) * 0.002


def latencies(target: str, folder: str, samples: int = 100) -> list[float]:
    """Seconds from `enqueue` here to the body beginning in an idle worker process."""
    store = open_store(target)
    producer = Controller(store=store, owner="producer")
    found = []
    with workers(target, 1, 4, folder):
        for i in range(samples + 10):
            time.sleep(idle_gap(i))
            sent = time.time()
            task_id = producer.enqueue("noop")
            began = producer.wait(task_id, timeout=60).value
            if i >= 10:
                found.append(float(began) - sent)
    producer.close()
    store.close()
    return found


def notify_round_trips(dsn: str, samples: int = 100, *, gaps: bool = True) -> list[float]:
    """A bare insert-commit-NOTIFY to LISTEN wake-up round trip on PostgreSQL: with `gaps`,
    each after the same idle pause as a sample of `latencies` (an idle process, and an idle
    server, take longer to wake: 1.3-1.4 ms here against 0.55-0.68 ms back to back)."""
    import psycopg

    table = f"bench_notify_{uuid.uuid4().hex[:8]}"
    found = []
    with psycopg.connect(dsn, autocommit=True) as listener, psycopg.connect(dsn) as sender:
        sender.execute(f"CREATE TABLE {table} (id bigserial PRIMARY KEY, body text)")
        sender.commit()
        listener.execute(f"LISTEN {table}")
        try:
            for i in range(samples + 10):
                if gaps:
                    time.sleep(idle_gap(i))
                sent = time.perf_counter()
                sender.execute(f"INSERT INTO {table} (body) VALUES ('x')")
                sender.execute(f"NOTIFY {table}")
                sender.commit()
                for _ in listener.notifies(timeout=5, stop_after=1):
                    if i >= 10:
                        found.append(time.perf_counter() - sent)
        finally:
            sender.execute(f"DROP TABLE {table}")
            sender.commit()
    return found


# ---------------------------------------------------------------- 4: idle cost
def idle_cpu(target: str, folder: str, seconds: float = 5.0) -> float:
    """An idle worker's CPU over `seconds`, as a fraction of one core: the time its threads
    spent on a CPU, from /proc/PID/task/*/schedstat (nanoseconds; the clock ticks of
    /proc/PID/stat count 10 ms each, 0.2 % of a core over 5 s)."""
    with workers(target, 1, 4, folder) as procs:
        time.sleep(1.0)
        tasks = Path(f"/proc/{procs[0].pid}/task")

        def cpu() -> dict[str, int]:
            spent = {}
            for thread in tasks.iterdir():
                with contextlib.suppress(OSError):  # a thread that ended meanwhile
                    spent[thread.name] = int((thread / "schedstat").read_text().split()[0])
            return spent

        before = cpu()
        time.sleep(seconds)
        after = cpu()
        # a thread started meanwhile counts from 0; one that ended is left out (an idle
        # worker starts and ends none)
        used = sum(ns - before.get(tid, 0) for tid, ns in after.items())
        return used / 1e9 / seconds


def _p(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]


def bench(kind: str, folder: str, dsn: str | None) -> None:
    label = "SQLite file" if kind == "sqlite" else "PostgreSQL"
    with _target(kind, folder, dsn) as target:
        store = open_store(target)
        # the same writes as the drain's: as many tasks (a store writes a few thousand
        # tasks faster per task than ten thousand, into a table that is still small)
        alone = store_alone(store, TASKS)
        store.close()
    with _target(kind, folder, dsn) as target:
        rate = drain(target, folder, TASKS)
    goal = 0.3 if kind == "sqlite" else 1.0
    print(
        f"1. {label}: {TASKS:,} durable no-op tasks, 2 workers x 4 threads: {rate:,.0f} tasks/s "
        f"vs the store alone {alone:,.0f}/s -> {rate / alone:.2f}x "
        f"(goal >= {goal}x: {_goal(rate >= goal * alone)})",
        flush=True,
    )
    with _target(kind, folder, dsn) as target:
        single, many = enqueue_rates(target)
    print(
        f"2. {label}: enqueue_many {many:,.0f} tasks/s vs single enqueue {single:,.0f}/s -> "
        f"{many / single:.1f}x (goal >= 3x: {_goal(many >= 3 * single)})",
        flush=True,
    )
    with _target(kind, folder, dsn) as target:
        found = latencies(target, folder)
    p50 = statistics.median(found) * 1e3
    if kind == "sqlite":
        bound = POLL * 1e3 + 5
        verdict = f"goal p50 <= poll interval {POLL * 1e3:g} ms + 5 ms: {_goal(p50 <= bound)}"
    else:
        assert dsn is not None
        trip = statistics.median(notify_round_trips(dsn)) * 1e3
        hot = statistics.median(notify_round_trips(dsn, gaps=False)) * 1e3
        verdict = (
            f"a bare insert-commit-NOTIFY-to-LISTEN round trip after the same idle pauses "
            f"p50 {trip:.2f} ms -> {p50 / trip:.1f}x (goal <= 3x: {_goal(p50 <= 3 * trip)}); "
            f"back to back {hot:.2f} ms -> {p50 / hot:.1f}x"
        )
    print(
        f"3. {label}: enqueue to the body starting in a worker: p50 {p50:.2f} ms, p95 "
        f"{_p(found, 0.95) * 1e3:.2f} ms over {len(found)}; {verdict}",
        flush=True,
    )
    with _target(kind, folder, dsn) as target:
        share = idle_cpu(target, folder)
    print(
        f"4. {label}: an idle worker uses {share * 100:.2f} % of a core "
        f"(goal < 1 %: {_goal(share < 0.01)})",
        flush=True,
    )


def main() -> None:
    """Measure and print every figure."""
    dsn = postgres_dsn()
    with tempfile.TemporaryDirectory(prefix="chongming-bench-") as folder:
        bench("sqlite", folder, dsn)
        if dsn is not None:
            bench("postgres", folder, dsn)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        _worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    else:
        threading.current_thread().name = "bench"
        main()
