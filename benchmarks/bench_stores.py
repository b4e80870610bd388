"""Store benchmarks: write throughput against plain driver inserts, and behaviour at scale.

1. **Transitions persisted per second**, written as the controller writes them: a
   task is created at version 0, then saved four times with one transition each
   (queued, starting, running, succeeded). Three ways: one call per write (its own
   transaction), and `save_many` batches of 100 and of 1,000 tasks (one call per
   step of a batch). The baseline, in the same run, inserts the same rows (the
   snapshot as JSON text, and its transition) into two bare tables with the plain
   driver (`sqlite3` / `psycopg`), grouped into the same transactions: one per
   write, or one ``executemany`` per table per batch step.
2. **Scale**: `CHONGMING_BENCH_ROWS` tasks (default 100,000; the documented
   figures use 1,000,000) written with `save_many` in batches of 1,000, each with
   its whole history. Then: status / tag / bucket queries with ``limit=100``
   (oldest and newest first), `status_counts` and `bucket_counts` (goal: each under
   100 ms); `archive` of the oldest fifth of the history; and `prune` of 90% of
   the rows while a reader thread calls `get` and ``query(limit=10)`` in a loop
   (goal: no reader call waits a second or more). The reader's calls without
   any housekeeping running are the baseline.

Every part runs on a SQLite file and on PostgreSQL. The PostgreSQL DSN comes from
``CHONGMING_BENCH_POSTGRES`` or ``CHONGMING_TEST_POSTGRES``; without either (or
when the server does not answer) those parts are skipped with a note. They use a
unique schema that is dropped afterwards.

Run: ``python benchmarks/run.py stores`` (or ``make bench``);
``CHONGMING_BENCH_ROWS=1000000 python benchmarks/run.py stores`` for the 1M figures.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import random
import sqlite3
import statistics
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from chongming_core import (
    SnapshotWrite,
    TaskQuery,
    TaskSnapshot,
    TaskStatus,
    TaskStore,
    Transition,
)
from chongming_store_contract import build_task
from chongming_store_sqlite import SqliteTaskStore

DEFAULT_ROWS = 100_000
POPULATE_BATCH = 1_000
QUERY_REPEAT = 5
QUERY_GOAL_MS = 100.0
READER_GOAL_S = 1.0
_S = TaskStatus

#: Rows of the write benchmark: (backend, tasks written one call at a time, tasks in batches).
WRITE_TASKS = {"sqlite": (2_000, 10_000), "postgres": (1_000, 10_000)}

#: Statuses of the scale data, by ``i % 100``: 5% live, 95% terminal.
_MIX: tuple[tuple[int, TaskStatus], ...] = (
    (2, _S.RUNNING),
    (3, _S.QUEUED),
    (4, _S.PAUSED),
    (5, _S.RETRY_WAIT),
    (12, _S.FAILED),
    (15, _S.STOPPED),
    (100, _S.SUCCEEDED),
)


def _rows() -> int:
    raw = os.environ.get("CHONGMING_BENCH_ROWS", "").replace("_", "").replace(",", "")
    rows = int(raw) if raw else DEFAULT_ROWS
    if rows < 1_000:
        raise SystemExit(f"CHONGMING_BENCH_ROWS must be at least 1000, got {rows}")
    return rows


def _postgres_dsn() -> str | None:
    """The DSN to benchmark PostgreSQL with, or None (with a printed note) to skip it."""
    dsn = os.environ.get("CHONGMING_BENCH_POSTGRES") or os.environ.get("CHONGMING_TEST_POSTGRES")
    if not dsn:
        print(
            "  (PostgreSQL parts skipped: set CHONGMING_BENCH_POSTGRES or CHONGMING_TEST_POSTGRES)"
        )
        return None
    try:
        import psycopg

        with psycopg.connect(dsn, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:  # any failure means: skip the PostgreSQL parts
        print(f"  (PostgreSQL parts skipped: the server does not answer: {type(exc).__name__})")
        return None
    return dsn


# ---------------------------------------------------------------------------- backends
@dataclass
class Backend:
    """One store under test, plus a bare connection of the same driver for the baselines."""

    name: str
    store: TaskStore
    plain: PlainWriter
    #: Run after the bulk load of the scale part (PostgreSQL: what autovacuum would do).
    settle: Callable[[], None] | None = None


class PlainWriter:
    """Plain inserts of pre-serialised rows into two bare tables (no keys, no indexes)."""

    def write_each(self, writes: Sequence[PlainRows]) -> None:
        """One transaction per write."""
        raise NotImplementedError

    def write_batch(self, writes: Sequence[PlainRows]) -> None:
        """One transaction for all `writes`: one ``executemany`` per table."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the connection."""


PlainRows = tuple[tuple[str, int, str], tuple[tuple[str, int, str], ...]]

_PLAIN_TABLES = (
    "CREATE TABLE plain_snapshots (task_id TEXT, status_version BIGINT, data TEXT)",
    "CREATE TABLE plain_transitions (task_id TEXT, status_version BIGINT, data TEXT)",
)


class SqlitePlain(PlainWriter):
    """`sqlite3` on its own file, WAL and ``synchronous=NORMAL`` like the store."""

    def __init__(self, path: str) -> None:
        self._conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = NORMAL")
        for statement in _PLAIN_TABLES:
            self._conn.execute(statement)

    def write_each(self, writes: Sequence[PlainRows]) -> None:
        """See `PlainWriter.write_each`."""
        conn = self._conn
        for snapshot, transitions in writes:
            conn.execute("BEGIN")
            conn.execute("INSERT INTO plain_snapshots VALUES (?, ?, ?)", snapshot)
            for row in transitions:
                conn.execute("INSERT INTO plain_transitions VALUES (?, ?, ?)", row)
            conn.execute("COMMIT")

    def write_batch(self, writes: Sequence[PlainRows]) -> None:
        """See `PlainWriter.write_batch`."""
        conn = self._conn
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO plain_snapshots VALUES (?, ?, ?)", [w[0] for w in writes])
        conn.executemany(
            "INSERT INTO plain_transitions VALUES (?, ?, ?)", [r for w in writes for r in w[1]]
        )
        conn.execute("COMMIT")

    def close(self) -> None:
        """See `PlainWriter.close`."""
        self._conn.close()


class PostgresPlain(PlainWriter):
    """`psycopg` in pipeline mode (one round trip per transaction), in the store's schema."""

    def __init__(self, dsn: str, schema: str) -> None:
        import psycopg
        from psycopg import sql

        self._conn = psycopg.connect(dsn, autocommit=True)
        self._conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        for statement in _PLAIN_TABLES:
            self._conn.execute(statement.replace("TEXT", "text"))

    def write_each(self, writes: Sequence[PlainRows]) -> None:
        """See `PlainWriter.write_each`."""
        conn = self._conn
        for snapshot, transitions in writes:
            with conn.pipeline(), conn.transaction():
                conn.execute("INSERT INTO plain_snapshots VALUES (%s, %s, %s)", snapshot)
                for row in transitions:
                    conn.execute("INSERT INTO plain_transitions VALUES (%s, %s, %s)", row)

    def write_batch(self, writes: Sequence[PlainRows]) -> None:
        """See `PlainWriter.write_batch`."""
        conn = self._conn
        with conn.pipeline(), conn.transaction(), conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO plain_snapshots VALUES (%s, %s, %s)", [w[0] for w in writes]
            )
            cur.executemany(
                "INSERT INTO plain_transitions VALUES (%s, %s, %s)",
                [r for w in writes for r in w[1]],
            )

    def close(self) -> None:
        """See `PlainWriter.close`."""
        self._conn.close()


@contextlib.contextmanager
def sqlite_backend(folder: str, name: str) -> Iterator[Backend]:
    """A `SqliteTaskStore` file and a plain `sqlite3` file next to it."""
    store = SqliteTaskStore(os.path.join(folder, f"{name}.db"))
    plain = SqlitePlain(os.path.join(folder, f"{name}-plain.db"))
    try:
        yield Backend("SQLite file", store, plain)
    finally:
        plain.close()
        store.close()


@contextlib.contextmanager
def postgres_backend(dsn: str) -> Iterator[Backend]:
    """A `PostgresTaskStore` in a fresh schema (dropped afterwards) and a plain connection."""
    import psycopg
    from psycopg import sql

    from chongming_store_postgres import PostgresTaskStore

    schema = f"chongming_bench_{uuid.uuid4().hex[:12]}"
    store = PostgresTaskStore(dsn, schema=schema)
    try:
        plain = PostgresPlain(dsn, schema)

        def vacuum() -> None:
            with psycopg.connect(dsn, autocommit=True) as conn:
                for table in ("tasks", "transitions", "commands"):
                    conn.execute(
                        sql.SQL("VACUUM (ANALYZE) {}").format(sql.Identifier(schema, table))
                    )

        try:
            yield Backend("PostgreSQL", store, plain, vacuum)
        finally:
            plain.close()
    finally:
        store.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


# ---------------------------------------------------------------------------- 1: writes
def _chain_template() -> tuple[list[TaskSnapshot], list[Transition]]:
    """Versions 0..4 of one task (pending to succeeded) and its four transitions."""
    built = build_task("template", _S.SUCCEEDED, tags=frozenset({"bench"}), bucket=3)
    transitions = list(built.transitions)
    snapshots = [built.snapshot]
    # walk back: version n-1 is not kept by the builder, so rebuild each prefix
    for status in (_S.RUNNING, _S.STARTING, _S.QUEUED, _S.PENDING):
        snapshots.insert(0, build_task("template", status, tags=frozenset({"bench"}), bucket=3)[0])
    return snapshots, transitions


def write_chains(prefix: str, tasks: int) -> list[list[SnapshotWrite]]:
    """Per task, its five writes: the create at version 0, then four saves of one transition."""
    snapshots, transitions = _chain_template()
    chains = []
    for i in range(tasks):
        task_id = f"{prefix}-{i}"
        versions = [s.evolve(task_id=task_id) for s in snapshots]
        moves = [dataclasses.replace(t, task_id=task_id) for t in transitions]
        chain = [SnapshotWrite(versions[0], None)]
        chain.extend(
            SnapshotWrite(versions[v], v - 1, (moves[v - 1],)) for v in range(1, len(versions))
        )
        chains.append(chain)
    return chains


def plain_rows(write: SnapshotWrite) -> PlainRows:
    """The baseline's rows of one write: the snapshot and its transitions as JSON text."""
    s = write.snapshot
    return (
        (s.task_id, s.status_version, json.dumps(s.to_dict())),
        tuple((t.task_id, t.status_version, json.dumps(t.to_dict())) for t in write.transitions),
    )


def _steps(chains: list[list[SnapshotWrite]], batch: int | None) -> list[list[SnapshotWrite]]:
    """The calls to make: one write each (`batch` None), or per group of `batch` tasks one
    call per step (all creates, then all first saves, ...), as a group commit does."""
    if batch is None:
        return [[w] for chain in chains for w in chain]
    calls: list[list[SnapshotWrite]] = []
    for start in range(0, len(chains), batch):
        group = chains[start : start + batch]
        calls.extend([chain[step] for chain in group] for step in range(len(group[0])))
    return calls


def _timed(body: Callable[[], None]) -> float:
    started = time.perf_counter()
    body()
    return time.perf_counter() - started


def write_rate(backend: Backend, tasks: int, batch: int | None) -> tuple[float, float]:
    """Transitions per second through the store and through the plain baseline."""
    label = "one" if batch is None else str(batch)
    calls = _steps(write_chains(f"w{label}-{uuid.uuid4().hex[:6]}", tasks), batch)
    plain_calls = [[plain_rows(w) for w in call] for call in calls]
    transitions = sum(len(w.transitions) for call in calls for w in call)
    store = backend.store
    plain = backend.plain

    def through_store() -> None:
        for call in calls:
            if batch is not None:
                conflicts = store.save_many(call)
                if conflicts:
                    raise RuntimeError(f"unexpected conflicts: {conflicts[:3]}")
            elif call[0].expect_version is None:
                store.create(call[0].snapshot, call[0].transitions)
            else:
                w = call[0]
                assert w.expect_version is not None
                store.save(w.snapshot, expect_version=w.expect_version, transitions=w.transitions)

    def through_plain() -> None:
        for call in plain_calls:
            if batch is None:
                plain.write_each(call)
            else:
                plain.write_batch(call)

    plain_s = _timed(through_plain)
    store_s = _timed(through_store)
    return transitions / store_s, transitions / plain_s


def bench_writes(backend: Backend, key: str) -> None:
    """Item 1 for one backend."""
    single, batched = WRITE_TASKS[key]
    write_rate(backend, 20, None)  # warm up connections and statement caches
    write_rate(backend, 200, 100)
    print(f"  {backend.name}: transitions persisted per second (4 per task)")
    print(f"    {'mode':<22}{'tasks':>8}{'store':>12}{'plain driver':>15}{'ratio':>8}")
    for batch, tasks in ((None, single), (100, batched), (1_000, batched)):
        store_rate, plain_rate = write_rate(backend, tasks, batch)
        mode = "one call per write" if batch is None else f"save_many, {batch:,} tasks"
        print(
            f"    {mode:<22}{tasks:>8,}{store_rate:>10,.0f}/s{plain_rate:>13,.0f}/s"
            f"{store_rate / plain_rate:>7.2f}x"
        )


# ---------------------------------------------------------------------------- 2: scale
class ScaleData:
    """The tasks of the scale benchmark, generated in order from per-status templates."""

    def __init__(self, rows: int) -> None:
        self.rows = rows
        self._templates = {status: build_task("template", status) for _, status in _MIX}

    @staticmethod
    def status_of(i: int) -> TaskStatus:
        """The status of task `i`."""
        r = i % 100
        return next(status for bound, status in _MIX if r < bound)

    @staticmethod
    def task_id(i: int) -> str:
        """The id of task `i`."""
        return f"task-{i:07d}"

    def write(self, i: int) -> SnapshotWrite:
        """The create of task `i` with its whole history."""
        snapshot, transitions = self._templates[self.status_of(i)]
        task_id = self.task_id(i)
        tags = {f"team-{i % 10}"} | ({"urgent"} if i % 1_000 == 0 else set())
        changes: dict[str, Any] = {"task_id": task_id, "tags": frozenset(tags), "bucket": i % 64}
        if snapshot.finished_at is not None:  # each task finishes one second after the last
            changes["finished_at"] = changes["updated_at"] = snapshot.finished_at + timedelta(
                seconds=i
            )
        moves = tuple(dataclasses.replace(t, task_id=task_id) for t in transitions)
        return SnapshotWrite(snapshot.evolve(**changes), None, moves)

    def cut_before(self, i: int) -> datetime:
        """A moment after the tasks before `i` finished and before the later ones did."""
        finished = self._templates[_S.SUCCEEDED].snapshot.finished_at
        assert finished is not None
        return finished + timedelta(seconds=i)

    def terminal_count(self) -> int:
        """How many of the rows are terminal."""
        return sum(1 for i in range(self.rows) if self.status_of(i).is_terminal)


def populate(store: TaskStore, data: ScaleData) -> float:
    """Create every task with `save_many`; returns tasks per second."""
    elapsed = 0.0
    for start in range(0, data.rows, POPULATE_BATCH):
        writes = [data.write(i) for i in range(start, min(data.rows, start + POPULATE_BATCH))]
        began = time.perf_counter()
        if store.save_many(writes):
            raise RuntimeError("the scale data conflicted with itself")
        elapsed += time.perf_counter() - began
    return data.rows / elapsed


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _measure(call: Callable[[], object]) -> tuple[float, float]:
    """Median and worst of `QUERY_REPEAT` calls, in seconds (the first one is cold)."""
    times = []
    for _ in range(QUERY_REPEAT):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times), max(times)


def bench_queries(store: TaskStore, data: ScaleData) -> None:
    """Filtered queries with ``limit=100`` and the per-status and per-bucket counts."""
    probes: list[tuple[str, TaskQuery]] = [
        ("status running (2%)", TaskQuery(statuses=frozenset({_S.RUNNING}))),
        ("status succeeded (85%)", TaskQuery(statuses=frozenset({_S.SUCCEEDED}))),
        ("tag urgent (0.1%)", TaskQuery(tag="urgent")),
        ("tag team-3 (10%)", TaskQuery(tag="team-3")),
        ("bucket 5 (1.6%)", TaskQuery(bucket=5)),
    ]
    worst = 0.0
    one_id = data.task_id(data.rows // 2)
    median, top = _measure(lambda: store.get(one_id))
    print(f"    {'get() of one task (reference)':<36}{_ms(median):>12}{_ms(top):>12}")
    for label, base in probes:
        for newest in (False, True):
            q = dataclasses.replace(base, limit=100, newest_first=newest)
            found = store.query(q)
            if not found or len(found) > 100 or not all(q.matches(s) for s in found):
                raise RuntimeError(f"query {label} returned a wrong result")
            median, top = _measure(lambda q=q: store.query(q))  # type: ignore[misc]
            worst = max(worst, top)
            order = "newest first" if newest else "oldest first"
            print(f"    {f'{label}, {order}':<36}{_ms(median):>12}{_ms(top):>12}")
    counts = store.status_counts()
    if sum(counts.values()) != data.rows:
        raise RuntimeError(f"status_counts() does not add up to {data.rows}: {counts}")
    for label, count_call in (
        ("status_counts()", store.status_counts),
        ("bucket_counts()", store.bucket_counts),
    ):
        median, top = _measure(count_call)
        worst = max(worst, top)
        print(f"    {label:<36}{_ms(median):>12}{_ms(top):>12}")
    verdict = "met" if worst < QUERY_GOAL_MS / 1000 else "NOT MET"
    print(f"    slowest call {_ms(worst)}: goal < {QUERY_GOAL_MS:.0f} ms {verdict}")


class Reader:
    """A thread calling `get` and ``query(limit=10)`` in turn, timing every call."""

    def __init__(self, store: TaskStore, data: ScaleData) -> None:
        self._store = store
        self._data = data
        self._stop = threading.Event()
        self.calls: list[float] = []
        self._thread = threading.Thread(target=self._loop, name="bench-reader", daemon=True)

    def _loop(self) -> None:
        rng = random.Random(7)
        query = TaskQuery(limit=10)
        while not self._stop.is_set():
            task_id = self._data.task_id(rng.randrange(self._data.rows))
            started = time.perf_counter()
            self._store.get(task_id)
            middle = time.perf_counter()
            self._store.query(query)
            self.calls.extend((middle - started, time.perf_counter() - middle))

    def __enter__(self) -> Reader:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def summary(self) -> str:
        """Calls made, median, 99th percentile and the longest wait."""
        ordered = sorted(self.calls) or [0.0]
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        return (
            f"{len(ordered):,} calls, median {_ms(statistics.median(ordered))}, "
            f"p99 {_ms(p99)}, longest {_ms(ordered[-1])}"
        )


def bench_housekeeping(store: TaskStore, data: ScaleData, folder: str) -> None:
    """`archive` of the oldest fifth, then `prune` of 90% of the rows, each beside a reader."""
    with Reader(store, data) as idle:
        time.sleep(1.0)
    print(f"    reader alone (baseline): {idle.summary()}")

    cut = data.cut_before(data.rows // 5)
    archive_path = Path(folder) / f"archive-{uuid.uuid4().hex[:6]}.jsonl"
    with Reader(store, data) as reader:
        started = time.perf_counter()
        moved = store.archive(finished_before=cut, path=archive_path)
        archive_s = time.perf_counter() - started
    size = archive_path.stat().st_size if archive_path.exists() else 0
    archive_path.unlink(missing_ok=True)
    print(
        f"    archive: {moved:,} transitions ({size / 1e6:.0f} MB) in {archive_s:.1f} s "
        f"= {moved / archive_s:,.0f}/s"
    )
    print(f"      reader meanwhile: {reader.summary()}")

    doomed = data.rows * 9 // 10
    keep = data.terminal_count() - doomed
    with Reader(store, data) as reader:
        started = time.perf_counter()
        deleted = store.prune(keep)
        prune_s = time.perf_counter() - started
    if deleted != doomed:
        raise RuntimeError(f"prune deleted {deleted:,} tasks, expected {doomed:,}")
    print(f"    prune: {deleted:,} terminal tasks in {prune_s:.1f} s = {deleted / prune_s:,.0f}/s")
    print(f"      reader meanwhile: {reader.summary()}")
    longest = max(reader.calls, default=0.0)
    verdict = "met" if longest < READER_GOAL_S else "NOT MET"
    print(f"      longest reader wait {_ms(longest)}: goal < {READER_GOAL_S:.0f} s {verdict}")
    for label, call in (
        ("status_counts() after prune", store.status_counts),
        ("query(limit=10) after prune", lambda: store.query(TaskQuery(limit=10))),
    ):
        median, top = _measure(call)
        print(f"    {label:<36}{_ms(median):>12}{_ms(top):>12}")


def bench_scale(backend: Backend, rows: int, folder: str) -> None:
    """Item 2 for one backend."""
    data = ScaleData(rows)
    print(f"  {backend.name}: {rows:,} tasks")
    rate = populate(backend.store, data)
    print(f"    populated with save_many({POPULATE_BATCH:,}): {rate:,.0f} tasks/s")
    if backend.settle is not None:
        median, top = _measure(backend.store.status_counts)
        started = time.perf_counter()
        backend.settle()
        print(
            f"    status_counts() right after the load: median {_ms(median)}, worst {_ms(top)}; "
            f"VACUUM (ANALYZE) took {time.perf_counter() - started:.1f} s"
        )
    print(f"    {'call':<36}{'median':>12}{'worst of 5':>12}")
    bench_queries(backend.store, data)
    bench_housekeeping(backend.store, data, folder)


def main() -> None:
    """Run both parts on SQLite and (when configured) PostgreSQL."""
    rows = _rows()
    dsn = _postgres_dsn()
    with tempfile.TemporaryDirectory(prefix="chongming-bench-") as folder:
        with sqlite_backend(folder, "writes") as backend:
            bench_writes(backend, "sqlite")
        if dsn is not None:
            with postgres_backend(dsn) as backend:
                bench_writes(backend, "postgres")
        with sqlite_backend(folder, "scale") as backend:
            bench_scale(backend, rows, folder)
        if dsn is not None:
            with postgres_backend(dsn) as backend:
                bench_scale(backend, rows, folder)


if __name__ == "__main__":
    main()
