"""The overview screen: header, filter bar, task table, status line, key footer."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, cast

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input

from chongming_core import TaskStatus
from chongming_tui._data import Refresh
from chongming_tui._filters import SORT_COLUMNS, StatusGroup
from chongming_tui.components.banner import UnreadableBanner
from chongming_tui.components.filter_bar import GROUP_KEYS, FilterBar
from chongming_tui.components.header import DashboardHeader
from chongming_tui.components.status_line import StatusLine
from chongming_tui.components.task_table import TaskTable, sort_key

if TYPE_CHECKING:
    from chongming_tui._app import DashboardApp

__all__ = ["OverviewScreen"]


def _members(group: StatusGroup) -> str:
    statuses = group.statuses
    if statuses is None or len(statuses) < 2:
        return ""
    return " (" + ", ".join(s.value for s in sorted(statuses, key=list(TaskStatus).index)) + ")"


class OverviewScreen(Screen[None]):
    """All tasks of the current view; the default screen of `DashboardApp`."""

    #: The key bar shows the controls and the way to every other key (``?``): on an
    #: 80-column terminal it has room for no more.
    BINDINGS: ClassVar[list[BindingType]] = [
        *(
            Binding(
                key,
                f"group('{group.name}')",
                group.value,
                show=False,
                tooltip=f"status group: {group.value}{_members(group)}",
            )
            for key, group in GROUP_KEYS
        ),
        Binding(
            "slash",
            "focus_search",
            "search",
            tooltip="search box: id, name or label (enter or escape: back)",
        ),
        Binding("t", "prompt('tag')", "tag", show=False, tooltip="filter by tag (empty clears)"),
        Binding(
            "b", "prompt('bucket')", "bucket", show=False, tooltip="filter by bucket (empty clears)"
        ),
        Binding(
            "n",
            "prompt('name_prefix')",
            "name",
            show=False,
            tooltip="filter by registered-name prefix (empty clears)",
        ),
        Binding("c", "clear_filters", "clear", show=False, tooltip="clear every filter"),
        Binding(
            "o",
            "cycle_sort",
            "order",
            show=False,
            tooltip="order by the next column (a click on a header does the same)",
        ),
        Binding(
            "O",
            "reverse_sort",
            "reverse",
            show=False,
            tooltip="reverse the order (in creation order: oldest instead of newest)",
        ),
        Binding("s", "app.stop_task", "stop", tooltip="stop: a reason, then a confirmation"),
        Binding("p", "app.pause_task", "pause", tooltip="pause the selected task"),
        Binding("r", "app.resume_task", "resume", tooltip="resume the selected task"),
        Binding(
            "R",
            "app.reconcile",
            "reconcile",
            tooltip="what reconcile(dry_run=True) would do; nothing is changed",
        ),
    ]

    @property
    def dashboard(self) -> DashboardApp:
        """The app, typed."""
        return cast("DashboardApp", self.app)

    def compose(self) -> ComposeResult:
        """Header, filters, table, status line, footer."""
        app = self.dashboard
        yield DashboardHeader(id="header")
        yield UnreadableBanner(id="unreadable")
        yield FilterBar(cursor_blink=app.cursor_blink)
        yield TaskTable(idle_threshold=app.idle_threshold, id="tasks")
        yield StatusLine(id="status-line")
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        """Show what is known so far (the first refresh may have finished already)."""
        latest = self.dashboard.latest
        if latest is None:
            self.query_one(FilterBar).show(self.dashboard.task_filter, None)
        else:
            self.show(latest)
        self.query_one(TaskTable).focus()

    # ------------------------------------------------------------------ refresh
    def show(self, refresh: Refresh) -> None:
        """Apply a refresh: the rows in the view's order, the filter summary, and the
        banner naming the stored rows that could not be read."""
        assert refresh.now is not None
        tables = self.query(TaskTable)
        if not tables or not tables.first().columns:
            return  # not mounted yet (on_mount shows the latest data) or being torn down
        task_filter = refresh.task_filter
        rows = list(refresh.tasks)
        if task_filter.sort != "created":
            rows.sort(key=sort_key(task_filter.sort, refresh.now), reverse=task_filter.sort_reverse)
        self.query_one(UnreadableBanner).show(refresh.unreadable)
        table = tables.first()
        table.mark_sort(task_filter.sort, task_filter.sort_reverse)
        table.apply(rows, refresh.now)
        self.query_one(FilterBar).show(task_filter, len(rows))

    # ------------------------------------------------------------------ actions
    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter (or a click) on a row opens its detail."""
        if event.row_key.value is not None:
            self.dashboard.open_detail(event.row_key.value)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        """A click on a header sorts by it; a second click reverses."""
        column = str(event.column_key.value)
        current = self.dashboard.task_filter
        if column == current.sort:
            self.action_reverse_sort()
        elif column in SORT_COLUMNS:
            self.dashboard.set_filter(current.replace(sort=column, sort_reverse=False))

    def action_group(self, name: str) -> None:
        """Show one status group."""
        self.dashboard.set_filter(self.dashboard.task_filter.replace(group=StatusGroup[name]))

    def action_focus_search(self) -> None:
        """Move the focus to the search box."""
        self.query_one("#search", Input).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        """Each keystroke in the search box is a new query (debounced by the refresh)."""
        if event.input.id == "search":
            self.dashboard.set_filter(self.dashboard.task_filter.replace(search=event.value))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in the search box goes back to the table."""
        if event.input.id == "search":
            self.query_one(TaskTable).focus()

    def key_escape(self) -> None:
        """Escape leaves the search box."""
        self.query_one(TaskTable).focus()

    def action_prompt(self, field: str) -> None:
        """Ask for a tag, bucket or name prefix."""
        self.dashboard.prompt_filter(field)

    def action_clear_filters(self) -> None:
        """Back to all tasks (the search box is cleared too)."""
        self.query_one("#search", Input).value = ""
        current = self.dashboard.task_filter
        self.dashboard.set_filter(
            current.replace(
                group=StatusGroup.ALL, tag=None, bucket=None, name_prefix=None, search=None
            )
        )

    def action_cycle_sort(self) -> None:
        """Order by the next column."""
        current = self.dashboard.task_filter
        index = (SORT_COLUMNS.index(current.sort) + 1) % len(SORT_COLUMNS)
        self.dashboard.set_filter(current.replace(sort=SORT_COLUMNS[index], sort_reverse=False))

    def action_reverse_sort(self) -> None:
        """Reverse the order (for ``created``: fetch the newest or the oldest tasks)."""
        current = self.dashboard.task_filter
        if current.sort == "created":
            self.dashboard.set_filter(current.replace(newest_first=not current.newest_first))
        else:
            self.dashboard.set_filter(current.replace(sort_reverse=not current.sort_reverse))

    def selected_task_id(self) -> str | None:
        """The task under the cursor."""
        return self.query_one(TaskTable).selected_task_id
