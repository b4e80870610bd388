"""Dashboard: one refresh tick over a 100,000-task store, against a bare ``count(*)``.

A tick is what the dashboard does every second, off the UI thread
(`chongming_tui._data.fetch`): ``stats()`` (per-status counts of the whole
store), ``list_tasks(<view>, limit=200)`` (the default row limit) and, with a
task open in the detail view, ``get`` + ``history``. It is timed for the views
an operator switches between, then the UI side (turning the snapshots into
table rows) is timed in a headless app. Two baselines are measured on the same store in the same
run, so the ratios mean the same on any machine: a bare ``SELECT count(*)``
and a raw read of the newest 200 rows (``SELECT * ... LIMIT 200``, no decoding).

Postgres is measured too when ``CHONGMING_BENCH_POSTGRES`` (or
``CHONGMING_TEST_POSTGRES``) holds a DSN; a throw-away schema is used.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import sqlite3
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

from chongming_core import (
    SYSTEM_CLOCK,
    Failure,
    FailureKind,
    FakeClock,
    Progress,
    SnapshotWrite,
    StateMachine,
    TaskStore,
)
from chongming_runtime import Controller, display_width
from chongming_store_sqlite import SqliteTaskStore
from chongming_tui import DashboardApp
from chongming_tui._data import fetch
from chongming_tui._filters import StatusGroup, TaskFilter

TASKS = 100_000
BATCH = 5_000
ROUNDS = 15
BUDGET_MS = 100.0
LIMIT = TaskFilter().limit

#: (share of the store, how a task of that kind was driven)
_MIX: tuple[tuple[float, str], ...] = (
    (0.80, "succeeded"),
    (0.05, "failed"),
    (0.01, "lost"),
    (0.02, "stopped"),
    (0.04, "running"),
    (0.06, "queued"),
    (0.02, "paused"),
)


def _template(kind: str, clock: FakeClock) -> StateMachine:
    m = StateMachine.create("tmpl", "transform", max_attempts=3, clock=clock)
    m.mark_queued(actor="worker-1")
    if kind == "queued":
        return m
    m.mark_starting(executor="thread", actor="worker-1")
    m.mark_running(actor="worker-1")
    if kind == "succeeded":
        m.mark_succeeded(outcome=None, actor="worker-1")
    elif kind == "failed":
        m.mark_failed(Failure.of(FailureKind.EXCEPTION, "ValueError: bad row"), actor="worker-1")
    elif kind == "lost":
        m.mark_lost(Failure.of(FailureKind.LOST, "lease expired"), actor="reconcile")
    elif kind == "stopped":
        m.mark_stopping(actor="ops", reason="发布窗口")
        m.mark_stopped(actor="worker-1", reason="发布窗口")
    elif kind == "paused":
        m.mark_pausing(actor="ops")
        m.mark_paused(actor="worker-1")
    return m


def _writes(clock: FakeClock) -> Iterator[list[SnapshotWrite]]:
    """100,000 creates in batches, each task with its whole (legal) trajectory."""
    templates = {kind: _template(kind, clock) for _, kind in _MIX}
    kinds = [kind for share, kind in _MIX for _ in range(round(share * 100))]
    now = clock.now()
    batch: list[SnapshotWrite] = []
    for i in range(TASKS):
        kind = kinds[i % len(kinds)]
        machine = templates[kind]
        task_id = f"task-{i:06d}"
        live = kind in {"running", "paused"}
        snapshot = machine.snapshot.evolve(
            task_id=task_id,
            name=("transform", "load", "sync", "report")[i % 4],
            label=f"转换-{i}",
            tags=frozenset({("etl", "io", "nightly")[i % 3]}),
            bucket=i % 64,
            progress=Progress(i % 500, 500, "rows") if live else None,
            lease_owner=f"worker-{i % 8}" if live else None,
            lease_until=now + timedelta(seconds=30) if live else None,
        )
        history = tuple(dataclasses.replace(t, task_id=task_id) for t in machine.transitions)
        batch.append(SnapshotWrite(snapshot, None, history))
        if len(batch) == BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _fill(store: TaskStore) -> float:
    started = time.perf_counter()
    for batch in _writes(FakeClock()):
        conflicts = store.save_many(batch)
        assert not conflicts, conflicts[:1]
    return time.perf_counter() - started


def _pad(text: str, width: int) -> str:
    return text + " " * max(0, width - display_width(text))


def _median_ms(action: Callable[[], Any], rounds: int = ROUNDS) -> tuple[float, float]:
    action()  # warm caches and connections
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        action()
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.9)]


_VIEWS: tuple[tuple[str, TaskFilter], ...] = (
    ("all, newest 200", TaskFilter()),
    ("active", TaskFilter(group=StatusGroup.ACTIVE)),
    ("queued", TaskFilter(group=StatusGroup.QUEUED)),
    ("paused", TaskFilter(group=StatusGroup.PAUSED)),
    ("failed/lost", TaskFilter(group=StatusGroup.FAILED)),
    ("tag io", TaskFilter(tag="io")),
    ("bucket 7", TaskFilter(bucket=7)),
    ("name prefix 'sync'", TaskFilter(name_prefix="sync")),
    ("search '转换-4242'", TaskFilter(search="转换-4242")),
)


def _ticks(controller: Controller, baseline_ms: float) -> dict[str, float]:
    results: dict[str, float] = {}
    stats_ms, _ = _median_ms(controller.stats)
    print(f"   stats() alone: {stats_ms:7.2f} ms  ({stats_ms / baseline_ms:5.1f}x baseline)")
    for name, view in _VIEWS:
        median, p90 = _median_ms(lambda v=view: fetch(controller, v, clock=SYSTEM_CLOCK))  # type: ignore[misc]
        results[name] = median
        flag = "" if p90 < BUDGET_MS else f"  over the {BUDGET_MS:.0f} ms budget"
        print(
            f"   tick [{_pad(name, 20)}] median {median:7.2f} ms  p90 {p90:7.2f} ms  "
            f"({median / baseline_ms:5.1f}x baseline){flag}"
        )
    median, p90 = _median_ms(
        lambda: fetch(controller, TaskFilter(), clock=SYSTEM_CLOCK, detail_id="task-004242")
    )
    results["with detail"] = median
    print(
        f"   tick [{'all + detail open':<20}] median {median:7.2f} ms  p90 {p90:7.2f} ms  "
        f"({median / baseline_ms:5.1f}x baseline)"
    )
    return results


def _ui_apply(controller: Controller) -> tuple[float, float]:
    """Milliseconds to show a view's rows in the table: all new, and a steady tick."""
    app = DashboardApp(controller, store_label="bench", refresh_interval=None, cursor_blink=False)
    timings: list[float] = []

    async def main() -> None:
        async with app.run_test(size=(150, 40)) as pilot:
            while app.latest is None:
                await pilot.pause(0.01)
            first = fetch(controller, TaskFilter(newest_first=False), clock=SYSTEM_CLOCK)
            started = time.perf_counter()
            app.overview.show(first)
            timings.append((time.perf_counter() - started) * 1000)
            again = fetch(controller, TaskFilter(newest_first=False), clock=SYSTEM_CLOCK)
            started = time.perf_counter()
            app.overview.show(again)
            timings.append((time.perf_counter() - started) * 1000)

    asyncio.run(main())
    return timings[0], timings[1]


def _sqlite(directory: Path) -> None:
    path = directory / "tasks.db"
    store = SqliteTaskStore(path)
    took = _fill(store)
    size = path.stat().st_size / 1e6
    print(f"   built {TASKS:,} tasks with their histories in {took:.1f}s ({size:.0f} MB)")
    conn = sqlite3.connect(path)
    count_ms, _ = _median_ms(lambda: conn.execute("SELECT count(*) FROM tasks").fetchone())
    raw = f"SELECT * FROM tasks ORDER BY seq DESC LIMIT {LIMIT}"
    baseline_ms, _ = _median_ms(lambda: conn.execute(raw).fetchall())
    print(f"   baseline: SELECT count(*) FROM tasks = {count_ms:.2f} ms")
    print(f"   baseline: raw read of the newest {LIMIT} rows = {baseline_ms:.2f} ms (ratios below)")
    controller = Controller(store=store, owner="bench-console")
    try:
        _ticks(controller, baseline_ms)
        first, steady = _ui_apply(controller)
        print(
            f"   UI: {LIMIT} new rows into the table {first:.1f} ms (a new view), "
            f"{steady:.1f} ms on a steady tick (cells updated in place)"
        )
    finally:
        controller.close(timeout=10)
        conn.close()
        store.close()


def _postgres(dsn: str) -> None:
    import psycopg
    from psycopg import sql

    from chongming_store_postgres import PostgresTaskStore

    schema = f"bench_tui_{uuid.uuid4().hex[:8]}"
    store = PostgresTaskStore(dsn, schema=schema, max_size=4)
    try:
        took = _fill(store)
        print(f"   built {TASKS:,} tasks with their histories in {took:.1f}s")
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("ANALYZE {}.tasks").format(sql.Identifier(schema)))
            count = sql.SQL("SELECT count(*) FROM {}.tasks").format(sql.Identifier(schema))
            count_ms, _ = _median_ms(lambda: conn.execute(count).fetchone())
            raw = sql.SQL("SELECT * FROM {}.tasks ORDER BY seq DESC LIMIT {}").format(
                sql.Identifier(schema), sql.Literal(LIMIT)
            )
            baseline_ms, _ = _median_ms(lambda: conn.execute(raw).fetchall())
            print(f"   baseline: SELECT count(*) FROM tasks = {count_ms:.2f} ms")
            print(
                f"   baseline: raw read of the newest {LIMIT} rows = {baseline_ms:.2f} ms "
                "(ratios below)"
            )
            controller = Controller(store=store, owner="bench-console")
            try:
                _ticks(controller, baseline_ms)
            finally:
                controller.close(timeout=10)
    finally:
        store.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def main() -> None:
    """Build the stores, time the ticks, print medians and ratios."""
    with tempfile.TemporaryDirectory() as directory:
        print(f"   -- SQLite, {TASKS:,} tasks")
        _sqlite(Path(directory))
    dsn = os.environ.get("CHONGMING_BENCH_POSTGRES") or os.environ.get("CHONGMING_TEST_POSTGRES")
    if dsn:
        print(f"   -- PostgreSQL, {TASKS:,} tasks")
        with contextlib.suppress(KeyboardInterrupt):
            _postgres(dsn)
    else:
        print("   (PostgreSQL skipped: set CHONGMING_BENCH_POSTGRES to a DSN to measure it)")


if __name__ == "__main__":
    main()
