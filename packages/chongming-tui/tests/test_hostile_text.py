"""Text stored in a task's record is shown literally: never as Rich markup, never raw controls.

A task's id, label, failure message, history reasons... come from whoever
submitted the task. Read as markup, ``[/x]`` would crash a view and ``[red]``
restyle it; written out raw, an escape sequence would drive the operator's
terminal and a line break would forge rows. The dashboard escapes them
(``\\x1b``, ``\\n``) and keeps the brackets as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Input

from chongming_core import Failure, FailureKind, FakeClock, Progress, StateMachine
from chongming_runtime import Controller, printable
from chongming_store_sqlite import SqliteTaskStore
from chongming_tui import DashboardApp
from chongming_tui.components.detail import TaskDetailScreen
from chongming_tui.components.reconcile import ReconcileScreen
from chongming_tui.components.stop_dialog import StopDialog
from chongming_tui.testing import drive, wait_for

TASK_ID = "evil\n[/x]"
LABEL = "[/x] [red]evil \x1b]0;pwned\x07"
NAME = "[bold]job\x1b[2J"
FAILURE = "[bold]boom[/bold] [/oops]\x1b]0;pwned\x07"
REASON = "[/why] because\x1b]0;pwned\x07"
ACTOR = "[red]worker\x1b[31m"
OWNER = "[/w]\x1b]0;x"
TAG = "[/tag]\x1b[1m"
MESSAGE = "[/msg] reading\nrow 3"
SIZE = (220, 60)


@pytest.fixture
def hostile(tmp_path: Path) -> Iterator[Controller]:
    """One task waiting for a retry, whose every stored text is hostile, with a dead lease."""
    clock = FakeClock()
    with SqliteTaskStore(tmp_path / "tasks.db") as store:
        machine = StateMachine.create(
            TASK_ID, NAME, label=LABEL, max_attempts=3, tags={TAG}, bucket=1,
            bucket_key="[/key]\x1b[0m", clock=clock,
        )  # fmt: skip
        machine.mark_queued(actor=ACTOR, reason=REASON)
        machine.mark_starting(executor="thread", actor=ACTOR)
        machine.mark_running(actor=ACTOR)
        machine.mark_retry_wait(
            Failure.of(FailureKind.EXCEPTION, FAILURE), retry_at=clock.now(), actor=ACTOR
        )
        clock.advance(60)
        snapshot = machine.snapshot.evolve(
            progress=Progress(1, 4, "rows\x1b[2J", MESSAGE),
            lease_owner=OWNER,
            lease_until=clock.now() - timedelta(seconds=5),
        )
        store.create(snapshot, machine.transitions)
        controller = Controller(store=store, owner="console-1", clock=clock)
        yield controller
        controller.close(timeout=10)


def _screen(app: DashboardApp) -> str:
    """What the terminal would show now, line by line (the characters written out)."""
    lines = [strip.text.rstrip() for strip in app.screen._compositor.render_strips()]
    return "\n".join(lines).rstrip()


def _assert_literal(shown: str, *expected: str) -> None:
    escaped = "\n".join(printable(line) for line in shown.splitlines())  # safe to print
    for text in expected:
        assert text in shown, f"{text!r} not shown in:\n{escaped}"
    for raw in ("\x1b", "\x07"):
        assert raw not in shown, f"raw {raw!r} written to the terminal:\n{escaped}"


async def _settle(pilot: Pilot[int]) -> None:
    await pilot.pause(0.05)


def test_the_table_shows_hostile_text_literally(
    hostile: Controller, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(hostile)

    async def scenario(pilot: Pilot[int]) -> None:
        await _settle(pilot)
        _assert_literal(
            _screen(app),
            "evil\\n[/x]",  # the id: one row, its brackets kept
            "[/x] [red]evil",  # the label, cut to its column
            "[/w]\\x1b]0;x",  # the lease owner
            "1/4 rows\\x1b[",  # the progress unit, cut to its column
        )

    drive(app, scenario, size=SIZE)


def test_the_detail_shows_hostile_text_literally(
    hostile: Controller, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(hostile)

    async def scenario(pilot: Pilot[int]) -> None:
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TaskDetailScreen), "the detail")
        history = app.screen.query_one("#history", DataTable)
        await wait_for(pilot, lambda: history.row_count == 4, "the history")
        await _settle(pilot)
        _assert_literal(
            _screen(app),
            "task evil\\n[/x]  [/x] [red]evil \\x1b]0;pwned\\x07",  # the title
            "[bold]job\\x1b[2J",  # name
            "[/tag]\\x1b[1m",  # tags
            "(key [/key]\\x1b[0m)",
            "[/msg] reading\\nrow 3",  # progress message
            "[/w]\\x1b]0;x until",  # lease
            "[bold]boom[/bold] [/oops]\\x1b]0;pwned\\x07",  # failure and attempt
            "[/why] because\\x1b]0;pwned\\x07",  # a history reason
            "[red]worker\\x1b[31m",  # a history actor
        )

    drive(app, scenario, size=SIZE)


def test_the_stop_dialog_and_the_status_line_show_hostile_text_literally(
    hostile: Controller, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(hostile)

    async def scenario(pilot: Pilot[int]) -> None:
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, StopDialog), "the stop dialog")
        await _settle(pilot)
        _assert_literal(_screen(app), "Stop task evil\\n[/x]", "[/x] [red]evil \\x1b]0;pwned")
        app.screen.query_one("#stop-reason", Input).value = "[/r] now"
        await pilot.press("enter")
        await _settle(pilot)
        _assert_literal(_screen(app), "Stop evil\\n[/x] with reason [/r] now?")
        await pilot.press("y")
        await wait_for(pilot, lambda: "requested" in app.last_said[0], "the stop's result")
        await _settle(pilot)
        _assert_literal(_screen(app), "stop of evil\\n[/x] requested")

    drive(app, scenario, size=SIZE)


def test_the_reconcile_view_shows_hostile_text_literally(
    hostile: Controller, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(hostile)

    async def scenario(pilot: Pilot[int]) -> None:
        await pilot.press("R")
        await wait_for(pilot, lambda: isinstance(app.screen, ReconcileScreen), "the view")
        adoptable = app.screen.query_one("#adoptable", DataTable)
        await wait_for(pilot, lambda: adoptable.row_count == 1, "the dry run")
        await _settle(pilot)
        _assert_literal(_screen(app), "evil\\n[/x]", "[/x] [red]evil \\x1b", "[/w]\\x1b]0;x")

    drive(app, scenario, size=SIZE)
