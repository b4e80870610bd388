"""Records to rows and back: the one place that decides how a value is laid out in SQLite.

Times are kept twice where they are compared: once as the ISO-8601 text the core
records produce (`format_time`, offset included, so an instant comes back with
the offset it was written with, to the microsecond), and once as an integer
count of microseconds since the Unix epoch in UTC, which sorts and compares
correctly whatever offset the writer used. Integer arithmetic on `timedelta`
is exact, so no float rounding can move an instant.

Snapshot fields that queries filter on get real columns; the rest of the
snapshot is a JSON document (`TaskSnapshot.to_dict`). The side-path fields
(progress, heartbeat, lease, pid) live only in their own columns, because
`touch` rewrites them without touching the document.

Reading is the other way round, one row at a time: a row that cannot be decoded
becomes an `UnreadableRow` naming the task and what is wrong, never an exception
that would end a whole listing. The status, the version and the lease's end are
kept twice (the columns that queries, counts, compare-and-set and `reconcile` read,
and the record), so a row whose two disagree is unreadable too: which of them is
right is not known.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from chongming_core import (
    Command,
    ConfigurationError,
    StoreError,
    TaskSnapshot,
    Transition,
)
from chongming_core.backend import (
    COMMAND_COLUMNS,
    Undecodable,
    UnreadableRow,
    arguments_problem,
    decode_row,
    format_time,
    progress_problem,
    read_command_row,
    shown,
)
from chongming_store_sqlite._search import search_key

__all__ = [
    "COMMAND_SELECT",
    "SNAPSHOT_COLUMNS",
    "TRANSITION_COLUMNS",
    "EncodedWrite",
    "command_from_row",
    "command_row",
    "dumps",
    "encode_snapshot",
    "iso",
    "lenient_text",
    "micros",
    "outcome_problem",
    "snapshot_from_row",
    "transition_from_row",
    "transition_rows",
]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MICROSECOND = timedelta(microseconds=1)

#: The columns `snapshot_from_row` reads, in order.
SNAPSHOT_COLUMNS = (
    "task_id, status, status_version, data, progress, heartbeat_at, lease_owner, lease_until, "
    "pid, lease_until_us, durable, priority, run_at_us"
)
#: The columns `transition_from_row` reads, in order.
TRANSITION_COLUMNS = "task_id, status_version, from_status, to_status, trigger, actor, reason, at"
#: The columns `command_from_row` reads, in order (the core's `COMMAND_COLUMNS`).
COMMAND_SELECT = ", ".join(COMMAND_COLUMNS)


def micros(value: datetime, what: str) -> int:
    """Microseconds since the Unix epoch (UTC) of a timezone-aware `value`; exact."""
    if not isinstance(value, datetime) or value.utcoffset() is None:
        raise ConfigurationError(
            f"{what} must be a timezone-aware datetime, got {value!r}; "
            "use datetime.now(UTC) or attach a tzinfo"
        )
    return (value - _EPOCH) // _ONE_MICROSECOND


def iso(value: datetime | None, what: str) -> str | None:
    """ISO-8601 text of a timezone-aware `value` (None stays None)."""
    if value is None:
        return None
    if not isinstance(value, datetime) or value.utcoffset() is None:
        micros(value, what)  # raises the explanation
    text = format_time(value)  # each time formatted once (see `format_time`)
    assert text is not None
    return text


def _optional_micros(value: datetime | None, what: str) -> int | None:
    return None if value is None else micros(value, what)


# ensure_ascii (the default) escapes NUL, control characters and lone surrogates, so
# a document is plain ASCII text that SQLite stores and returns verbatim. One encoder
# for every call: json.dumps() with options builds a new encoder each time. NaN and the
# infinities are refused: no other store keeps them, and they are not JSON.
dumps = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode

#: Bytes of a task's row left for everything but its outcome (description, failure,
#: attempts...): the outcome may use the rest of SQLite's length limit.
ROW_ROOM = 1 << 20


def outcome_problem(value: object, max_length: int) -> str | None:
    """Why a row could not hold the outcome `value` (a value every store can keep) under
    SQLite's length limit `max_length` (``SQLITE_LIMIT_LENGTH``), or None."""
    if not isinstance(value, str | dict | list | tuple):
        return None  # a number, a bool: a few bytes
    size = len(dumps(value))  # ASCII: characters are bytes
    room = max(max_length - ROW_ROOM, 0)
    if size <= room:
        return None
    return (
        f"the result is {size:,} bytes of JSON, more than the {room:,} bytes this SQLite "
        "store keeps for an outcome (SQLITE_LIMIT_LENGTH); return a pointer to the data "
        "instead (a file path, an object key)"
    )


@dataclass(frozen=True, slots=True)
class EncodedWrite:
    """One snapshot write, serialised before the transaction starts.

    ``values`` holds every column of the tasks table except ``task_id`` and
    ``seq``, in the order of `schema.TASK_VALUE_COLUMNS`.
    """

    task_id: str
    expect_version: int | None
    new_version: int
    tags: frozenset[str]
    tags_key: str
    values: tuple[object, ...]
    transitions: tuple[tuple[object, ...], ...]


def _end_key(snapshot: TaskSnapshot) -> int | None:
    """The age `prune` sorts terminal tasks by (None for a live task)."""
    if not snapshot.status.is_terminal:
        return None
    moment = snapshot.finished_at or snapshot.updated_at or snapshot.created_at
    return 0 if moment is None else micros(moment, "finished_at")


def encode_snapshot(
    snapshot: TaskSnapshot,
    expect_version: int | None,
    transitions: Sequence[Transition],
    stored_outcome: Callable[[object], object],
) -> EncodedWrite:
    """Serialise one create or save; raises `StoreError` when a value cannot be stored.

    `stored_outcome` is the store's `TaskStore.stored_outcome`: an outcome it refuses is
    refused here, so a write never accepts what the runtime's check would not."""
    task_id = snapshot.task_id
    _check_values(snapshot, stored_outcome)
    try:
        document = snapshot.to_dict()  # formats (and checks) every time once
        progress = document.pop("progress")
        heartbeat_at = document.pop("last_heartbeat_at")
        lease_until = document.pop("lease_until")
        del document["lease_owner"], document["pid"]
        tags_key = dumps(document["tags"]) if snapshot.tags else "[]"
        values: tuple[object, ...] = (
            snapshot.name,
            snapshot.status.value,
            snapshot.status_version,
            snapshot.label,
            snapshot.bucket,
            snapshot.pipeline_id,
            tags_key,
            _optional_micros(snapshot.finished_at, "finished_at"),
            _end_key(snapshot),
            snapshot.lease_owner,
            lease_until,
            _optional_micros(snapshot.lease_until, "lease_until"),
            None if progress is None else dumps(progress),
            heartbeat_at,
            snapshot.pid,
            dumps(document),
            search_key(task_id, snapshot.name, snapshot.label),
            int(snapshot.durable),
            snapshot.priority,
            _optional_micros(snapshot.run_at, "run_at"),
        )
        rows = transition_rows(transitions)
    except (TypeError, ValueError, ConfigurationError) as exc:
        raise StoreError(
            f"cannot store task {task_id!r}: {exc}; a snapshot must hold JSON values "
            "(dict, list, str, int, float, bool, None) in outcome and timezone-aware datetimes",
            task_id=task_id,
        ) from exc
    return EncodedWrite(
        task_id=task_id,
        expect_version=expect_version,
        new_version=snapshot.status_version,
        tags=snapshot.tags,
        tags_key=tags_key,
        values=values,
        transitions=rows,
    )


def _check_values(snapshot: TaskSnapshot, stored_outcome: Callable[[object], object]) -> None:
    """Refuse an outcome or progress that not every store could keep (a NaN, an int too
    long to read back, a dict key that is not a string...), as the other stores do."""
    problem = None if snapshot.progress is None else progress_problem(snapshot.progress)
    if problem is None and snapshot.arguments is not None:
        problem = arguments_problem(snapshot.arguments)
    cause: BaseException | None = None
    if problem is None and snapshot.outcome is not None:
        try:
            stored_outcome(snapshot.outcome)
        except ValueError as exc:
            problem, cause = str(exc), exc.__cause__ or exc
    if problem is not None:
        raise StoreError(
            f"cannot store task {snapshot.task_id!r}: {problem}", task_id=snapshot.task_id
        ) from cause


def snapshot_from_row(row: Sequence[Any]) -> TaskSnapshot | UnreadableRow:
    """The inverse of `encode_snapshot` for a row of `SNAPSHOT_COLUMNS`, or the
    `UnreadableRow` saying why the row cannot be read."""
    return decode_row(row[0], lambda: _snapshot(row))


def _snapshot(row: Sequence[Any]) -> TaskSnapshot:
    (task_id, status, version, data, progress, heartbeat_at, lease_owner, lease_until, pid) = row[
        :9
    ]
    document = _json(data, "its document")
    if not isinstance(document, dict):
        raise ValueError(f"its document must be a JSON object, got {shown(document)}")
    document["progress"] = None if progress is None else _json(progress, "progress")
    document["last_heartbeat_at"] = heartbeat_at
    document["lease_owner"] = lease_owner
    document["lease_until"] = lease_until
    document["pid"] = pid
    snapshot = TaskSnapshot.from_dict(document)
    if snapshot.task_id != task_id:
        raise ValueError(f"its document names task {shown(snapshot.task_id)}")
    if status != snapshot.status.value:
        raise ValueError(
            f"its status column holds {shown(status)} but its document {snapshot.status.value!r}"
        )
    if type(version) is not int or version != snapshot.status_version:
        raise ValueError(
            f"its status_version column holds {shown(version)} but its document "
            f"{snapshot.status_version}"
        )
    until_us = row[9]
    lease = snapshot.lease_until
    if until_us != (None if lease is None else micros(lease, "lease_until")):
        raise ValueError(
            f"its lease_until_us column holds {shown(until_us)} but its lease_until "
            f"{shown(lease_until)}"
        )
    durable, priority, run_at_us = row[10:13]
    run_at = snapshot.run_at
    if (
        durable != int(snapshot.durable)
        or priority != snapshot.priority
        or run_at_us != (None if run_at is None else micros(run_at, "run_at"))
    ):
        raise ValueError(
            f"its durable, priority and run_at_us columns hold {shown(durable)}, "
            f"{shown(priority)} and {shown(run_at_us)} but its document {snapshot.durable}, "
            f"{snapshot.priority} and {shown(document.get('run_at'))}"
        )
    return snapshot


def _json(text: object, what: str) -> Any:
    if not isinstance(text, str):
        raise ValueError(f"{what} must be JSON text, got {shown(text)}")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{what} is not JSON ({exc})") from None
    except RecursionError:
        raise ValueError(f"{what} is JSON nested too deeply to read") from None


def transition_rows(transitions: Sequence[Transition]) -> tuple[tuple[object, ...], ...]:
    """Rows of the transitions table (`TRANSITION_COLUMNS` order)."""
    return tuple(
        (
            t.task_id,
            t.status_version,
            t.from_status.value,
            t.to_status.value,
            t.trigger,
            t.actor,
            t.reason,
            iso(t.at, "the time of a transition"),
        )
        for t in transitions
    )


def transition_from_row(row: Sequence[Any]) -> Transition | UnreadableRow:
    """The inverse of `transition_rows` for one row, or the `UnreadableRow` saying why
    the row cannot be read."""
    task_id, version = row[0], row[1]
    entry = f"history entry {version if type(version) is int else shown(version)}"
    return decode_row(task_id, lambda: _transition(row), part=entry)


def _transition(row: Sequence[Any]) -> Transition:
    task_id, version, from_status, to_status, trigger, actor, reason, at = row
    return Transition.from_dict(
        {
            "task_id": task_id,
            "status_version": version,
            "from_status": from_status,
            "to_status": to_status,
            "trigger": trigger,
            "actor": actor,
            "reason": reason,
            "at": at,
        }
    )


def command_row(command: Command) -> tuple[object, ...]:
    """The row of a new command: `COMMAND_SELECT` plus ``lease_until_us`` at the end."""
    return (
        command.command_id,
        command.task_id,
        command.action,
        command.issued_by,
        iso(command.issued_at, "issued_at"),
        command.reason,
        command.bucket,
        command.claimed_by,
        iso(command.lease_until, "lease_until"),
        iso(command.completed_at, "completed_at"),
        command.result,
        _optional_micros(command.lease_until, "lease_until"),
    )


def command_from_row(row: Sequence[Any], **leased: Any) -> Command:
    """A `Command` from a row of `COMMAND_SELECT` read under `lenient_text`, whatever
    its columns hold (see `read_command_row`); `leased` replaces columns a claim just wrote."""
    return read_command_row(row, **leased)


def _lenient(data: bytes) -> str | Undecodable:
    """A TEXT value as `str`, or `Undecodable` when its bytes are not UTF-8 (SQLite keeps
    whatever bytes it was given, and the driver would fail the whole query on them)."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return Undecodable("text", repr(data))


@contextlib.contextmanager
def lenient_text(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """Read text of `conn` with `_lenient` inside the block (command rows: anyone writes
    them, and one that is not UTF-8 must not fail the reading of the others)."""
    conn.text_factory = _lenient
    try:
        yield conn
    finally:
        conn.text_factory = str
