"""The task table: rows keyed by task id, updated in place on every refresh.

A refresh never clears the table. Rows that left the view are removed, new
ones are added, and only the cells whose text or style changed are rewritten,
so the table does not flicker and the cursor stays on the task the operator
selected, wherever that task moves. The columns share the table's width
(`allocate`): when the terminal is resized the columns are laid out again
and the rows redrawn once, at their new widths, with the cursor kept.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, ClassVar

from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.widgets import DataTable
from textual.widgets.data_table import ColumnKey, RowKey

from chongming_core import TaskSnapshot, TaskStatus
from chongming_tui._columns import COLUMNS, allocate
from chongming_tui._format import task_cells

__all__ = ["COLUMNS", "TaskTable", "sort_key"]

_HEADERS = {c.key: c.header for c in COLUMNS}
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

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "detail", tooltip="open the selected task's detail")
    ]

    def __init__(self, *, idle_threshold: float = 60.0, **kwargs: Any) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self.idle_threshold = idle_threshold
        self._signatures: dict[str, tuple[Any, ...]] = {}
        self._widths: dict[str, int] = {}
        self._shown: tuple[Sequence[TaskSnapshot], datetime] | None = None
        self._sort: tuple[str, bool] = ("created", False)

    @property
    def column_widths(self) -> dict[str, int]:
        """The columns shown and their widths, in display order."""
        return dict(self._widths)

    def on_mount(self) -> None:
        """Create the columns for the terminal's width (refined once the table is laid out)."""
        self._lay_out(self.app.size.width)

    def on_resize(self, event: events.Resize) -> None:
        """Share the new width among the columns."""
        self._lay_out(self.content_size.width)

    def _lay_out(self, width: int) -> None:
        # the vertical scrollbar's room is kept even before rows overflow, so the columns
        # do not jump when it appears
        widths = allocate(max(0, width - self.styles.scrollbar_size_vertical))
        if widths == self._widths:
            return
        selected = self.selected_task_id
        self.clear(columns=True)
        self._signatures.clear()
        self._widths = widths
        for key, width_ in widths.items():
            self.add_column(_HEADERS[key], width=width_, key=key)
        self.mark_sort(*self._sort)
        if self._shown is not None:
            self.apply(*self._shown, select=selected)

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
        self._sort = (column, reverse)
        for key in self._widths:
            arrow = ""
            if key == column:
                arrow = " ▼" if reverse else " ▲"
            self.columns[ColumnKey(key)].label = Text(_HEADERS[key] + arrow)
        self.refresh()

    def apply(
        self, snapshots: Sequence[TaskSnapshot], now: datetime, *, select: str | None = None
    ) -> None:
        """Show exactly `snapshots`, in this order, changing only what changed; the cursor
        stays on its task (or goes to `select`)."""
        self._shown = (snapshots, now)
        selected = select if select is not None else self.selected_task_id
        wanted = {s.task_id: s for s in snapshots}
        for task_id in [t for t in self._signatures if t not in wanted]:
            self.remove_row(task_id)
            del self._signatures[task_id]
        for snapshot in snapshots:
            cells = task_cells(
                snapshot, now, idle_threshold=self.idle_threshold, widths=self._widths
            )
            signature = tuple(_signature(c) for c in cells.values())
            before = self._signatures.get(snapshot.task_id)
            if before is None:
                self.add_row(*cells.values(), key=snapshot.task_id)
            elif before != signature:
                for (key, cell), old, new in zip(cells.items(), before, signature, strict=True):
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
