"""The dashboard header: where, who, how fresh, and how many tasks in each status."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from chongming_core import TaskStatus
from chongming_runtime import ControllerStats
from chongming_tui._format import STATUS_STYLES, format_age, literal

__all__ = ["DashboardHeader", "header_text"]


def header_text(
    *,
    store_label: str,
    owner: str,
    buckets: str,
    stats: ControllerStats | None,
    age: float | None,
    live: bool,
    error: str | None = None,
) -> Text:
    """Two lines: the store, the console and the refresh state; then the status counts."""
    text = Text()
    text.append("chongming", style="bold")
    text.append("  store ", style="dim")
    text.append_text(literal(store_label))
    text.append("  console ", style="dim")
    text.append_text(literal(owner))
    text.append("  buckets ", style="dim")
    text.append(buckets)
    text.append("  ")
    if age is None:
        text.append("loading…", style="dim")
    else:
        text.append(f"refreshed {format_age(age)} ago", style="dim")
    if not live:
        text.append("  live refresh off", style="bold yellow")
    if error is not None:
        text.append_text(literal(f"  store error: {error}", "bold red"))
    text.append("\n")
    if stats is None:
        return text
    for status in TaskStatus:
        count = stats.counts.get(status, 0)
        if count:
            text.append(f"{status.value} ", style=STATUS_STYLES[status])
            text.append(f"{count:,}  ")
    text.append("unfinished ", style="dim")
    text.append(f"{stats.unfinished:,}  ")
    text.append("total ", style="dim")
    text.append(f"{stats.total:,}")
    return text


class DashboardHeader(Static):
    """Shows `header_text`; the app calls `show` on every refresh and every second."""

    def show(self, text: Text) -> None:
        """Replace the content."""
        self.update(text)
