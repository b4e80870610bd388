"""The task table: rows keyed by task id, updated in place on every refresh.

A refresh never clears the table. Rows that left the view are removed, new
ones are added, and only the cells whose text or style changed are rewritten,
so the table does not flicker and the cursor stays on the task the operator
selected, wherever that task moves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, ClassVar

from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

from chongming_core import TaskSnapshot, TaskStatus
from chongming_tui._format import task_cells

__all__ = ["COLUMNS", "TaskTable", "sort_key"]

#: (key, header, width) of every column, in order. The key doubles as the sort name.
COLUMNS: tuple[tuple[str, str, int], ...] = (
    ("id", "TASK_ID", 14),
    ("name", "NAME", 16),
    ("status", "STATUS", 10),
    ("attempt", "ATTEMPT", 7),
    ("elapsed", "ELAPSED", 7),
    ("progress", "PROGRESS", 24),
    ("bucket", "BUCKET", 6),
    ("lease", "LEASE OWNER", 18),
    ("failure", "FAILURE", 15),
)
_NAME_WIDTH = {k: w for k, _, w in COLUMNS}["name"]
_LEASE_WIDTH = {k: w for k, _, w in COLUMNS}["lease"]
_STATUS_ORDER = {status: i for i, status in enumerate(TaskStatus)}

Cell = str | Text


def _signature(cell: Cell) -> Any:
    # Text equality ignores the base style, and a status changing colour must repaint
    if isinstance(cell, Text):
        return (cell.plain, str(cell.style), tuple(cell.spans))
    return cell


def sort_key(column: str, now: datetime) -> Callable[[TaskSnapshot], Any]:
    """The key that orders snapshots by `column` (``created`` keeps the store's order)."""
    keys: dict[str, Callable[[TaskSnapshot], Any]] = {
        "id": lambda s: s.task_id,
        "name": lambda s: s.display_name.casefold(),
        "status": lambda s: _STATUS_ORDER[s.status],
        "attempt": lambda s: (s.attempt, s.max_attempts),
        "elapsed": lambda s: _or(s.elapsed(now), -1.0),
        "progress": lambda s: _or(None if s.progress is None else s.progress.fraction, -1.0),
        "bucket": lambda s: _or(s.bucket, -1),
        "lease": lambda s: s.lease_owner or "",
        "failure": lambda s: "" if s.failure is None else s.failure.kind.value,
    }
    return keys.get(column, lambda s: 0)


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


class TaskTable(DataTable[Cell]):
    """A `DataTable` of task snapshots with in-place, keyed updates."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("enter", "select_cursor", "detail")]

    def __init__(self, *, idle_threshold: float = 60.0, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self.idle_threshold = idle_threshold
        self._signatures: dict[str, tuple[Any, ...]] = {}

    def on_mount(self) -> None:
        """Create the columns."""
        for key, label, width in COLUMNS:
            self.add_column(label, width=width, key=key)

    @property
    def selected_task_id(self) -> str | None:
        """The task under the cursor (None: the table is empty)."""
        if self.row_count == 0:
            return None
        row_key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        return row_key.value

    @property
    def task_ids(self) -> list[str]:
        """The task ids in display order."""
        return [str(row.key.value) for row in self.ordered_rows]

    def mark_sort(self, column: str, reverse: bool) -> None:
        """Show an arrow on the header of the sort column."""
        for key, label, _ in COLUMNS:
            arrow = ""
            if key == column:
                arrow = " ▼" if reverse else " ▲"
            self.columns[ColumnKey(key)].label = Text(label + arrow)
        self.refresh()

    def apply(self, snapshots: Sequence[TaskSnapshot], now: datetime) -> None:
        """Show exactly `snapshots`, in this order, changing only what changed."""
        selected = self.selected_task_id
        wanted = {s.task_id: s for s in snapshots}
        for task_id in [t for t in self._signatures if t not in wanted]:
            self.remove_row(task_id)
            del self._signatures[task_id]
        for snapshot in snapshots:
            cells = task_cells(
                snapshot,
                now,
                idle_threshold=self.idle_threshold,
                name_width=_NAME_WIDTH,
                lease_width=_LEASE_WIDTH,
            )
            signature = tuple(_signature(c) for c in cells)
            before = self._signatures.get(snapshot.task_id)
            if before is None:
                self.add_row(*cells, key=snapshot.task_id)
            elif before != signature:
                for (key, _, _), cell, old, new in zip(
                    COLUMNS, cells, before, signature, strict=True
                ):
                    if old != new:
                        self.update_cell(snapshot.task_id, key, cell)
            self._signatures[snapshot.task_id] = signature
        order = [s.task_id for s in snapshots]
        if self.task_ids != order:
            position = {task_id: i for i, task_id in enumerate(order)}
            self.sort("id", key=lambda task_id: position[str(task_id)])
        if selected is not None and selected in wanted:
            index = self.get_row_index(RowKey(selected))
            if index != self.cursor_row:
                self.move_cursor(row=index, animate=False)
