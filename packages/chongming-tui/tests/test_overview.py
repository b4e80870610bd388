"""The overview: rows, header, navigation, detail, and refreshes that update rows in place."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import DataTable, Static
from textual.widgets.data_table import RowKey

from chongming_core import FakeClock, StateMachine
from chongming_runtime import Controller
from chongming_store_sqlite import SqliteTaskStore
from chongming_tui import DashboardApp
from chongming_tui.components.detail import TaskDetailScreen
from chongming_tui.components.header import DashboardHeader
from chongming_tui.components.task_table import TaskTable
from chongming_tui.testing import drive, static_text, wait_for

NEWEST_FIRST = [
    "etl-004", "report-2", "report-1", "load-003", "load-002", "load-001",
    "sync-002", "sync-001", "etl-003", "etl-002", "etl-001",
]  # fmt: skip


def _table(app: DashboardApp) -> TaskTable:
    return app.overview.query_one(TaskTable)


def _cell(app: DashboardApp, task_id: str, column: str) -> str:
    value = _table(app).get_cell(task_id, column)
    return value.plain if isinstance(value, Text) else str(value)


async def _refresh(app: DashboardApp, pilot: Pilot[int]) -> None:
    count = app.refresh_count
    await pilot.press("g")
    await wait_for(pilot, lambda: app.refresh_count > count, "a refresh")


def test_the_overview_shows_every_task_newest_first_with_the_header(
    console: Controller, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(console)

    async def scenario(pilot: Pilot[int]) -> None:
        table = _table(app)
        assert table.task_ids == NEWEST_FIRST
        # the label, and the registered name the name filter matches (D87)
        assert _cell(app, "etl-001", "name") == "转换-1 (transform)"
        assert _cell(app, "report-1", "name") == "report"  # no label: the name alone
        assert _cell(app, "etl-001", "attempt") == "1/3"
        assert _cell(app, "etl-001", "progress").endswith("120/500 rows")
        assert _cell(app, "etl-003", "elapsed") == "-"
        assert _cell(app, "etl-002", "lease") == "worker-3 (expired)"
        assert _cell(app, "sync-002", "failure") == "exception"
        header = static_text(app.overview.query_one(DashboardHeader))
        assert "/data/tasks.db" in header
        assert "console-1" in header
        assert "refreshed 0.0s ago" in header
        assert "running 2" in header
        assert "total 11" in header

    drive(app, scenario, size=(200, 40))  # the lease column wide enough for its owner


def test_arrow_keys_move_and_enter_opens_the_whole_history(
    console: Controller, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(console)

    async def scenario(pilot: Pilot[int]) -> None:
        table = _table(app)
        await pilot.press("down", "down")
        assert table.selected_task_id == "report-1"
        await pilot.press("up")
        assert table.selected_task_id == "report-2"
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TaskDetailScreen), "the detail")
        await wait_for(
            pilot, lambda: app.latest is not None and app.latest.detail_id == "report-2", "detail"
        )
        history = app.screen.query_one("#history", DataTable)
        assert history.row_count == 4
        last = history.get_row_at(3)
        assert [c.plain if isinstance(c, Text) else c for c in last[1:5]] == [
            "running", "lost", "runtime:lost", "reconcile",
        ]  # fmt: skip
        fields = static_text(app.screen.query_one("#detail-fields", Static))
        assert "the supervisor 'worker-9' stopped renewing" in fields
        await pilot.press("escape")
        assert app.screen is app.overview
        assert table.selected_task_id == "report-2"

    drive(app, scenario)


def test_the_detail_warns_about_a_dead_lease_and_a_silent_heartbeat(
    console: Controller, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(console)

    async def scenario(pilot: Pilot[int]) -> None:
        app.open_detail("etl-002")
        await wait_for(
            pilot, lambda: app.latest is not None and app.latest.detail_id == "etl-002", "detail"
        )
        await pilot.pause()
        fields = static_text(app.screen.query_one("#detail-fields", Static))
        assert "EXPIRED 15.0s ago: nobody renews it, a candidate for reconcile" in fields
        assert "no heartbeat for longer than 1m00s" in fields

    drive(app, scenario)


def test_a_refresh_updates_rows_in_place_and_keeps_the_selection(
    console: Controller,
    store: SqliteTaskStore,
    clock: FakeClock,
    holder: Callable[..., None],
    make_app: Callable[..., DashboardApp],
) -> None:
    app = make_app(console)

    async def scenario(pilot: Pilot[int]) -> None:
        table = _table(app)
        table.move_cursor(row=table.get_row_index("etl-002"))
        rows_before = dict(table.rows)
        # another process starts a queued task and creates a new one
        holder("etl-003", "mark_starting", "mark_running")
        fresh = StateMachine.create("etl-005", "transform", label="转换-5", clock=clock)
        store.create(fresh.snapshot)
        await _refresh(app, pilot)
        assert table.task_ids == ["etl-005", *NEWEST_FIRST]
        assert _cell(app, "etl-003", "status") == "running"
        assert table.selected_task_id == "etl-002"
        assert table.cursor_row == NEWEST_FIRST.index("etl-002") + 1
        # unchanged rows are the very same row objects: the table was not rebuilt
        for key, row in rows_before.items():
            assert table.rows[RowKey(key.value)] is row

    drive(app, scenario)


def test_a_task_leaving_the_view_is_removed_and_the_cursor_stays_on_a_task(
    console: Controller,
    store: SqliteTaskStore,
    holder: Callable[..., None],
    make_app: Callable[..., DashboardApp],
) -> None:
    app = make_app(console)

    async def scenario(pilot: Pilot[int]) -> None:
        await pilot.press("2")  # queued: etl-004 (retry_wait) and etl-003
        await wait_for(pilot, lambda: _table(app).task_ids == ["etl-004", "etl-003"], "queued")
        holder("etl-003", "mark_starting", "mark_running")
        await _refresh(app, pilot)
        assert _table(app).task_ids == ["etl-004"]
        assert _table(app).selected_task_id == "etl-004"

    drive(app, scenario)


def test_live_refresh_runs_on_its_own_and_can_be_paused(
    console: Controller, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(console, refresh_interval=0.05)

    def live() -> bool:  # a call, so that mypy does not narrow the property
        return app.live

    async def scenario(pilot: Pilot[int]) -> None:
        assert live()
        await wait_for(pilot, lambda: app.refresh_count >= 3, "periodic refreshes")
        await pilot.press("l")
        assert not live()
        assert "live refresh off" in app.last_said[0]
        header = static_text(app.overview.query_one(DashboardHeader))
        assert "live refresh off" in header
        await pilot.press("l")
        assert live()

    drive(app, scenario)
