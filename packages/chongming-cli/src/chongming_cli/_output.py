"""Rendering: aligned tables (by display width), key/value blocks, JSON, colour.

Colour is used only on a terminal and never when ``NO_COLOR`` is set
(https://no-color.org); piped output and CI logs stay plain.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from chongming_cli._encoding import json_text, stream_encoding
from chongming_core import Failure, TaskSnapshot, TaskStatus, Transition
from chongming_runtime import TaskOutcome, display_width, format_elapsed, printable

__all__ = [
    "Palette",
    "failure_text",
    "format_outcome",
    "format_snapshot",
    "format_time",
    "format_value",
    "lease_expired_for",
    "outcome_document",
    "render_rows",
    "write_json",
]

_GOOD = frozenset({TaskStatus.SUCCEEDED})
_BAD = frozenset({TaskStatus.FAILED, TaskStatus.LOST})
_CODES = {"green": "32", "red": "31", "yellow": "33", "bold": "1", "dim": "2"}


class Palette:
    """ANSI colour when `stream` is a terminal and ``NO_COLOR`` is unset; plain text otherwise."""

    def __init__(self, stream: TextIO, environ: Mapping[str, str] | None = None) -> None:
        env = os.environ if environ is None else environ
        isatty = getattr(stream, "isatty", None)
        self.enabled = bool(
            callable(isatty)
            and isatty()
            and not env.get("NO_COLOR")
            and env.get("TERM", "") != "dumb"
        )

    def paint(self, text: str, colour: str) -> str:
        """`text` in `colour` (green, red, yellow, bold, dim) when colour is enabled."""
        if not self.enabled:
            return text
        return f"\x1b[{_CODES[colour]}m{text}\x1b[0m"

    def status(self, status: TaskStatus) -> str:
        """A status, green when it succeeded, red when failed or lost, yellow otherwise-ended."""
        if status in _GOOD:
            return self.paint(status.value, "green")
        if status in _BAD:
            return self.paint(status.value, "red")
        if status.is_terminal:
            return self.paint(status.value, "yellow")
        return status.value


def failure_text(failure: Failure) -> str:
    """``kind: message``, without saying the kind twice when the message begins with it
    (``cancelled: fail_fast: ...``, not ``cancelled: cancelled: fail_fast: ...``)."""
    kind = failure.kind.value
    message = failure.message
    return message if message == kind or message.startswith(f"{kind}: ") else f"{kind}: {message}"


def render_rows(
    header: Sequence[str], rows: Sequence[Sequence[str]], encoding: str | None = None
) -> str:
    """An aligned text table with a header and a rule, in the style of `render_table`
    (cells escaped for `encoding` before they are measured)."""
    rows = [[printable(cell, encoding) for cell in row] for row in rows]  # stored text
    widths = [display_width(h) for h in header]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], display_width(cell))

    def line(cells: Sequence[str]) -> str:
        padded = (c + " " * (widths[i] - display_width(c)) for i, c in enumerate(cells))
        return "  ".join(padded).rstrip()

    return "\n".join(
        [line(header), "  ".join("-" * w for w in widths), *(line(row) for row in rows)]
    )


def write_json(stream: TextIO, document: Any) -> None:
    """One JSON document (UTF-8 text kept as is, so labels in any script stay readable;
    ``\\u`` escapes where the stream's encoding cannot hold it)."""
    stream.write(json_text(document, stream_encoding(stream)) + "\n")


def format_value(value: Any) -> str:
    """A task's value as one line of JSON."""
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def format_time(moment: datetime | None) -> str:
    """``2026-01-02 03:04:05 UTC`` (second precision), ``-`` for none."""
    if moment is None:
        return "-"
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _block(pairs: Sequence[tuple[str, str]]) -> str:
    width = max(display_width(k) for k, _ in pairs) + 1
    return "\n".join(f"{k + ':':<{width}} {v}" for k, v in pairs)


def format_snapshot(
    snapshot: TaskSnapshot,
    palette: Palette | None = None,
    *,
    now: datetime | None = None,
    reconcile_hint: str = "chongming-task reconcile --dry-run",
    waiting: str | None = None,
    holder_gone_pid: int | None = None,
) -> str:
    """The ``status`` view: one task, one field per line (`reconcile_hint`: the command an
    expired lease points to, with the store options of the command line; `waiting`: why a
    durable queued task waits, see `waiting_reason`; `holder_gone_pid`: the pid of its
    holder, a worker of this host whose process no longer runs, D194)."""
    moment = now or datetime.now(UTC)
    status = palette.status(snapshot.status) if palette else snapshot.status.value
    p = printable  # every value below but the (painted) status came from the task's record
    pairs: list[tuple[str, str]] = [
        ("task", p(snapshot.task_id)),
        ("name", p(snapshot.name)),
    ]
    if snapshot.label:
        pairs.append(("label", p(snapshot.label)))
    if snapshot.description:
        pairs.append(("description", p(snapshot.description)))
    pairs += [
        ("status", status + (" (in place)" if snapshot.paused_in_place else "")),
        *([("waiting", p(waiting))] if waiting else []),
        *_due(snapshot, moment, waiting),
        ("attempt", f"{snapshot.attempt}/{snapshot.max_attempts}"),
        ("elapsed", format_elapsed(snapshot.elapsed(moment))),
        *_time_apart(snapshot, moment),
        *_liveness(snapshot, moment),
        ("progress", p(_progress_text(snapshot))),
        *([("arguments", p(_arguments_text(snapshot.arguments)))] if snapshot.durable else []),
        ("tags", p(", ".join(sorted(snapshot.tags))) or "-"),
        ("priority", str(snapshot.priority)),
        ("bucket", p(_bucket_text(snapshot))),
        (
            "owner",
            p(snapshot.lease_owner or "-")
            + _lease_text(snapshot, moment, palette, reconcile_hint, holder_gone_pid),
        ),
        ("created", format_time(snapshot.created_at)),
        ("started", format_time(snapshot.started_at)),
        ("finished", format_time(snapshot.finished_at)),
    ]
    if snapshot.failure is not None:
        pairs.append(("failure", p(failure_text(snapshot.failure))))
    if snapshot.status is TaskStatus.SUCCEEDED:
        pairs.append(("value", p(format_value(snapshot.outcome))))
    return _block(pairs)


#: At most this many characters of a durable task's arguments in ``status`` (``--json``
#: has them all).
_ARGUMENTS_SHOWN = 200


def _arguments_text(arguments: Mapping[str, Any] | None) -> str:
    """A durable task's stored arguments as a call would read: ``'a.csv', limit=10``."""
    if not arguments:
        return "-"
    args = arguments.get("args") or []
    kwargs = arguments.get("kwargs") or {}
    if (
        isinstance(args, list)
        and isinstance(kwargs, Mapping)
        and arguments.keys()
        <= {
            "args",
            "kwargs",
        }
    ):
        parts = [_json_text(value) for value in args]
        parts += [f"{key}={_json_text(value)}" for key, value in kwargs.items()]
        text = ", ".join(parts) or "(none)"
    else:  # not the form enqueue writes (a row written by another program): as stored
        text = _json_text(dict(arguments))
    if len(text) > _ARGUMENTS_SHOWN:
        text = text[: _ARGUMENTS_SHOWN - 1] + "… (--json shows them all)"
    return text


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _due(snapshot: TaskSnapshot, now: datetime, waiting: str | None) -> list[tuple[str, str]]:
    """When a queued task delayed to a later time becomes claimable, unless its waiting
    reason says so already (another reason, a bucket nobody owns, hid it)."""
    due = snapshot.run_at
    if snapshot.status is not TaskStatus.QUEUED or due is None or due <= now:
        return []
    if waiting is not None and waiting.startswith("due at"):
        return []
    return [("due at", f"{format_time(due)} (in {format_elapsed((due - now).total_seconds())})")]


def _time_apart(snapshot: TaskSnapshot, now: datetime) -> list[tuple[str, str]]:
    """What ``elapsed`` (running time) leaves out: the time the attempt spent paused in
    place, and since when its holder stopped renewing its lease (D88)."""
    pairs: list[tuple[str, str]] = []
    paused = snapshot.paused_for(now)
    since = snapshot.paused_since
    if since is not None:
        text = f"{format_elapsed(paused)}, in place since {format_time(since)}"
        pairs.append(("paused", text))
    elif paused:
        pairs.append(("paused", format_elapsed(paused)))
    gone = lease_expired_for(snapshot, now)
    if gone is not None and snapshot.lease_until is not None:
        text = (
            f"{format_time(snapshot.lease_until)} ({format_elapsed(gone)} ago): its lease was "
            "not renewed after that, so elapsed and paused count up to then, at most (the "
            "holder may have stopped before: its last heartbeat is the last sign of it)"
        )
        pairs.append(("lease ran out", text))
    return pairs


def _liveness(snapshot: TaskSnapshot, now: datetime) -> list[tuple[str, str]]:
    """For an unfinished task: when its body last beat (is it moving?) and, waiting to
    retry, when the next attempt is due."""
    if snapshot.is_terminal:
        return []
    pairs: list[tuple[str, str]] = []
    beat = snapshot.last_heartbeat_at
    if beat is not None:
        ago = max(0.0, (now - beat).total_seconds())
        pairs.append(("heartbeat", f"{format_time(beat)} ({format_elapsed(ago)} ago)"))
    due = snapshot.retry_at
    if snapshot.status is TaskStatus.RETRY_WAIT and due is not None:
        left = (due - now).total_seconds()
        when = f"in {format_elapsed(left)}" if left > 0 else "due now"
        pairs.append(("retry at", f"{format_time(due)} ({when})"))
    return pairs


def lease_expired_for(snapshot: TaskSnapshot, now: datetime) -> float | None:
    """Seconds since the lease of an unfinished task ended: nobody renews it, its holder
    may be gone (None: finished, never leased, or still renewed). `reconcile` judges it."""
    if snapshot.is_terminal or snapshot.lease_until is None:
        return None
    gone = (now - snapshot.lease_until).total_seconds()
    return gone if gone > 0 else None


def _lease_text(
    snapshot: TaskSnapshot,
    now: datetime,
    palette: Palette | None,
    reconcile_hint: str,
    holder_gone_pid: int | None = None,
) -> str:
    """`` (lease expires in 25.0s)`` for an unfinished task, a warning once it expired or
    once its holder's process is known gone."""
    if snapshot.is_terminal or snapshot.lease_until is None:
        return ""
    gone = lease_expired_for(snapshot, now)
    if gone is None:
        left = (snapshot.lease_until - now).total_seconds()
        if holder_gone_pid is None:
            return f" (lease expires in {format_elapsed(left)})"
        warning = (
            f"its process {holder_gone_pid} no longer runs on this host: nobody will end it; "
            f"its lease expires in {format_elapsed(left)}, then see: {reconcile_hint}"
        )
        return f" ({palette.paint(warning, 'yellow') if palette else warning})"
    warning = (
        f"lease EXPIRED {format_elapsed(gone)} ago: nobody renews it, its process may be "
        f"gone; see: {reconcile_hint}"
    )
    return f" ({palette.paint(warning, 'yellow') if palette else warning})"


def _progress_text(snapshot: TaskSnapshot) -> str:
    progress = snapshot.progress
    if progress is None:
        return "-"
    text = progress.render()
    return f"{text} ({progress.message})" if progress.message else text


def _bucket_text(snapshot: TaskSnapshot) -> str:
    if snapshot.bucket is None:
        return "-"
    return f"{snapshot.bucket} (key {snapshot.bucket_key!r})"


def outcome_document(outcome: TaskOutcome) -> dict[str, Any]:
    """The ``--json`` document of a task's outcome (``run`` and ``submit --wait``)."""
    failure = outcome.failure
    return {
        "task_id": outcome.task_id,
        "status": outcome.status.value,
        "ok": outcome.ok,
        "value": outcome.value,
        "failure": None if failure is None else failure.to_dict(),
        "snapshot": outcome.snapshot.to_dict(),
    }


def format_outcome(outcome: TaskOutcome, palette: Palette | None = None) -> str:
    """The end of ``run``: status, value as JSON, or the failure's kind and message."""
    snap = outcome.snapshot
    status = palette.status(outcome.status) if palette else outcome.status.value
    pairs = [
        (
            "task",
            printable(
                snap.task_id if snap.name == snap.task_id else f"{snap.task_id} ({snap.name})"
            ),
        ),
        ("status", status),
        ("attempt", f"{snap.attempt}/{snap.max_attempts}"),
        ("elapsed", format_elapsed(snap.elapsed(snap.finished_at or datetime.now(UTC)))),
    ]
    if outcome.ok:
        pairs.append(("value", printable(format_value(outcome.value))))
    elif outcome.failure is not None:
        failure = outcome.failure
        pairs.append(("failure", printable(failure_text(failure))))
    return _block(pairs)


def history_rows(transitions: Sequence[Transition]) -> list[list[str]]:
    """The ``history`` table's rows."""
    return [
        [
            str(t.status_version),
            format_time(t.at),
            t.from_status.value,
            t.to_status.value,
            t.trigger,
            t.actor,
            t.reason or "-",
        ]
        for t in transitions
    ]


HISTORY_HEADER = ("VERSION", "AT", "FROM", "TO", "TRIGGER", "ACTOR", "REASON")
