"""The task table's columns and how they share the terminal's width.

Pure arithmetic, so every width rule is testable without a terminal: each column has a
minimum (its header, or what its cells need to stay readable), a maximum, and a weight
by which it takes a share of the spare width. On a terminal too narrow for every
column, the least needed ones give way first (the detail view shows all of them).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CELL_PADDING", "COLUMNS", "Column", "allocate"]

#: Cells of padding the table draws on each side of a column.
CELL_PADDING = 1


@dataclass(frozen=True, slots=True)
class Column:
    """One column of the task table.

    Attributes:
        key: the column's key (also its sort name).
        header: the header text.
        least: the narrowest it is drawn.
        most: the widest it grows.
        weight: its share of the spare width (0: always `least` wide).
        gives_way: the order in which columns are left out when the terminal is too
            narrow for all of them (1 first; 0: always shown).
        comfortable: the width below which the columns always shown read badly: an
            extra column (`extra`) gives way before they fall under it.
        extra: a column that also gives way for comfort, not only for room.
    """

    key: str
    header: str
    least: int
    most: int
    weight: int = 0
    gives_way: int = 0
    comfortable: int = 0
    extra: bool = False


#: Every column, in display order.
COLUMNS: tuple[Column, ...] = (
    Column("id", "TASK_ID", 12, 64, weight=4, comfortable=18),
    Column("name", "NAME", 14, 48, weight=3, comfortable=18),
    Column("status", "STATUS", 10, 10),
    Column("attempt", "ATTEMPT", 7, 7, gives_way=4),
    Column("elapsed", "ELAPSED", 7, 7),
    Column("paused", "PAUSED", 7, 7, gives_way=2, extra=True),
    Column("progress", "PROGRESS", 10, 40, weight=3, gives_way=6),
    Column("bucket", "BUCKET", 6, 6, gives_way=1, extra=True),
    Column("lease", "LEASE OWNER", 11, 32, weight=2, gives_way=3, extra=True),
    Column("failure", "FAILURE", 9, 15, weight=1, gives_way=5),
)


def _drawn(columns: list[Column], *, comfortably: bool = False) -> int:
    return sum(
        (max(c.least, c.comfortable) if comfortably else c.least) + 2 * CELL_PADDING
        for c in columns
    )


def allocate(width: int) -> dict[str, int]:
    """The columns shown in `width` cells and the width of each, in display order.

    Columns that do not fit give way in their `gives_way` order (extra columns also
    while the others would be narrower than comfortable); the spare width is shared by
    weight up to each column's `most`. When even the columns always shown do not fit,
    they keep their least width (the table then scrolls sideways).
    """
    shown = list(COLUMNS)
    for column in sorted((c for c in COLUMNS if c.gives_way), key=lambda c: c.gives_way):
        crowded = column.extra and _drawn(shown, comfortably=True) > width
        if _drawn(shown) <= width and not crowded:
            break
        shown.remove(column)
    widths = {c.key: c.least for c in shown}
    spare = width - _drawn(shown)
    while spare > 0:
        growing = [c for c in shown if c.weight and widths[c.key] < c.most]
        if not growing:
            break
        weights = sum(c.weight for c in growing)
        given = 0
        for column in growing:
            share = max(1, spare * column.weight // weights)
            step = min(share, column.most - widths[column.key], spare - given)
            widths[column.key] += step
            given += step
            if given >= spare:
                break
        spare -= given
    return widths
