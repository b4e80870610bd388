"""Pure formatting of snapshots for the dashboard: colours, cells, ages, health.

Nothing here touches Textual or the store, so every rule is testable on its own.
Widths are *display* widths: a CJK character takes two cells (Rich measures
text the same way as `chongming_runtime.display_width`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from rich.text import Text

from chongming_core import TERMINAL_STATUSES, Progress, TaskSnapshot, TaskStatus
from chongming_runtime import format_elapsed, printable

__all__ = [
    "BAR_WIDTH",
    "STATUS_STYLES",
    "Health",
    "assess",
    "attempt_text",
    "format_age",
    "format_time",
    "literal",
    "progress_cell",
    "status_text",
    "task_cells",
    "truncated",
]

_S = TaskStatus

#: One style per status. The six terminal statuses differ in colour *and* in weight,
#: so they stay distinct on a terminal without colour too.
STATUS_STYLES: dict[TaskStatus, str] = {
    _S.PENDING: "dim",
    _S.BLOCKED: "dim italic",
    _S.QUEUED: "bright_blue",
    _S.STARTING: "cyan",
    _S.RUNNING: "bold cyan",
    _S.PAUSING: "yellow",
    _S.PAUSED: "bold yellow",
    _S.RETRY_WAIT: "dark_orange",
    _S.STOPPING: "magenta",
    _S.SUCCEEDED: "bold green",
    _S.FAILED: "bold red",
    _S.STOPPED: "bold magenta",
    _S.CANCELLED: "yellow strike",
    _S.SKIPPED: "dim green",
    _S.LOST: "bold white on red",
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


def attempt_text(snapshot: TaskSnapshot) -> str:
    """``n/max``."""
    return f"{snapshot.attempt}/{snapshot.max_attempts}"


def progress_cell(progress: Progress | None, *, bar_width: int = BAR_WIDTH) -> Text:
    """A bar and ``done/total unit``; only the text when the total is unknown; ``-`` for none."""
    if progress is None:
        return Text("-", style="dim")
    fraction = progress.fraction
    cell = Text()
    if fraction is not None:
        filled = round(fraction * bar_width)
        cell.append(_BAR_CHAR * filled, style="green" if fraction >= 1 else "cyan")
        cell.append(_BAR_CHAR * (bar_width - filled), style="grey37")
        cell.append(" ")
    cell.append(printable(progress.render()))  # the unit is stored text
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


def task_cells(
    snapshot: TaskSnapshot,
    now: datetime,
    *,
    idle_threshold: float,
    name_width: int,
    lease_width: int,
) -> tuple[str | Text, ...]:
    """The cells of one table row, in `TABLE_KEYS` order of the task table."""
    health = assess(snapshot, now, idle_threshold)
    owner = snapshot.lease_owner or "-"
    if health.lease_expired:
        lease = truncated(f"{owner} (expired)", lease_width, _WARN)
    else:
        lease = truncated(owner, lease_width, "" if snapshot.lease_owner else "dim")
    failure = snapshot.failure
    return (
        literal(snapshot.task_id),
        truncated(snapshot.display_name, name_width),
        status_text(snapshot.status),
        attempt_text(snapshot),
        format_elapsed(snapshot.elapsed(now)),
        progress_cell(snapshot.progress),
        "-" if snapshot.bucket is None else str(snapshot.bucket),
        lease,
        Text("-", style="dim") if failure is None else Text(failure.kind.value, style="red"),
    )
