"""Pure formatting of snapshots for the dashboard: colours, cells, ages, health.

Nothing here touches Textual or the store, so every rule is testable on its own.
Widths are *display* widths: a CJK character takes two cells (Rich measures
text the same way as `chongming_runtime.display_width`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from rich.cells import cell_len
from rich.text import Text

from chongming_core import TERMINAL_STATUSES, Progress, TaskSnapshot, TaskStatus
from chongming_runtime import format_elapsed, name_cell, printable

__all__ = [
    "BAR_WIDTH",
    "STATUS_STYLES",
    "Health",
    "assess",
    "attempt_text",
    "format_age",
    "format_time",
    "literal",
    "name_cell_text",
    "paused_cell",
    "progress_cell",
    "shortened",
    "status_text",
    "task_cells",
    "truncated",
]

_S = TaskStatus

#: One style per status. Colours are given as RGB values of the xterm 256-colour cube, not
#: as ANSI names: Textual (and the terminal) repaint the sixteen ANSI colours with a theme,
#: and its default theme paints red and magenta alike, so ``failed`` and ``stopped``
#: looked the same. These stay what they are on a truecolor terminal, map exactly onto a
#: 256-colour one, and still fall on distinct colours of a 16-colour one. The six terminal
#: statuses differ in colour, and ``lost`` also in background.
STATUS_STYLES: dict[TaskStatus, str] = {
    _S.PENDING: "dim",
    _S.BLOCKED: "dim italic",
    _S.QUEUED: "#5fafff",
    _S.STARTING: "#5fd7d7",
    _S.RUNNING: "bold #00d7ff",
    _S.PAUSING: "#ffd75f",
    _S.PAUSED: "bold #ffd700",
    _S.RETRY_WAIT: "#ff8700",
    _S.STOPPING: "#d787d7",
    _S.SUCCEEDED: "bold #5fd75f",
    _S.FAILED: "bold #ff5f5f",
    _S.STOPPED: "bold #d75fd7",
    _S.CANCELLED: "#d7af00 strike",
    _S.SKIPPED: "#5f875f",
    _S.LOST: "bold #ffffff on #af0000",
}

#: Cells of the progress bar drawn before ``done/total unit``.
BAR_WIDTH = 10
_BAR_CHAR = "━"
_WARN = "bold yellow"


def status_text(status: TaskStatus) -> Text:
    """The status name in its style."""
    text = Text()
    text.append(status.value, style=STATUS_STYLES[status])
    return text


def literal(text: str, style: str = "") -> Text:
    """Text stored in a task's record, shown as it is: never read as Rich markup, with
    line breaks and other control characters escaped (it came from the task's submitter)."""
    return Text(printable(text), style=style)


def truncated(text: str, width: int, style: str = "") -> Text:
    """Stored `text` as a `literal`, cut to `width` display cells with ``…`` (CJK aware)."""
    cell = literal(text, style)
    cell.truncate(width, overflow="ellipsis")
    return cell


def shortened(text: str, width: int, style: str = "") -> Text:
    """Stored `text` in `width` display cells, cut in the middle with ``…``: ids of one
    pipeline or one task name share their beginning and differ at the end (``nightly-
    8093c2ab:extract``), so the end is kept and the beginning gives way first."""
    plain = printable(text)
    if cell_len(plain) <= width:
        return Text(plain, style=style)
    if width <= 1:
        return Text("…"[:width], style=style)
    head_room = (width - 1) // 3
    tail_room = width - 1 - head_room
    head: list[str] = []
    used = 0
    for char in plain:
        if used + cell_len(char) > head_room:
            break
        head.append(char)
        used += cell_len(char)
    tail: list[str] = []
    used = 0
    for char in reversed(plain):
        if used + cell_len(char) > tail_room:
            break
        tail.append(char)
        used += cell_len(char)
    return Text("".join(head) + "…" + "".join(reversed(tail)), style=style)


def name_cell_text(snapshot: TaskSnapshot, width: int) -> Text:
    """The NAME cell: the label, and the registered name it hides in brackets, muted
    (``转换-1 (transform)``), as ``ps`` shows it (D87); the label gives way first."""
    text = name_cell(snapshot, width)
    cell = Text(text)
    hidden = f" ({printable(snapshot.name)})"
    if snapshot.label and text.endswith(hidden):
        cell.stylize("dim", len(text) - len(hidden))
    return cell


def attempt_text(snapshot: TaskSnapshot) -> str:
    """``n/max``."""
    return f"{snapshot.attempt}/{snapshot.max_attempts}"


def progress_cell(
    progress: Progress | None, *, bar_width: int = BAR_WIDTH, width: int | None = None
) -> Text:
    """A bar and ``done/total unit``; only the text when the total is unknown; ``-`` for none.

    With a `width`, the cell fits it: the bar narrows (and goes, below three cells) to
    leave room for the text, and a text still too long is cut with ``…``.
    """
    if progress is None:
        return Text("-", style="dim")
    fraction = progress.fraction
    label = printable(progress.render())  # the unit is stored text
    if width is not None:
        bar_width = min(bar_width, width - cell_len(label) - 1)
    cell = Text()
    if fraction is not None and bar_width >= 3:
        filled = round(fraction * bar_width)
        cell.append(_BAR_CHAR * filled, style="green" if fraction >= 1 else "cyan")
        cell.append(_BAR_CHAR * (bar_width - filled), style="grey37")
        cell.append(" ")
    cell.append(label)
    if width is not None:
        cell.truncate(width, overflow="ellipsis")
    return cell


def format_age(seconds: float) -> str:
    """A duration for people: ``0.4s``, ``12.0s``, ``3m05s``, ``2h07m``; negative reads ``in …``."""
    if seconds < 0:
        return f"in {format_elapsed(-seconds)}"
    return format_elapsed(seconds)


def format_time(moment: datetime | None) -> str:
    """``2026-01-01 10:00:05.250 +00:00`` style text, ``-`` for None."""
    if moment is None:
        return "-"
    text = moment.strftime("%Y-%m-%d %H:%M:%S")
    millis = moment.microsecond // 1000
    offset = moment.strftime("%z")
    offset = f"{offset[:3]}:{offset[3:]}" if offset else ""
    return f"{text}.{millis:03d} {offset}".rstrip()


@dataclass(frozen=True, slots=True)
class Health:
    """What the dashboard warns about for one task at one moment.

    Attributes:
        heartbeat_age: seconds since the last heartbeat (None: never beat).
        heartbeat_stale: a live, executing task whose last beat is older than the idle
            threshold (a hint only: a long computation may not beat).
        lease_left: seconds until the lease ends (negative once expired; None: no lease).
        lease_expired: a live task whose lease has ended: nobody renews it, so
            ``reconcile`` would judge it.
    """

    heartbeat_age: float | None
    heartbeat_stale: bool
    lease_left: float | None
    lease_expired: bool

    @property
    def warning(self) -> bool:
        """True when either condition deserves the operator's eye."""
        return self.heartbeat_stale or self.lease_expired


def assess(snapshot: TaskSnapshot, now: datetime, idle_threshold: float) -> Health:
    """Judge heartbeat and lease of `snapshot` at `now` (terminal tasks never warn)."""
    live = snapshot.status not in TERMINAL_STATUSES
    beat = snapshot.last_heartbeat_at
    age = None if beat is None else (now - beat).total_seconds()
    stale = live and snapshot.status.is_active and age is not None and age > idle_threshold
    until = snapshot.lease_until
    left = None if until is None else (until - now).total_seconds()
    expired = live and left is not None and left < 0
    return Health(age, stale, left, expired)


def paused_cell(snapshot: TaskSnapshot, now: datetime) -> Text:
    """The PAUSED cell: how long the current (or last) attempt was paused in place, in the
    paused style while the pause lasts; ``-`` when it never was (D88)."""
    paused = snapshot.paused_for(now)
    if not paused:
        return Text("-", style="dim")
    style = STATUS_STYLES[_S.PAUSED] if snapshot.paused_since is not None else ""
    return Text(format_elapsed(paused), style=style)


def task_cells(
    snapshot: TaskSnapshot,
    now: datetime,
    *,
    idle_threshold: float,
    widths: Mapping[str, int],
) -> dict[str, str | Text]:
    """The cells of one table row for the columns in `widths` (key -> width), each cut to
    its width with ``…`` (ids in the middle, keeping their distinguishing end)."""
    cells: dict[str, str | Text] = {}
    for key, width in widths.items():
        cells[key] = _CELLS[key](snapshot, now, width, idle_threshold)
    return cells


def _lease_cell(snapshot: TaskSnapshot, now: datetime, width: int, idle: float) -> Text:
    owner = snapshot.lease_owner or "-"
    if assess(snapshot, now, idle).lease_expired:
        flag = " (expired)"  # the warning stays whole; the owner's name gives way
        cell = truncated(owner, max(1, width - len(flag)), _WARN)
        cell.append(flag)
        cell.truncate(width, overflow="ellipsis")
        return cell
    return truncated(owner, width, "" if snapshot.lease_owner else "dim")


def _failure_cell(snapshot: TaskSnapshot, now: datetime, width: int, idle: float) -> Text:
    failure = snapshot.failure
    if failure is None:
        return Text("-", style="dim")
    return truncated(failure.kind.value, width, "red")


_Cell = Callable[[TaskSnapshot, datetime, int, float], "str | Text"]
_CELLS: dict[str, _Cell] = {
    "id": lambda s, now, w, idle: shortened(s.task_id, w),
    "name": lambda s, now, w, idle: name_cell_text(s, w),
    "status": lambda s, now, w, idle: status_text(s.status),
    "attempt": lambda s, now, w, idle: attempt_text(s),
    "elapsed": lambda s, now, w, idle: format_elapsed(s.elapsed(now)),
    "paused": lambda s, now, w, idle: paused_cell(s, now),
    "progress": lambda s, now, w, idle: progress_cell(s.progress, width=w),
    "bucket": lambda s, now, w, idle: "-" if s.bucket is None else str(s.bucket),
    "lease": _lease_cell,
    "failure": _failure_cell,
}
