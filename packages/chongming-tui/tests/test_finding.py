"""Finding tasks: status-group keys, tag, bucket, name prefix, search, order — as store queries."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pytest
from textual.pilot import Pilot

from chongming_core import FakeClock, TaskSnapshot, TaskStatus
from chongming_runtime import Controller
from chongming_store_sqlite import SqliteTaskStore
from chongming_tui import DashboardApp
from chongming_tui.components.task_table import TaskTable
from chongming_tui.testing import drive, wait_for

S = TaskStatus


class RecordingController(Controller):
    """A console controller that remembers every list_tasks call."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.queries: list[dict[str, Any]] = []

    def list_tasks(
        self, status: TaskStatus | str | Iterable[TaskStatus | str] | None = None, **kwargs: Any
    ) -> list[TaskSnapshot]:
        self.queries.append({"status": status, **kwargs})
        return super().list_tasks(status, **kwargs)


@pytest.fixture
def recorder(store: SqliteTaskStore, clock: FakeClock) -> Iterable[RecordingController]:
    controller = RecordingController(store=store, owner="console-1", clock=clock)
    yield controller
    controller.close(timeout=10)


def _ids(app: DashboardApp) -> list[str]:
    return app.overview.query_one(TaskTable).task_ids


async def _shows(app: DashboardApp, pilot: Pilot[int], expected: list[str]) -> None:
    await wait_for(pilot, lambda: _ids(app) == expected, f"the rows {expected}")


@pytest.mark.parametrize(
    ("key", "expected", "statuses"),
    [
        ("1", ["etl-002", "etl-001"], {S.STARTING, S.RUNNING, S.PAUSING, S.STOPPING}),
        ("2", ["etl-004", "etl-003"], {S.PENDING, S.BLOCKED, S.QUEUED, S.RETRY_WAIT}),
        ("3", ["sync-001"], {S.PAUSING, S.PAUSED}),
        ("4", ["report-2", "sync-002"], {S.FAILED, S.LOST}),
    ],
)
def test_one_key_per_status_group_queries_the_store(
    recorder: RecordingController,
    make_app: Callable[..., DashboardApp],
    key: str,
    expected: list[str],
    statuses: set[TaskStatus],
) -> None:
    app = make_app(recorder, row_limit=100)

    async def scenario(pilot: Pilot[int]) -> None:
        await pilot.press(key)
        await _shows(app, pilot, expected)
        query = recorder.queries[-1]
        assert set(query["status"]) == statuses
        assert query["limit"] == 100
        assert query["newest_first"] is True
        await pilot.press("0")
        await wait_for(pilot, lambda: len(_ids(app)) == 11, "all tasks again")
        assert recorder.queries[-1]["status"] is None

    drive(app, scenario)


@pytest.mark.parametrize(
    ("key", "typed", "expected", "field", "value"),
    [
        ("t", "io", ["sync-002", "sync-001"], "tag", "io"),
        ("b", "7", ["sync-002", "sync-001"], "bucket", 7),
        ("n", "load", ["load-003", "load-002", "load-001"], "name_prefix", "load"),
    ],
)
def test_tag_bucket_and_name_prefix_are_asked_for_and_queried(
    recorder: RecordingController,
    make_app: Callable[..., DashboardApp],
    key: str,
    typed: str,
    expected: list[str],
    field: str,
    value: object,
) -> None:
    app = make_app(recorder)

    async def scenario(pilot: Pilot[int]) -> None:
        await pilot.press(key, *typed, "enter")
        await _shows(app, pilot, expected)
        assert recorder.queries[-1][field] == value
        assert recorder.queries[-1]["limit"] == 200
        await pilot.press("c")
        await wait_for(pilot, lambda: len(_ids(app)) == 11, "all tasks again")
        assert recorder.queries[-1][field] is None

    drive(app, scenario)


def test_a_prompt_can_be_cancelled_and_a_bad_bucket_is_refused(
    recorder: RecordingController, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(recorder)

    async def scenario(pilot: Pilot[int]) -> None:
        await pilot.press("t", *"etl", "escape")
        assert app.task_filter.tag is None
        app.prompt_filter("bucket")
        await pilot.pause()
        app.screen.dismiss("3x")
        await pilot.pause()
        assert app.task_filter.bucket is None
        assert app.last_said == ("bucket must be a whole number, got '3x'", "bold red")

    drive(app, scenario)


def test_the_search_box_finds_cjk_labels_case_insensitively(
    recorder: RecordingController, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(recorder)

    async def scenario(pilot: Pilot[int]) -> None:
        await pilot.press("slash", *"租户a")
        await _shows(app, pilot, ["sync-001"])
        assert recorder.queries[-1]["search"] == "租户a"
        await pilot.press("enter")  # back to the table
        assert isinstance(app.focused, TaskTable)
        await pilot.press("backspace")  # the table has the focus: the search stays
        await pilot.press("slash", "end", "backspace")  # focus selects all: go to the end
        await _shows(app, pilot, ["sync-002", "sync-001"])

    drive(app, scenario)


def test_ordering_by_column_and_flipping_the_store_order(
    recorder: RecordingController, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(recorder)

    async def scenario(pilot: Pilot[int]) -> None:
        table = app.overview.query_one(TaskTable)
        table.move_cursor(row=table.get_row_index("sync-001"))
        await pilot.press("o")  # by id
        await wait_for(pilot, lambda: _ids(app) == sorted(_ids(app)), "ids in order")
        assert _ids(app)[0] == "etl-001"
        assert table.selected_task_id == "sync-001"  # the selection follows the task
        await pilot.press("O")
        await wait_for(pilot, lambda: _ids(app)[0] == "sync-002", "ids reversed")
        await pilot.press(*["o"] * 9)  # id -> name -> ... -> failure -> created
        await wait_for(pilot, lambda: app.task_filter.sort == "created", "store order")
        await pilot.press("O")  # created reversed: the store returns the oldest first
        await wait_for(pilot, lambda: _ids(app)[0] == "etl-001", "oldest first")
        assert recorder.queries[-1]["newest_first"] is False

    drive(app, scenario)


def test_the_limit_is_honest_about_hidden_rows(
    recorder: RecordingController, make_app: Callable[..., DashboardApp]
) -> None:
    app = make_app(recorder, row_limit=3)

    async def scenario(pilot: Pilot[int]) -> None:
        assert _ids(app) == ["etl-004", "report-2", "report-1"]
        assert recorder.queries[-1]["limit"] == 3
        summary = app.overview.query_one("#filter-summary")
        assert "first 3 shown: narrow the filter" in str(summary.render())

    drive(app, scenario)
