"""Screenshots of the overview (at 80x24, 120x40, 200x50 too), the detail and the stop
dialog, with CJK rows.

Deterministic by construction: fixed FakeClock-stamped data, "now" from the
same FakeClock, no live refresh, no blinking cursor. Regenerate after an
intended change with ``pytest packages/chongming-tui --snapshot-update`` and
look at the SVGs in ``__snapshots__/`` before keeping them.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from textual.pilot import Pilot
from textual.widgets import Input

from chongming_runtime import Controller
from chongming_tui import DashboardApp
from chongming_tui.components.detail import TaskDetailScreen
from chongming_tui.components.stop_dialog import StopDialog
from chongming_tui.components.task_table import TaskTable
from chongming_tui.testing import drive, wait_for

SIZE = (150, 36)
SnapCompare = Callable[..., bool]


async def _loaded(app: DashboardApp, pilot: Pilot[int]) -> None:
    await wait_for(pilot, lambda: app.refresh_count >= 1, "the first refresh")


def _select(app: DashboardApp, task_id: str) -> None:
    table = app.overview.query_one(TaskTable)
    table.move_cursor(row=table.get_row_index(task_id))


def test_overview(
    snap_compare: SnapCompare, console: Controller, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(console)

    async def before(pilot: Pilot[int]) -> None:
        await _loaded(app, pilot)
        _select(app, "etl-002")

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_detail_with_warnings(
    snap_compare: SnapCompare, console: Controller, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(console)

    async def before(pilot: Pilot[int]) -> None:
        await _loaded(app, pilot)
        app.open_detail("etl-002")
        await wait_for(
            pilot,
            lambda: (
                isinstance(app.screen, TaskDetailScreen)
                and app.latest is not None
                and app.latest.detail is not None
            ),
            "the detail",
        )

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_stop_dialog_asks_for_confirmation(
    snap_compare: SnapCompare, console: Controller, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(console)

    async def before(pilot: Pilot[int]) -> None:
        await _loaded(app, pilot)
        _select(app, "etl-001")
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, StopDialog), "the stop dialog")
        app.screen.query_one(Input).value = "发布窗口"
        await pilot.press("enter")

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


SIZES = [(80, 24), (120, 40), (200, 50)]


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_overview_at_size(
    snap_compare: SnapCompare,
    pipeline_console: Controller,
    make_app: Callable[..., DashboardApp],
    size: tuple[int, int],
) -> None:
    """Pipeline nodes that differ only at the end of their ids, long progress texts, a
    task paused in place: the columns share the width, and what is cut shows ``…``."""
    app = make_app(pipeline_console)

    async def before(pilot: Pilot[int]) -> None:
        await _loaded(app, pilot)
        _select(app, "nightly-8093c2ab4f:transform")

    assert snap_compare(app, terminal_size=size, run_before=before)


def test_failed_and_stopped_are_drawn_in_different_colours(
    console: Controller, make_app: Callable[..., DashboardApp]
) -> None:
    """In the default theme ``bold red`` and ``bold magenta`` were painted alike."""
    app = make_app(console)

    async def scenario(pilot: Pilot[int]) -> None:
        await _loaded(app, pilot)
        svg = app.export_screenshot()
        styles: dict[str, str] = dict(re.findall(r"\.(terminal-[\w-]+) \{ ([^}]*) \}", svg))

        def style_of(word: str) -> str:
            found = re.search(rf'class="(terminal-[\w-]+)"[^>]*>{word}</text>', svg)
            assert found is not None, word
            return styles[found.group(1)]

        assert style_of("failed") != style_of("stopped")
        assert "fill: #ff5f5f" in style_of("failed")
        assert "fill: #d75fd7" in style_of("stopped")

    drive(app, scenario)
