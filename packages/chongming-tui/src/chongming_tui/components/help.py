"""The key screen (``?``): every key of every screen, read from the bindings themselves.

The key bar at the bottom shows only the keys an operator needs at once (so pause,
resume, reconcile and quit fit on an 80-column terminal); this screen lists all of
them, so a key is never only in the documentation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

__all__ = ["NAVIGATION", "HelpScreen", "key_rows"]

#: Keys the tables inherit from Textual, which no binding of ours names.
NAVIGATION: tuple[tuple[str, str], ...] = (
    ("↑ ↓", "move the cursor in a table (or scroll this list)"),
    ("PgUp PgDn", "a page up or down"),
    ("Home End", "the first or the last row"),
    ("tab", "move the focus (shift+tab: back)"),
)


def key_rows(
    app: App[object], places: Sequence[tuple[str, Iterable[BindingType]]]
) -> list[tuple[str, str, str]]:
    """``(where, keys, what)`` for every binding of `places` (``(where, bindings)``), one
    row per action: keys bound to the same action in one place share the row."""
    rows: list[tuple[str, str, str]] = []
    for where, bindings in places:
        seen: dict[str, int] = {}
        for binding in bindings:
            if not isinstance(binding, Binding):
                continue
            key = app.get_key_display(binding)
            what = binding.tooltip or binding.description
            if binding.action in seen:
                at = seen[binding.action]
                place, keys, text = rows[at]
                rows[at] = (place, f"{keys} / {key}", text)
                continue
            seen[binding.action] = len(rows)
            rows.append((where, key, what))
    return rows


class HelpScreen(ModalScreen[None]):
    """Every key, where it works and what it does; ``escape``, ``q`` or ``?`` closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "back"),
        Binding("q", "dismiss", "back", show=False),
        Binding("question_mark", "dismiss", "back", show=False),
    ]

    def __init__(self, places: Sequence[tuple[str, Iterable[BindingType]]]) -> None:
        super().__init__()
        self._places = places

    def compose(self) -> ComposeResult:
        """The title and the table of keys."""
        with VerticalScroll(id="help-dialog"):
            yield Static(Text("keys  (escape closes)", style="bold"), id="help-title")
            yield Static(id="help-keys")

    def on_mount(self) -> None:
        """Fill the table from the bindings."""
        table = Table.grid(padding=(0, 2))
        table.add_column(style="dim", no_wrap=True)
        table.add_column(style="bold", no_wrap=True)
        table.add_column()
        for where, keys, what in key_rows(self.app, self._places):
            table.add_row(where, keys, what)
        for keys, what in NAVIGATION:
            table.add_row("tables", keys, what)
        self.query_one("#help-keys", Static).update(table)
