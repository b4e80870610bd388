"""The dashboard at any size: columns share the width, cuts show ``…``, nothing vital hides.

At 80x24 a fixed layout cut the status counts, the filter summary and the controls of
the key bar off, and every pipeline node of one run showed the same id.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rich.cells import cell_len
from rich.text import Text
from textual.pilot import Pilot

from chongming_runtime import Controller
from chongming_tui import DashboardApp
from chongming_tui._columns import COLUMNS, allocate
from chongming_tui.components.help import HelpScreen
from chongming_tui.components.task_table import TaskTable
from chongming_tui.testing import drive, screen_text, wait_for

SIZES = [(80, 24), (120, 40), (200, 50)]
NODES = [f"nightly-8093c2ab4f:{node}" for node in ("extract", "transform", "load")]


def _plain(cell: object) -> str:
    return cell.plain if isinstance(cell, Text) else str(cell)


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_counts_filters_and_controls_stay_in_sight(
    pipeline_console: Controller, make_app: Callable[..., DashboardApp], size: tuple[int, int]
) -> None:
    app = make_app(pipeline_console)

    async def scenario(pilot: Pilot[int]) -> None:
        await pilot.pause()
        lines = screen_text(app)
        assert len(lines) == size[1]
        text = "\n".join(lines)
        # every status count, whole (never cut inside "status n")
        for pair in ("queued 1", "running 5", "paused 2", "retry_wait 1", "succeeded 1",
                     "failed 1", "stopped 1", "cancelled 1", "skipped 1", "lost 1",
                     "unfinished 9", "total 15"):  # fmt: skip
            assert pair in text, pair
        assert "status: all · newest first · limit 200  15 shown" in text
        keys = lines[-1]
        for key in ("s stop", "p pause", "r resume", "R reconcile", "? keys", "q quit"):
            assert key in keys, f"{key!r} is not on the key bar: {keys!r}"
        assert all(cell_len(line) <= size[0] for line in lines)

    drive(app, scenario, size=size)


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
def test_columns_share_the_width_and_ids_keep_their_distinguishing_end(
    pipeline_console: Controller, make_app: Callable[..., DashboardApp], size: tuple[int, int]
) -> None:
    app = make_app(pipeline_console)

    async def scenario(pilot: Pilot[int]) -> None:
        await pilot.pause()
        table = app.overview.query_one(TaskTable)
        widths = table.column_widths
        assert widths == allocate(table.content_size.width - table.styles.scrollbar_size_vertical)
        drawn = sum(w + 2 for w in widths.values())
        assert drawn <= size[0]  # the table never scrolls sideways at these sizes
        assert size[0] - drawn <= 12 or len(widths) == len(COLUMNS)  # and uses the room
        shown = [_plain(table.get_cell(task_id, "id")) for task_id in NODES]
        assert len(set(shown)) == 3, shown
        for task_id, cell in zip(NODES, shown, strict=True):
            assert cell == task_id or (cell.endswith(task_id[-4:]) and "…" in cell)
        for row in table.ordered_rows:
            for key, width in widths.items():
                text = _plain(table.get_cell(row.key, key))
                assert cell_len(text) <= width, (row.key.value, key, text)

    drive(app, scenario, size=size)


def test_full_ids_and_long_progress_fit_a_wide_terminal(
    pipeline_console: Controller, make_app: Callable[..., DashboardApp]
) -> None:
    """At 250 columns the nodes' ids are whole; a progress text too long for its column
    is cut with an ellipsis, never silently."""
    app = make_app(pipeline_console)

    async def scenario(pilot: Pilot[int]) -> None:
        await pilot.pause()
        table = app.overview.query_one(TaskTable)
        assert [_plain(table.get_cell(t, "id")) for t in NODES] == NODES
        progress = _plain(table.get_cell(NODES[1], "progress"))
        assert progress.startswith("56200/2000000 rows normalised")
        assert progress.endswith("…")  # 46 cells of text in a column of 40: no room for a bar
        assert _plain(table.get_cell("load-001", "progress")) == "━" * 10 + " 500/500 rows"

    drive(app, scenario, size=(250, 50))


def test_a_resize_lays_the_columns_out_again_and_keeps_the_cursor(
    pipeline_console: Controller, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(pipeline_console)

    async def scenario(pilot: Pilot[int]) -> None:
        table = app.overview.query_one(TaskTable)
        table.move_cursor(row=table.get_row_index(NODES[2]))
        narrow = table.column_widths
        assert "lease" not in narrow
        await pilot.resize_terminal(200, 50)
        await wait_for(pilot, lambda: table.column_widths != narrow, "the new layout")
        assert "lease" in table.column_widths
        assert table.selected_task_id == NODES[2]
        assert _plain(table.get_cell(NODES[2], "id")) == NODES[2]

    drive(app, scenario, size=(80, 24))


def test_the_key_screen_lists_every_key_of_every_screen(
    console: Controller, make_app: Callable[..., DashboardApp]
) -> None:
    """The key bar shows only the main keys; ``?`` shows all of them, read from the
    bindings, so none is only in the documentation."""
    app = make_app(console)

    async def scenario(pilot: Pilot[int]) -> None:
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "the key screen")
        await pilot.pause()
        text = "\n".join(screen_text(app))
        for where, bindings in app.key_places():
            for binding in bindings:
                assert not isinstance(binding, tuple)
                key = app.get_key_display(binding)
                assert key in text, f"{where}: {key} ({binding.description})"
        for what in ("status group: failed/lost (failed, lost)", "filter by tag (empty clears)",
                     "filter by registered-name prefix", "reverse the order", "live refresh",
                     "refresh now", "quit", "move the cursor"):  # fmt: skip
            assert what in text, what
        await pilot.press("escape")
        assert app.screen is app.overview

    drive(app, scenario, size=(120, 40))
