"""`render_table`: the task table shared by the CLI and the dashboard (guide §8.2, §8.4).

Columns are aligned by *display width*, not `len`: a CJK character takes two
terminal cells, a combining mark none, so labels like ``转换-1`` line up.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from chongming_core import TaskSnapshot

__all__ = [
    "TABLE_COLUMNS",
    "display_width",
    "encodable",
    "format_elapsed",
    "name_cell",
    "pad",
    "printable",
    "render_table",
]

#: The columns of `render_table`, in order.
TABLE_COLUMNS = ("TASK_ID", "NAME", "STATUS", "ATTEMPT", "ELAPSED", "PROGRESS", "BUCKET", "FAILURE")


def printable(text: str, encoding: str | None = None) -> str:
    """`text` with line breaks and every other control character escaped (``\\n``,
    ``\\x1b``...): what a task's record holds came from its submitter, and shown as it
    is, an escape sequence would drive the terminal and a line break would forge rows.

    Args:
        text: the text to show.
        encoding: the encoding of the stream it is written to (e.g. ``sys.stdout.encoding``):
            characters it cannot hold are escaped too (``\\u4efb``), so a table measured
            on the result stays aligned where it is printed. None: any character goes.
    """
    if not text.isprintable():
        text = "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)
    return text if encoding is None else encodable(text, encoding)


def encodable(text: str, encoding: str) -> str:
    """`text` with the characters `encoding` cannot hold written as ``\\xe9``, ``\\u4efb``,
    ``\\U0001f600`` (an unknown encoding is taken as able to hold everything)."""
    if text.isascii():
        return text  # every encoding a console uses holds ASCII
    try:
        text.encode(encoding)
    except UnicodeEncodeError:
        return text.encode(encoding, "backslashreplace").decode(encoding)
    except LookupError:
        pass
    return text


def _char_width(char: str) -> int:
    if unicodedata.combining(char) or unicodedata.category(char) in {"Mn", "Me", "Cf"}:
        return 0
    if unicodedata.category(char) == "Cc":
        return 0
    return 2 if unicodedata.east_asian_width(char) in {"W", "F"} else 1


def display_width(text: str) -> int:
    """How many terminal cells `text` takes (CJK and wide emoji count two)."""
    if text.isascii():
        return len(text)
    return sum(_char_width(c) for c in text)


def pad(text: str, width: int) -> str:
    """`text` padded with spaces on the right to `width` display cells."""
    return text + " " * max(0, width - display_width(text))


def truncate(text: str, width: int, encoding: str | None = None) -> str:
    """`text` cut to at most `width` display cells, marking a cut with ``…`` (``...`` where
    `encoding` cannot hold it)."""
    if display_width(text) <= width:
        return text
    marker = "…" if encoding is None or encodable("…", encoding) == "…" else "..."
    out: list[str] = []
    used = 0
    room = width - display_width(marker)
    for char in text:
        w = _char_width(char)
        if used + w > room:
            break
        out.append(char)
        used += w
    return "".join(out) + marker


def format_elapsed(seconds: float | None) -> str:
    """``-`` for a task that never ran, else ``0.4s``, ``12.3s``, ``3m05s`` or ``2h07m``."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def name_cell(snapshot: TaskSnapshot, width: int | None = None, encoding: str | None = None) -> str:
    """The NAME cell: the label, followed by the registered name in brackets when the label
    hides it (``转换-1 (transform)``), so the name ``--name-prefix`` matches is always in
    sight (R11, D87). Cut to `width` display cells, the label gives way first; `encoding`
    as for `printable`."""
    name = printable(snapshot.name, encoding)
    label = printable(snapshot.label, encoding) if snapshot.label else None
    if label is None or label == name:
        return name if width is None else truncate(name, width, encoding)
    suffix = f" ({name})"
    if width is None:
        return label + suffix
    room = width - display_width(suffix)
    if room >= min(display_width(label), 4):
        return truncate(label, room, encoding) + suffix
    return truncate(label + suffix, width, encoding)


def _row(
    snapshot: TaskSnapshot, now: datetime, name_width: int | None, encoding: str | None
) -> list[str]:
    name = name_cell(snapshot, name_width, encoding)
    progress = snapshot.progress
    return [
        printable(snapshot.task_id, encoding),
        name,
        snapshot.status.value,
        f"{snapshot.attempt}/{snapshot.max_attempts}",
        format_elapsed(snapshot.elapsed(now)),
        "-" if progress is None else printable(progress.render(), encoding),
        "-" if snapshot.bucket is None else str(snapshot.bucket),
        "-" if snapshot.failure is None else snapshot.failure.kind.value,
    ]


def render_table(
    snapshots: Iterable[TaskSnapshot],
    *,
    now: datetime | None = None,
    columns: Sequence[str] = TABLE_COLUMNS,
    max_name_width: int | None = 40,
    encoding: str | None = None,
) -> str:
    """Render snapshots as an aligned text table with a header and a rule.

    The NAME column shows the label when there is one, else the registered name
    (R11); a label that hides the name is followed by it in brackets (D87). ELAPSED is
    running time (time paused in place is not counted, D88), ``-`` for a task that
    never ran: a duration there would read as "it has been running this long". Give
    the `encoding` of the stream the table goes to when it may not hold every character
    (an ASCII-only stdout): what it cannot hold is escaped before the columns are
    measured (see `printable`).

    Example::

        print(render_table(controller.list_tasks()))
    """
    unknown = [c for c in columns if c not in TABLE_COLUMNS]
    if unknown:
        raise ValueError(f"unknown columns {unknown}; choose from {list(TABLE_COLUMNS)}")
    moment = now or datetime.now(UTC)
    index = [TABLE_COLUMNS.index(c) for c in columns]
    rows = [
        [full[i] for i in index]
        for full in (_row(s, moment, max_name_width, encoding) for s in snapshots)
    ]
    header = list(columns)
    widths = [display_width(h) for h in header]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], display_width(cell))
    lines = [
        "  ".join(pad(cell, widths[i]) for i, cell in enumerate(header)).rstrip(),
        "  ".join("-" * widths[i] for i in range(len(header))),
    ]
    lines.extend(
        "  ".join(pad(cell, widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows
    )
    return "\n".join(lines)
