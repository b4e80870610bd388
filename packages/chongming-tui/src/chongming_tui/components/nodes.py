"""The nodes view: the workers that serve the store (``chongming-task nodes``), live or
expired, refreshed with the rest of the dashboard."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from chongming_core import WorkerRecord
from chongming_runtime import describe_buckets
from chongming_tui._format import format_age, format_time, literal

__all__ = ["NodesScreen", "capacity_text"]

#: Whether a worker is live, and when it was last seen, come first: an 80-column terminal
#: shows them whatever the length of the other cells (the table scrolls for the rest).
_COLUMNS = (
    ("owner", "OWNER"),
    ("state", "STATE"),
    ("seen", "LAST SEEN"),
    ("host", "HOST"),
    ("pid", "PID"),
    ("buckets", "BUCKETS"),
    ("names", "TASKS"),
    ("capacity", "CAPACITY"),
    ("active", "ACTIVE"),
    ("started", "STARTED"),
)


def capacity_text(capacity: Mapping[str, object]) -> str:
    """``max_parallel=4 gpu=2 fleet:gpu=4``: a worker's room, as its row states it."""
    parts = []
    if capacity.get("max_parallel") is not None:
        parts.append(f"max_parallel={capacity['max_parallel']}")
    for key, prefix in (("limits", ""), ("fleet_limits", "fleet:")):
        limits = capacity.get(key)
        if isinstance(limits, Mapping):
            parts.extend(f"{prefix}{tag}={n}" for tag, n in sorted(limits.items()))
    return " ".join(parts) or "-"


class NodesScreen(Screen[None]):
    """Every worker row of the store (the latest refresh's), one per line."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "back", tooltip="back to the overview"),
    ]

    def compose(self) -> ComposeResult:
        """Title, table, footer."""
        yield Static(id="nodes-title")
        yield DataTable[str | Text](id="nodes", cursor_type="row")
        yield Footer(show_command_palette=False)

    def on_mount(self) -> None:
        """Columns, then the latest data."""
        table = self.query_one("#nodes", DataTable)
        for key, label in _COLUMNS:
            table.add_column(label, key=key)
        latest = getattr(self.app, "latest", None)
        if latest is not None and latest.now is not None:
            self.show(latest.workers, latest.now, latest.active)

    def show(
        self, workers: Sequence[WorkerRecord], now: datetime, active: Mapping[str, int]
    ) -> None:
        """Apply the worker rows of a refresh, and how many tasks each holds active."""
        tables = self.query("#nodes")
        if not tables or not tables.first(DataTable).columns:
            return  # not mounted yet, or being torn down
        live = sum(1 for w in workers if w.is_live(now))
        title = self.query_one("#nodes-title", Static)
        if workers:
            title.update(Text(f"workers: {live} live, {len(workers) - live} expired", "bold"))
        else:
            title.update(
                Text("no worker has served this store yet (chongming-task worker)", "bold")
            )
        table = tables.first(DataTable)
        table.clear()
        for w in workers:
            alive = w.is_live(now)
            table.add_row(
                literal(w.owner),
                Text("live", "green") if alive else Text("expired", "yellow"),
                f"{format_age(max(0.0, (now - w.last_seen).total_seconds()))} ago",
                literal(w.host),
                str(w.pid),
                Text("all" if w.buckets is None else describe_buckets(w.buckets)),
                literal(", ".join(w.names) or "-"),
                literal(capacity_text(w.capacity)),
                str(active.get(w.owner, 0)),
                format_time(w.started_at),
                key=w.owner,
            )
