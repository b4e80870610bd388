"""The banner over the task table that names stored rows the store could not read."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import Static

from chongming_core import UnreadableRow
from chongming_tui._format import literal

__all__ = ["UnreadableBanner", "banner_text"]

#: Rows named one by one; the rest are only counted.
NAMED = 3


def banner_text(rows: Sequence[UnreadableRow]) -> Text:
    """What the banner says: how many rows could not be read, then each one (up to `NAMED`)."""
    text = Text()
    count = "1 stored row" if len(rows) == 1 else f"{len(rows)} stored rows"
    text.append(f"{count} cannot be read", style="bold white on red")
    text.append(
        " — damaged (written by another program or by hand); every other task is shown",
        style="bold red",
    )
    for row in rows[:NAMED]:
        text.append("\n")
        text.append_text(literal(row.message, "red"))
    if len(rows) > NAMED:
        text.append(f"\nand {len(rows) - NAMED} more", style="red")
    return text


class UnreadableBanner(Static):
    """Hidden while every row reads; otherwise `banner_text` of the rows of the last refresh."""

    def on_mount(self) -> None:
        """Hidden until a refresh meets a row it cannot read."""
        self.display = False

    def show(self, rows: Sequence[UnreadableRow]) -> None:
        """Show `rows` (none: hide the banner)."""
        self.display = bool(rows)
        self.update(banner_text(rows) if rows else "")
