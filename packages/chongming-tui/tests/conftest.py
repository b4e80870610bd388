"""Fixtures of the dashboard tests: a SQLite store seeded with fixed, FakeClock-stamped tasks.

Every snapshot is built with `StateMachine` (so each trajectory is a legal one)
and written straight into the store, as if workers elsewhere had run them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pytest_textual_snapshot import SVGImageExtension  # type: ignore[import-untyped]

from chongming_core import (
    Failure,
    FailureKind,
    FakeClock,
    Progress,
    StateMachine,
    TaskSnapshot,
    TaskStore,
)
from chongming_runtime import Controller
from chongming_store_sqlite import SqliteTaskStore
from chongming_tui import DashboardApp

# pytest-textual-snapshot 1.0 names its file suffix the way syrupy < 5 read it
# (``_file_extension``); syrupy 7 reads ``file_extension``. Without this the
# screenshots would be stored as ``.raw`` files instead of viewable ``.svg`` ones.
SVGImageExtension.file_extension = "svg"

#: The console's owner in every test.
CONSOLE = "console-1"


def _write(store: TaskStore, machine: StateMachine, **side: object) -> TaskSnapshot:
    snapshot = machine.snapshot.evolve(**side) if side else machine.snapshot
    store.create(snapshot, machine.transitions)
    return snapshot


def seed(store: TaskStore, clock: FakeClock) -> None:
    """Twelve tasks covering every status group, CJK labels and reasons, warnings."""

    def new(task_id: str, name: str, label: str | None = None, **kw: object) -> StateMachine:
        clock.advance(1)
        return StateMachine.create(task_id, name, label=label, clock=clock, **kw)  # type: ignore[arg-type]

    def run(m: StateMachine, owner: str = "worker-1") -> StateMachine:
        m.mark_queued(actor=owner)
        clock.advance(0.5)
        m.mark_starting(executor="thread", actor=owner)
        m.mark_running(actor=owner)
        return m

    m = run(new("etl-001", "transform", "转换-1", max_attempts=3, tags={"etl"}, bucket=3))
    etl1 = m
    m = run(new("etl-002", "transform", "转换-2", tags={"etl"}, bucket=5))
    etl2 = m
    m = new("etl-003", "transform", "转换-3", tags={"etl"}, bucket=3)
    m.mark_queued(actor="worker-1")
    etl3 = m
    m = run(new("sync-001", "sync", "同步-租户A", tags={"io"}, bucket=7), "worker-2")
    m.mark_pausing(actor="console-1 (command)")
    m.mark_paused(actor="worker-2")
    sync1 = m
    m = run(new("sync-002", "sync", "同步-租户B", max_attempts=1, tags={"io"}, bucket=7))
    m.mark_failed(
        Failure.of(FailureKind.EXCEPTION, "数据库连接被拒绝 (connection refused)",
                   exception_type="ConnectionError"),
        actor="worker-1",
    )  # fmt: skip
    sync2 = m
    m = run(new("load-001", "load", "装载-1", bucket=1))
    clock.advance(42)
    m.mark_succeeded(outcome={"rows": 500}, actor="worker-1")
    load1 = m
    m = run(new("load-002", "load", "装载-2", bucket=1))
    m.mark_stopping(actor="console-1 (command)", reason="发布窗口")
    m.mark_stopped(actor="worker-1", reason="发布窗口")
    load2 = m
    m = new("load-003", "load", "装载-3", bucket=2)
    m.mark_queued()
    m.mark_cancelled(actor="pipeline", reason="upstream failed")
    load3 = m
    m = new("report-1", "report", None, bucket=2)
    m.mark_skipped(actor="pipeline", reason="condition false")
    report1 = m
    m = run(new("report-2", "report", "报表-2", bucket=4), "worker-9")
    m.mark_lost(Failure.of(FailureKind.LOST, "the supervisor 'worker-9' stopped renewing"),
                actor="reconcile")  # fmt: skip
    report2 = m
    m = run(new("etl-004", "transform", "转换-4", max_attempts=3, bucket=5))
    m.mark_retry_wait(Failure.of(FailureKind.TIMEOUT_ATTEMPT, "attempt took longer than 30s"),
                      retry_at=clock.now() + timedelta(seconds=30), actor="worker-1")  # fmt: skip
    etl4 = m
    clock.advance(60)
    now = clock.now()
    _write(store, etl1, progress=Progress(120, 500, "rows", "读取分区 3"),
           last_heartbeat_at=now - timedelta(seconds=2), lease_owner="worker-1",
           lease_until=now + timedelta(seconds=20))  # fmt: skip
    _write(store, etl2, progress=Progress(7, None, "batch"),
           last_heartbeat_at=now - timedelta(seconds=90), lease_owner="worker-3",
           lease_until=now - timedelta(seconds=15))  # fmt: skip
    _write(store, etl3)
    _write(store, sync1, progress=Progress(40, 100, "%"), lease_owner="worker-2",
           lease_until=now + timedelta(seconds=25), paused_in_place=True)  # fmt: skip
    _write(store, sync2)
    _write(store, load1, progress=Progress(500, 500, "rows"))
    for machine in (load2, load3, report1, report2, etl4):
        _write(store, machine)


def seed_pipeline(store: TaskStore, clock: FakeClock) -> None:
    """Three nodes of one pipeline run, whose ids differ only at their end, with long
    progress texts, and a task paused in place for a while (its running time stands still).
    Seed these first, then `seed`: the times `seed` leaves stay as they are."""
    prefix = "nightly-8093c2ab4f:"
    for node, done, unit in (("extract", 1_204_331, "rows read from s3://lake/raw"),
                             ("transform", 56_200, "rows normalised and deduplicated"),
                             ("load", 0, "rows written to the warehouse")):  # fmt: skip
        clock.advance(1)
        m = StateMachine.create(prefix + node, f"nightly.{node}", label=node, clock=clock,
                                pipeline_id="nightly-8093c2ab4f", node_id=node)  # fmt: skip
        m.mark_queued(actor="worker-4")
        m.mark_starting(executor="thread", actor="worker-4")
        m.mark_running(actor="worker-4")
        _write(store, m, progress=Progress(done, 2_000_000, unit), lease_owner="worker-4",
               lease_until=clock.now() + timedelta(minutes=5))  # fmt: skip
    clock.advance(1)
    m = StateMachine.create("backfill-2026-q3", "backfill", label="季度回填", clock=clock)
    m.mark_queued(actor="worker-4")
    m.mark_starting(executor="thread", actor="worker-4")
    m.mark_running(actor="worker-4")
    clock.advance(12)
    m.mark_pausing(actor="console-1 (command)")
    m.mark_paused(actor="worker-4")
    clock.advance(95)
    _write(store, m, lease_owner="worker-4", lease_until=clock.now() + timedelta(minutes=9))


@pytest.fixture
def seeder() -> Callable[[TaskStore, FakeClock], None]:
    """`seed`, for tests that seed a store of their own."""
    return seed


@pytest.fixture
def clock() -> FakeClock:
    """The fixed time of every dashboard test."""
    return FakeClock()


@pytest.fixture
def store(tmp_path: Path, clock: FakeClock) -> Iterator[SqliteTaskStore]:
    """A seeded SQLite file."""
    with SqliteTaskStore(tmp_path / "tasks.db") as sqlite:
        seed(sqlite, clock)
        yield sqlite


@pytest.fixture
def console(store: SqliteTaskStore, clock: FakeClock) -> Iterator[Controller]:
    """The dashboard's controller: it holds no task, so every control is a command row."""
    controller = Controller(store=store, owner=CONSOLE, clock=clock)
    yield controller
    controller.close(timeout=10)


@pytest.fixture
def make_app() -> Callable[..., DashboardApp]:
    """Build apps without live refresh and without blinking, for reproducible runs."""

    def make(controller: Controller, **kwargs: Any) -> DashboardApp:
        kwargs.setdefault("refresh_interval", None)
        kwargs.setdefault("cursor_blink", False)
        return DashboardApp(controller, store_label="/data/tasks.db", **kwargs)

    return make


@pytest.fixture
def pipeline_console(tmp_path: Path, clock: FakeClock) -> Iterator[Controller]:
    """A console over a store seeded with `seed_pipeline`, then `seed` (fifteen tasks)."""
    with SqliteTaskStore(tmp_path / "pipeline.db") as sqlite:
        seed_pipeline(sqlite, clock)
        seed(sqlite, clock)
        controller = Controller(store=sqlite, owner=CONSOLE, clock=clock)
        yield controller
        controller.close(timeout=10)


@pytest.fixture
def holder(store: SqliteTaskStore, clock: FakeClock) -> Callable[..., None]:
    """``holder(task_id, *steps)``: the task's holder (another process) moves it through
    `StateMachine` steps (``"mark_paused"``, ``"resume"``, ...) and saves it in the store."""

    def act(task_id: str, *steps: str) -> None:
        snapshot = store.get(task_id)
        assert snapshot is not None
        machine = StateMachine(snapshot, clock=clock)
        for step in steps:
            getattr(machine, step)(actor="worker-1")
        store.save(
            machine.snapshot,
            expect_version=snapshot.status_version,
            transitions=machine.transitions,
        )

    return act
