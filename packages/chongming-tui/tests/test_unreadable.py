"""A damaged row in the store: the dashboard draws every other task and names it in a banner."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable

from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from chongming_core import UnreadableRow
from chongming_runtime import Controller
from chongming_store_sqlite import SqliteTaskStore
from chongming_tui import DashboardApp
from chongming_tui.components.banner import UnreadableBanner, banner_text
from chongming_tui.components.header import DashboardHeader
from chongming_tui.components.reconcile import ReconcileScreen
from chongming_tui.components.task_table import TaskTable
from chongming_tui.testing import drive, static_text, wait_for


def _sql(store: SqliteTaskStore, statement: str) -> None:
    with contextlib.closing(sqlite3.connect(store.path)) as conn, conn:
        assert conn.execute(statement).rowcount == 1


def test_the_first_refresh_draws_the_others_and_a_banner_names_the_damaged_row(
    store: SqliteTaskStore, console: Controller, make_app: Callable[..., DashboardApp]
) -> None:
    _sql(store, "UPDATE tasks SET status = 'zombie' WHERE task_id = 'sync-002'")
    _sql(store, "UPDATE tasks SET data = '{nope' WHERE task_id = 'load-001'")
    app = make_app(console)

    async def scenario(pilot: Pilot[int]) -> None:
        ids = app.overview.query_one(TaskTable).task_ids
        assert "sync-002" not in ids
        assert "load-001" not in ids
        assert len(ids) == 9  # the other nine of the eleven seeded tasks, as usual
        banner = app.overview.query_one(UnreadableBanner)
        assert banner.display
        text = static_text(banner)
        assert text.startswith("2 stored rows cannot be read")
        assert "task 'sync-002' cannot be read: its status column holds 'zombie'" in text
        assert "task 'load-001' cannot be read: its document is not JSON" in text
        header = static_text(app.overview.query_one(DashboardHeader))
        assert "total 10" in header  # load-001's status column still counts it
        # the row is repaired: the next refresh hides the banner
        _sql(store, "UPDATE tasks SET status = 'failed' WHERE task_id = 'sync-002'")
        _sql(store, "DELETE FROM tasks WHERE task_id = 'load-001'")
        count = app.refresh_count
        await pilot.press("g")
        await wait_for(pilot, lambda: app.refresh_count > count, "the next refresh")
        assert not app.overview.query_one(UnreadableBanner).display  # the same widget, hidden
        assert "sync-002" in app.overview.query_one(TaskTable).task_ids

    drive(app, scenario)


def test_a_clean_store_shows_no_banner(
    console: Controller, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(console)

    async def scenario(pilot: Pilot[int]) -> None:
        assert not app.overview.query_one(UnreadableBanner).display
        assert app.latest is not None
        assert app.latest.unreadable == ()

    drive(app, scenario)


def test_the_banner_names_three_rows_then_counts_the_rest() -> None:
    rows = [UnreadableRow(f"t{i}", "status 'zombie' is not a status") for i in range(5)]
    text = banner_text(rows).plain.splitlines()
    assert text[0].startswith("5 stored rows cannot be read")
    assert text[1:4] == [
        f"task 't{i}' cannot be read: status 'zombie' is not a status" for i in range(3)
    ]
    assert text[4] == "and 2 more"
    (one,) = banner_text(rows[:1]).plain.splitlines()[:1]
    assert one.startswith("1 stored row cannot be read")


def test_the_reconcile_view_names_the_rows_it_would_not_judge(
    store: SqliteTaskStore, console: Controller, make_app: Callable[..., DashboardApp]
) -> None:
    _sql(store, "UPDATE tasks SET data = '[]' WHERE task_id = 'etl-003'")  # queued, unleased
    app = make_app(console)

    async def scenario(pilot: Pilot[int]) -> None:
        await pilot.press("R")
        await wait_for(pilot, lambda: isinstance(app.screen, ReconcileScreen), "the view")
        lost = app.screen.query_one("#lost", DataTable)
        await wait_for(pilot, lambda: lost.row_count > 0, "the dry run")
        assert [lost.get_row_at(i)[0].plain for i in range(lost.row_count)] == ["etl-002"]
        title = static_text(app.screen.query_one("#reconcile-title", Static))
        assert "1 stored row(s) cannot be read and would not be judged: etl-003" in title

    drive(app, scenario)
