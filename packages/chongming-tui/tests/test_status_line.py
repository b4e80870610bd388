"""The status line says what still holds: a sentence about a task goes once it is untrue.

It used to keep its last sentence forever: "nothing to stop" about a task pruned minutes
ago, and the detail showed "pause requested, not confirmed yet" beside a confirmed pause.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.pilot import Pilot
from textual.widgets import Static

from chongming_core import FakeClock
from chongming_runtime import Controller
from chongming_store_sqlite import SqliteTaskStore
from chongming_tui import DashboardApp
from chongming_tui._notes import PASSING_SECONDS
from chongming_tui.components.detail import TaskDetailScreen
from chongming_tui.components.status_line import StatusLine
from chongming_tui.components.task_table import TaskTable
from chongming_tui.testing import drive, static_text, wait_for


def _select(app: DashboardApp, task_id: str) -> None:
    table = app.overview.query_one(TaskTable)
    table.move_cursor(row=table.get_row_index(task_id))


async def _refresh(app: DashboardApp, pilot: Pilot[int]) -> None:
    count = app.refresh_count
    await pilot.press("g")
    await wait_for(pilot, lambda: app.refresh_count > count, "a refresh")


def _line(app: DashboardApp) -> str:
    return static_text(app.screen.query_one(StatusLine)).strip()


def test_nothing_to_stop_goes_once_the_task_is_pruned(
    console: Controller, store: SqliteTaskStore, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(console)

    async def scenario(pilot: Pilot[int]) -> None:
        _select(app, "load-001")
        await pilot.press("s")
        said = "load-001 is already succeeded: nothing to stop"
        assert app.last_said == (said, "yellow")
        await _refresh(app, pilot)
        assert app.last_said[0] == said  # still true: it is still there, still succeeded
        assert _line(app) == said
        assert store.prune(keep_terminal=0) >= 1  # every finished task, load-001 with them
        await _refresh(app, pilot)
        assert app.last_said == ("", "")
        assert _line(app) == ""

    drive(app, scenario)


def test_a_confirmed_pause_is_never_shown_beside_its_request(
    console: Controller, holder: Callable[..., None], make_app: Callable[..., DashboardApp]
) -> None:
    """The detail was drawn with the pending action before the refresh settled it, so
    "pause requested, not confirmed yet" stood beside ``paused`` until the next refresh
    (for good, with live refresh off)."""
    app = make_app(console)

    async def scenario(pilot: Pilot[int]) -> None:
        app.open_detail("etl-001")
        await wait_for(pilot, lambda: isinstance(app.screen, TaskDetailScreen), "the detail")
        await pilot.press("p")
        await wait_for(pilot, lambda: "etl-001" in app.pending, "the pending pause")
        await _refresh(app, pilot)
        fields = static_text(app.screen.query_one("#detail-fields", Static))
        assert "pause requested, not confirmed yet" in fields  # true: still running
        holder("etl-001", "mark_pausing", "mark_paused")
        await _refresh(app, pilot)  # one refresh: it sees paused and settles the action
        fields = static_text(app.screen.query_one("#detail-fields", Static))
        assert "paused" in fields
        assert "not confirmed" not in fields
        assert app.last_said == ("pause of etl-001 confirmed: the task is paused", "green")

    drive(app, scenario)


def test_an_outcome_goes_once_the_task_moves_on(
    console: Controller, holder: Callable[..., None], make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(console)

    async def scenario(pilot: Pilot[int]) -> None:
        _select(app, "etl-001")
        await pilot.press("p")
        await wait_for(pilot, lambda: "etl-001" in app.pending, "the pending pause")
        holder("etl-001", "mark_pausing", "mark_paused")
        await _refresh(app, pilot)
        assert app.last_said[0] == "pause of etl-001 confirmed: the task is paused"
        await _refresh(app, pilot)
        assert app.last_said[0] == "pause of etl-001 confirmed: the task is paused"
        holder("etl-001", "resume")  # resumed by someone else: "is paused" is untrue
        await _refresh(app, pilot)
        assert app.last_said == ("", "")

    drive(app, scenario)


def test_a_remark_about_no_task_passes(
    console: Controller, clock: FakeClock, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(console)

    async def scenario(pilot: Pilot[int]) -> None:
        app.prompt_filter("bucket")
        await pilot.pause()
        app.screen.dismiss("3x")
        await wait_for(pilot, lambda: "whole number" in app.last_said[0], "the complaint")
        await _refresh(app, pilot)
        assert "whole number" in app.last_said[0]  # a refresh does not end it
        clock.advance(PASSING_SECONDS)
        await wait_for(pilot, lambda: app.last_said == ("", ""), "the remark to pass")

    drive(app, scenario)


def test_live_refresh_off_holds_while_it_is_off(
    console: Controller, clock: FakeClock, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(console, refresh_interval=60)

    async def scenario(pilot: Pilot[int]) -> None:
        await pilot.press("l")
        assert app.last_said[0] == "live refresh off: press l to resume"
        clock.advance(3 * PASSING_SECONDS)
        await pilot.pause(1.2)  # the header's second tick checks the line
        assert app.last_said[0] == "live refresh off: press l to resume"
        await pilot.press("l")
        assert app.last_said[0] == "live refresh on"
        clock.advance(PASSING_SECONDS)
        await wait_for(pilot, lambda: app.last_said == ("", ""), "the remark to pass")

    drive(app, scenario)
