"""The filter bar: the status-group keys, the current filters, and the search box."""

from __future__ import annotations

from rich.text import Text
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


def filter_text(task_filter: TaskFilter, shown: int | None) -> Text:
    """The group keys (the current one highlighted), then the filters and the row count."""
    text = Text()
    for key, group in GROUP_KEYS:
        style = "bold reverse" if group is task_filter.group else ""
        text.append(f"[{key}]", style="dim")
        text.append(group.value, style=style)
        text.append(" ")
    text.append(" ")
    text.append_text(literal(task_filter.describe(), "italic"))  # quotes what was typed
    if shown is not None:
        text.append("  ")
        if shown >= task_filter.limit:
            text.append(f"first {shown:,} shown: narrow the filter", style="yellow")
        else:
            text.append(f"{shown:,} shown", style="dim")
    return text


class FilterBar(Horizontal):
    """`filter_text` on the left, the search `Input` on the right."""

    def __init__(self, *, cursor_blink: bool = True) -> None:
        super().__init__()
        self._cursor_blink = cursor_blink

    def compose(self) -> ComposeResult:
        """The summary and the search box."""
        yield Static(id="filter-summary")
        search = Input(placeholder="/ search id, name, label", id="search")
        search.cursor_blink = self._cursor_blink
        yield search

    def show(self, task_filter: TaskFilter, shown: int | None) -> None:
        """Refresh the summary."""
        self.query_one("#filter-summary", Static).update(filter_text(task_filter, shown))
