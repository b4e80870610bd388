"""The filter bar: the status-group keys, the current filters, and the search box.

On a narrow terminal the list of group keys gives way first (the current group is
in the filter summary, and ``?`` lists the keys), then the summary is cut with
``…``; the row count at its end always stays in sight.
"""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Input, Static

from chongming_tui._filters import StatusGroup, TaskFilter
from chongming_tui._format import literal

__all__ = ["GROUP_KEYS", "FilterBar", "filter_text"]

#: The key of each status group, in the order shown.
GROUP_KEYS: tuple[tuple[str, StatusGroup], ...] = (
    ("0", StatusGroup.ALL),
    ("1", StatusGroup.ACTIVE),
    ("2", StatusGroup.QUEUED),
    ("3", StatusGroup.PAUSED),
    ("4", StatusGroup.FAILED),
)


def _group_keys(task_filter: TaskFilter) -> Text:
    text = Text()
    for key, group in GROUP_KEYS:
        style = "bold reverse" if group is task_filter.group else ""
        text.append(f"[{key}]", style="dim")
        text.append(group.value, style=style)
        text.append(" ")
    text.append(" ")
    return text


def _count(task_filter: TaskFilter, shown: int | None) -> Text:
    text = Text()
    if shown is not None:
        text.append("  ")
        if shown >= task_filter.limit:
            text.append(f"first {shown:,} shown: narrow the filter", style="yellow")
        else:
            text.append(f"{shown:,} shown", style="dim")
    return text


def filter_text(task_filter: TaskFilter, shown: int | None, width: int | None = None) -> Text:
    """The group keys (the current one highlighted), then the filters and the row count,
    in `width` cells (None: all of it)."""
    summary = literal(task_filter.describe(), "italic")  # quotes what was typed
    count = _count(task_filter, shown)
    full = Text.assemble(_group_keys(task_filter), summary, count)
    if width is None or full.cell_len <= width:
        return full
    summary.truncate(max(1, width - count.cell_len), overflow="ellipsis")
    return Text.assemble(summary, count)


class FilterSummary(Static):
    """`filter_text` laid out for its width."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self._shown: tuple[TaskFilter, int | None] | None = None

    def show(self, task_filter: TaskFilter, shown: int | None) -> None:
        """Replace the content."""
        self._shown = (task_filter, shown)
        self._lay_out()

    def on_resize(self, event: events.Resize) -> None:
        """Lay the summary out for the new width."""
        self._lay_out()

    def _lay_out(self) -> None:
        if self._shown is None:
            return
        room = self.content_size.width
        self.update(filter_text(*self._shown, room if room > 0 else None))


class FilterBar(Horizontal):
    """`filter_text` on the left, the search `Input` on the right."""

    def __init__(self, *, cursor_blink: bool = True) -> None:
        super().__init__()
        self._cursor_blink = cursor_blink

    def compose(self) -> ComposeResult:
        """The summary and the search box."""
        yield FilterSummary(id="filter-summary")
        search = Input(placeholder="/ search id, name, label", id="search")
        search.cursor_blink = self._cursor_blink
        yield search

    def show(self, task_filter: TaskFilter, shown: int | None) -> None:
        """Refresh the summary."""
        self.query_one("#filter-summary", FilterSummary).show(task_filter, shown)
