"""The dashboard over PostgreSQL: the same rows, the same command rows, a redacted label."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import psycopg
import pytest
from psycopg import sql
from textual.pilot import Pilot
from textual.widgets import Input

from chongming_core import FakeClock, TaskStore
from chongming_runtime import Controller
from chongming_store_postgres import PostgresTaskStore, redact_dsn
from chongming_tui import DashboardApp
from chongming_tui.components.header import DashboardHeader
from chongming_tui.components.stop_dialog import StopDialog
from chongming_tui.components.task_table import TaskTable
from chongming_tui.testing import drive, static_text, wait_for

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_store(
    postgres_dsn: str, clock: FakeClock, seeder: Callable[[TaskStore, FakeClock], None]
) -> Iterator[PostgresTaskStore]:
    schema = f"tui_{uuid.uuid4().hex[:12]}"
    store = PostgresTaskStore(postgres_dsn, schema=schema, max_size=4)
    try:
        seeder(store, clock)
        yield store
    finally:
        store.close()
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def test_the_dashboard_reads_and_controls_a_postgres_store(
    pg_store: PostgresTaskStore,
    clock: FakeClock,
    make_app: Callable[..., DashboardApp],
    make_controller: Callable[..., Controller],
) -> None:
    console = make_controller(store=pg_store, owner="console-1", clock=clock)
    label = redact_dsn("postgresql://ops:s3cret@db.internal:5432/tasks")
    app = make_app(console)
    app.store_label = label

    async def scenario(pilot: Pilot[int]) -> None:
        table = app.overview.query_one(TaskTable)
        assert len(table.task_ids) == 11
        assert "s3cret" not in static_text(app.overview.query_one(DashboardHeader))
        await pilot.press("4")
        await wait_for(pilot, lambda: table.task_ids == ["report-2", "sync-002"], "failed/lost")
        await pilot.press("0")
        await wait_for(pilot, lambda: len(table.task_ids) == 11, "all")
        table.move_cursor(row=table.get_row_index("etl-001"))
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, StopDialog), "the stop dialog")
        app.screen.query_one(Input).value = "发布窗口"
        await pilot.press("enter", "y")
        await wait_for(pilot, lambda: bool(pg_store.commands(task_id="etl-001")), "the command")

    drive(app, scenario)
    console.close(timeout=10)
    [command] = pg_store.commands(task_id="etl-001")
    assert (command.action, command.reason) == ("stop", "发布窗口")
