"""Stop, pause and resume from the keyboard: command rows for tasks held elsewhere, honest text.

The console's controller holds none of the seeded tasks, so every control
reaches the store as a command row for the holder to claim.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from chongming_core import FakeClock, StateMachine
from chongming_runtime import Controller
from chongming_store_sqlite import SqliteTaskStore
from chongming_tui import DashboardApp
from chongming_tui.components.detail import TaskDetailScreen
from chongming_tui.components.reconcile import ReconcileScreen
from chongming_tui.components.stop_dialog import StopDialog
from chongming_tui.components.task_table import TaskTable
from chongming_tui.testing import drive, wait_for


def _select(app: DashboardApp, task_id: str) -> None:
    table = app.overview.query_one(TaskTable)
    table.move_cursor(row=table.get_row_index(task_id))


def test_stop_asks_for_a_reason_then_confirmation_then_sends_a_command(
    console: Controller, store: SqliteTaskStore, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(console)

    async def scenario(pilot: Pilot[int]) -> None:
        _select(app, "etl-001")
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, StopDialog), "the stop dialog")
        await pilot.press("enter")  # no reason yet
        assert isinstance(app.screen, StopDialog)
        await pilot.press("y")  # typed into the reason box: nothing is confirmed yet
        await pilot.press("backspace", *"发布窗口", "enter")
        assert store.commands(task_id="etl-001") == []  # asked, not yet confirmed
        await pilot.press("y")
        await wait_for(pilot, lambda: bool(store.commands(task_id="etl-001")), "the command")
        [command] = store.commands(task_id="etl-001")
        assert (command.action, command.reason, command.issued_by) == (
            "stop", "发布窗口", "console-1",
        )  # fmt: skip
        assert command.bucket == 3
        await wait_for(pilot, lambda: "stop of etl-001" in app.last_said[0], "the result")
        assert app.last_said == (
            "stop of etl-001 requested (command sent to its holder), not confirmed yet",
            "yellow",
        )
        assert "etl-001" in app.pending

    drive(app, scenario)


def test_a_cancelled_stop_sends_nothing(
    console: Controller, store: SqliteTaskStore, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(console)

    async def scenario(pilot: Pilot[int]) -> None:
        _select(app, "etl-001")
        await pilot.press("s", *"发布窗口", "enter", "n")
        assert app.screen is app.overview
        await pilot.press("s", "escape")
        assert app.screen is app.overview
        assert app.last_said[0] == "stop of etl-001 cancelled"
        await pilot.pause(0.1)
        assert store.commands(task_id="etl-001") == []

    drive(app, scenario)


def test_a_finished_task_cannot_be_stopped_or_paused(
    console: Controller, store: SqliteTaskStore, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(console)

    async def scenario(pilot: Pilot[int]) -> None:
        _select(app, "load-001")
        await pilot.press("s")
        assert app.screen is app.overview
        assert app.last_said == ("load-001 is already succeeded: nothing to stop", "yellow")
        await pilot.press("p")
        assert app.last_said == ("load-001 is already succeeded: nothing to pause", "yellow")
        assert store.commands(task_id="load-001") == []

    drive(app, scenario)


def test_a_cross_process_pause_is_requested_not_confirmed_until_seen(
    console: Controller,
    store: SqliteTaskStore,
    clock: FakeClock,
    make_app: Callable[..., DashboardApp],
) -> None:
    app = make_app(console)

    async def scenario(pilot: Pilot[int]) -> None:
        _select(app, "etl-001")
        await pilot.press("p")
        await wait_for(pilot, lambda: bool(store.commands(task_id="etl-001")), "the command")
        assert [c.action for c in store.commands(task_id="etl-001")] == ["pause"]
        await wait_for(pilot, lambda: "etl-001" in app.pending, "the pending pause")
        assert app.last_said == (
            "pause of etl-001 requested (command sent to its holder), not confirmed",
            "yellow",
        )
        # a refresh that still sees it running changes nothing
        count = app.refresh_count
        await pilot.press("g")
        await wait_for(pilot, lambda: app.refresh_count > count, "a refresh")
        assert "not confirmed" in app.last_said[0]
        # the holder pauses it
        snapshot = store.get("etl-001")
        assert snapshot is not None
        machine = StateMachine(snapshot, clock=clock)
        machine.mark_pausing(actor="worker-1")
        machine.mark_paused(actor="worker-1")
        store.save(machine.snapshot, expect_version=snapshot.status_version,
                   transitions=machine.transitions)  # fmt: skip
        await pilot.press("g")
        await wait_for(pilot, lambda: "etl-001" not in app.pending, "the confirmation")
        assert app.last_said == ("pause of etl-001 confirmed: the task is paused", "green")

    drive(app, scenario)


def test_resume_from_the_detail_screen_sends_a_command(
    console: Controller, store: SqliteTaskStore, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(console)

    async def scenario(pilot: Pilot[int]) -> None:
        app.open_detail("sync-001")
        await wait_for(
            pilot, lambda: app.latest is not None and app.latest.detail is not None, "the detail"
        )
        assert isinstance(app.screen, TaskDetailScreen)
        await pilot.press("r")
        await wait_for(pilot, lambda: bool(store.commands(task_id="sync-001")), "the command")
        [command] = store.commands(task_id="sync-001")
        assert (command.action, command.issued_by) == ("resume", "console-1")
        await wait_for(pilot, lambda: "sync-001" in app.pending, "the pending resume")
        assert app.last_said[0] == (
            "resume of sync-001 requested (command sent to its holder), not confirmed yet"
        )

    drive(app, scenario)


def test_the_reconcile_view_is_a_dry_run(
    console: Controller, store: SqliteTaskStore, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(console)

    async def scenario(pilot: Pilot[int]) -> None:
        before = {s.task_id: s.status for s in store.query()}
        await pilot.press("R")
        await wait_for(pilot, lambda: isinstance(app.screen, ReconcileScreen), "the view")
        lost = app.screen.query_one("#lost", DataTable)
        adoptable = app.screen.query_one("#adoptable", DataTable)
        await wait_for(pilot, lambda: lost.row_count > 0, "the dry run")
        assert [lost.get_row_at(i)[0].plain for i in range(lost.row_count)] == ["etl-002"]
        assert sorted(adoptable.get_row_at(i)[0].plain for i in range(adoptable.row_count)) == [
            "etl-003", "etl-004",
        ]  # fmt: skip
        assert {s.task_id: s.status for s in store.query()} == before  # nothing written
        await pilot.press("escape")
        assert app.screen is app.overview

    drive(app, scenario)


def test_the_reconcile_view_names_the_command_that_applies_it(
    console: Controller, make_app: Callable[..., DashboardApp]
) -> None:
    """The command the view suggests is the one the console passed, store options and
    all, so it works when pasted (a bare ``chongming-task reconcile`` reached another store)."""
    command = "chongming-task --db /data/tasks.db reconcile"
    app = make_app(console, reconcile_command=command)

    async def scenario(pilot: Pilot[int]) -> None:
        await pilot.press("R")
        await wait_for(pilot, lambda: isinstance(app.screen, ReconcileScreen), "the view")
        title = app.screen.query_one("#reconcile-title", Static)
        await wait_for(pilot, lambda: "to apply" in str(title.render()), "the dry run")
        assert f"(to apply: {command})" in str(title.render())

    drive(app, scenario)


def test_a_control_of_a_task_whose_holder_stopped_renewing_does_not_promise_delivery(
    console: Controller, store: SqliteTaskStore, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(console)  # etl-002's holder 'worker-3' let its lease expire 15 s ago

    async def scenario(pilot: Pilot[int]) -> None:
        _select(app, "etl-002")
        await pilot.press("p")
        await wait_for(pilot, lambda: "pause of etl-002 requested" in app.last_said[0], "result")
        assert app.last_said[0] == (
            "pause of etl-002 requested (command sent, but its holder 'worker-3' stopped "
            "renewing its lease 15.0s ago: it may never be applied), not confirmed"
        )
        assert [c.action for c in store.commands(task_id="etl-002")] == ["pause"]

    drive(app, scenario)
