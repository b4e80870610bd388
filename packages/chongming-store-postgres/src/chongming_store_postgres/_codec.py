"""Records <-> query parameters and rows, and the checks that run before anything is written.

PostgreSQL cannot store the NUL character (U+0000) in ``text`` nor inside a
``jsonb`` string, and JSON cannot carry NaN or infinities. Both are refused here
with a `StoreError` that names the task and the field, before a statement is sent;
so is an outcome or a progress that not every store could keep (`portable_json`)
or an outcome too large for one PostgreSQL value.


Rows are read one at a time: the typed columns hold what their types allow, but
text (a status), JSON (failure, attempts, progress) and arrays (tags) hold whatever
was written, so those are checked, and a row that cannot be decoded becomes an
`UnreadableRow` naming the task and what is wrong, never an exception that would end
a whole listing.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, LiteralString

import psycopg
from psycopg.abc import Buffer
from psycopg.types.datetime import TimestamptzLoader

from chongming_core import (
    Command,
    Progress,
    StoreError,
    TaskSnapshot,
    TaskStatus,
    Transition,
)
from chongming_core.backend import (
    Undecodable,
    UnreadableRow,
    arguments_problem,
    decode_row,
    progress_problem,
    read_attempts,
    read_choice,
    read_command_row,
    read_failure,
    read_list,
    read_progress,
    read_text_set,
    shown,
)
from chongming_store_postgres._arrays import IntArray, TextArray, TimeArray
from chongming_store_postgres._fetching import Unloadable

__all__ = [
    "TASK_COLUMNS",
    "TIME_FIELDS",
    "command_cursor",
    "command_from_row",
    "command_params",
    "dumps",
    "outcome_size_problem",
    "snapshot_from_row",
    "snapshot_params",
    "touch_arrays",
    "transition_arrays",
    "transition_from_row",
]

#: The stored columns of a task row, in the order `snapshot_from_row` reads them.
TASK_COLUMNS: tuple[str, ...] = (
    "task_id",
    "name",
    "status",
    "status_version",
    "attempt",
    "max_attempts",
    "label",
    "description",
    "tags",
    "priority",
    "bucket",
    "bucket_key",
    "pipeline_id",
    "node_id",
    "progress",
    "last_heartbeat_at",
    "failure",
    "outcome",
    "created_at",
    "updated_at",
    "started_at",
    "finished_at",
    "retry_at",
    "lease_owner",
    "lease_until",
    "executor",
    "pid",
    "paused_in_place",
    "attempts",
    "paused_seconds",
    "durable",
    "arguments",
    "run_at",
)

_NUL = "\x00"

#: The most bytes of JSON an outcome may have: PostgreSQL keeps at most 1 GiB in one value
#: and accepts at most that in one message, which carries the rest of the row as well.
OUTCOME_LIMIT = (1 << 30) - (1 << 20)


def nul_error(what: str, *, task_id: str | None = None) -> StoreError:
    """The error for a value holding U+0000 (`what` names the value, e.g. "task 'a' label")."""
    return StoreError(
        f"{what} contains a NUL byte (\\x00), which PostgreSQL cannot store; "
        "remove it or replace it (for example with U+FFFD) before saving",
        task_id=task_id,
    )


def check_text(value: str | None, what: str, *, task_id: str | None = None) -> None:
    """Raise `StoreError` when `value` holds a NUL character."""
    if value is not None and _NUL in value:
        raise nul_error(what, task_id=task_id)


def _holds_nul(value: Any) -> bool:
    if isinstance(value, str):
        return _NUL in value
    if isinstance(value, Mapping):
        return any(_holds_nul(k) or _holds_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_holds_nul(v) for v in value)
    return False


def dumps(
    value: Any, what: str, *, task_id: str | None = None, allow_nul: bool = False
) -> str | None:
    """`value` as compact JSON text for a ``json``/``jsonb`` column (None stays SQL NULL).

    Args:
        value: a JSON value.
        what: names the value in messages.
        task_id: the task it belongs to.
        allow_nul: True for ``json`` columns, which keep ``\\u0000`` as text.

    Raises:
        StoreError: the value is not JSON (an object, NaN, an infinity), or it holds a
            NUL and `allow_nul` is False (``jsonb`` cannot store one).
    """
    if value is None:
        return None
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise StoreError(
            f"{what} cannot be stored as JSON ({exc}); store only JSON values "
            "(dict, list, str, int, finite float, bool, None)",
            task_id=task_id,
        ) from exc
    # json.dumps escapes U+0000 as \u0000; confirm on the value (the text may be a literal).
    if not allow_nul and "\\u0000" in text and _holds_nul(value):
        raise nul_error(what, task_id=task_id)
    return text


def outcome_size_problem(text: str) -> str | None:
    """Why the JSON `text` of an outcome is too large for PostgreSQL, or None."""
    if len(text) * 4 <= OUTCOME_LIMIT:  # UTF-8 takes at most 4 bytes a character
        return None
    size = len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))
    if size <= OUTCOME_LIMIT:
        return None
    return (
        f"the result is {size:,} bytes of JSON, more than the {OUTCOME_LIMIT:,} bytes "
        "PostgreSQL keeps in one value; return a pointer to the data instead (a file path, "
        "an object key)"
    )


def _outcome_json(value: Any, task_id: str, stored_outcome: Callable[[Any], object]) -> str | None:
    """The ``outcome`` column: refused as the store's `stored_outcome` refuses it."""
    if value is None:
        return None
    what = f"task {task_id!r} outcome"
    try:
        stored_outcome(value)
    except ValueError as exc:
        raise StoreError(f"{what} cannot be stored as JSON: {exc}", task_id=task_id) from (
            exc.__cause__ or exc
        )
    return dumps(value, what, task_id=task_id, allow_nul=True)


def _time(value: datetime | None, what: str, *, task_id: str | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        raise StoreError(
            f"{what} is a naive datetime ({value.isoformat()}); chongming stores "
            "timezone-aware times only, attach a tzinfo (e.g. datetime.now(UTC))",
            task_id=task_id,
        )
    return value


def _fold(value: str | None) -> str:
    return "" if value is None else value.casefold()


#: The text fields of a snapshot a row stores (checked for NUL, which PostgreSQL refuses).
_TEXT_FIELDS = (
    "name",
    "label",
    "description",
    "bucket_key",
    "pipeline_id",
    "node_id",
    "lease_owner",
    "executor",
)
#: The time fields of a snapshot a row stores (checked for a timezone).
TIME_FIELDS: tuple[LiteralString, ...] = (
    "last_heartbeat_at",
    "created_at",
    "updated_at",
    "started_at",
    "finished_at",
    "retry_at",
    "lease_until",
    "run_at",
)


def snapshot_params(s: TaskSnapshot, stored_outcome: Callable[[Any], object]) -> dict[str, Any]:
    """The named parameters of an insert or update of `s` (checked for NUL and JSON; the
    outcome with the store's `stored_outcome`)."""
    tid = s.task_id
    what = f"task {tid!r}"
    tags = TextArray(sorted(s.tags))
    texts = [tid, *tags, *(getattr(s, name) or "" for name in _TEXT_FIELDS)]
    if _NUL in "".join(texts):  # one look for the usual case; the one at fault is named
        check_text(tid, "task id", task_id=tid)
        for field_name in _TEXT_FIELDS:
            check_text(getattr(s, field_name), f"{what} {field_name}", task_id=tid)
        for tag in tags:
            check_text(tag, f"{what} tag {tag!r}", task_id=tid)
    times = {name: getattr(s, name) for name in TIME_FIELDS}
    if any(moment is not None and moment.tzinfo is None for moment in times.values()):
        for name, moment in times.items():
            _time(moment, f"{what} {name}", task_id=tid)
    return {
        "task_id": tid,
        "name": s.name,
        "status": s.status.value,
        "status_version": s.status_version,
        "attempt": s.attempt,
        "max_attempts": s.max_attempts,
        "label": s.label,
        "description": s.description,
        "tags": tags,
        "priority": s.priority,
        "bucket": s.bucket,
        "bucket_key": s.bucket_key,
        "pipeline_id": s.pipeline_id,
        "node_id": s.node_id,
        "progress": progress_json(s.progress, tid),
        "failure": dumps(
            None if s.failure is None else s.failure.to_dict(), f"{what} failure", task_id=tid
        ),
        "outcome": _outcome_json(s.outcome, tid, stored_outcome),
        "lease_owner": s.lease_owner,
        "executor": s.executor,
        "pid": s.pid,
        "paused_in_place": s.paused_in_place,
        "attempts": dumps([a.to_dict() for a in s.attempts], f"{what} attempts", task_id=tid),
        "paused_seconds": float(s.paused_seconds),
        "durable": bool(s.durable),
        "arguments": _arguments_json(s.arguments, tid),
        "id_fold": _fold(tid),
        "name_fold": _fold(s.name),
        "label_fold": _fold(s.label),
        **times,
    }


def _arguments_json(arguments: object, task_id: str) -> str | None:
    """The ``arguments`` column: refused as every store refuses it (`arguments_problem`)."""
    if arguments is None:
        return None
    problem = arguments_problem(arguments)
    if problem is not None:
        raise StoreError(f"cannot store task {task_id!r}: {problem}", task_id=task_id)
    return dumps(arguments, f"task {task_id!r} arguments", task_id=task_id, allow_nul=True)


def progress_json(progress: Progress | None, task_id: str) -> str | None:
    """The ``progress`` column value of a task."""
    if progress is None:
        return None
    problem = progress_problem(progress)
    if problem is not None:
        raise StoreError(f"cannot store task {task_id!r}: {problem}", task_id=task_id)
    what = f"task {task_id!r} progress"
    return dumps(progress.to_dict(), what, task_id=task_id, allow_nul=True)


def snapshot_from_row(row: Sequence[Any]) -> TaskSnapshot | UnreadableRow:
    """The snapshot of a row selected with `TASK_COLUMNS`, or the `UnreadableRow` saying
    why the row cannot be read."""
    return decode_row(row[0], lambda: _snapshot(row))


def _moment(value: object, what: str) -> datetime | None:
    """A ``timestamptz`` value, checked: `fetch_all` keeps one Python cannot hold as text."""
    if value is None or isinstance(value, datetime):
        return value
    raise ValueError(f"{what} {shown(value)} is not a time Python can hold (years 1 to 9999)")


def _snapshot(row: Sequence[Any]) -> TaskSnapshot:
    (
        task_id,
        name,
        status,
        status_version,
        attempt,
        max_attempts,
        label,
        description,
        tags,
        priority,
        bucket,
        bucket_key,
        pipeline_id,
        node_id,
        progress,
        last_heartbeat_at,
        failure,
        outcome,
        created_at,
        updated_at,
        started_at,
        finished_at,
        retry_at,
        lease_owner,
        lease_until,
        executor,
        pid,
        paused_in_place,
        attempts,
        paused_seconds,
        durable,
        arguments,
        run_at,
    ) = row
    return TaskSnapshot(
        task_id=task_id,
        name=name,
        status=read_choice(status, TaskStatus, "status", "a status"),
        status_version=status_version,
        attempt=attempt,
        max_attempts=max_attempts,
        label=label,
        description=description,
        tags=read_text_set(tags, "tags"),
        priority=priority,
        bucket=bucket,
        bucket_key=bucket_key,
        pipeline_id=pipeline_id,
        node_id=node_id,
        progress=None if progress is None else read_progress(progress),
        last_heartbeat_at=_moment(last_heartbeat_at, "last_heartbeat_at"),
        failure=None if failure is None else read_failure(failure, "failure"),
        outcome=_outcome(outcome),
        created_at=_moment(created_at, "created_at"),
        updated_at=_moment(updated_at, "updated_at"),
        started_at=_moment(started_at, "started_at"),
        finished_at=_moment(finished_at, "finished_at"),
        retry_at=_moment(retry_at, "retry_at"),
        lease_owner=lease_owner,
        lease_until=_moment(lease_until, "lease_until"),
        executor=executor,
        pid=pid,
        paused_in_place=paused_in_place,
        attempts=read_attempts(read_list(attempts, "attempts"), "attempts"),
        paused_seconds=float(paused_seconds),
        durable=durable,
        arguments=_arguments(arguments),
        run_at=_moment(run_at, "run_at"),
    )


def _arguments(value: object) -> Any:
    if value is None or isinstance(value, dict):
        return value
    if isinstance(value, Unloadable):
        raise ValueError(f"arguments {shown(value)} is JSON nested too deeply to read")
    raise ValueError(f"arguments must be a JSON object or null, got {shown(value)}")


def transition_arrays(transitions: Iterable[Transition]) -> dict[str, list[Any]]:
    """Column arrays of `transitions` for an ``unnest`` insert (checked for NUL).

    Rows are sorted by ``(task_id, status_version)`` (stably, so the first of two equal
    keys still wins): concurrent appends of overlapping rows then take their locks in
    the same order and cannot deadlock.
    """
    arrays: dict[str, list[Any]] = {
        "t_task_id": TextArray(),
        "t_version": IntArray(),
        "t_from": TextArray(),
        "t_to": TextArray(),
        "t_trigger": TextArray(),
        "t_actor": TextArray(),
        "t_reason": TextArray(),
        "t_at": TimeArray(),
    }
    ordered = sorted(transitions, key=lambda t: (t.task_id, t.status_version))
    for t in ordered:
        if _NUL in f"{t.task_id}{t.trigger}{t.actor}{t.reason or ''}":  # named when there
            what = f"transition {t.status_version} of task {t.task_id!r}"
            check_text(t.task_id, "task id", task_id=t.task_id)
            check_text(t.trigger, f"{what}: trigger", task_id=t.task_id)
            check_text(t.actor, f"{what}: actor", task_id=t.task_id)
            check_text(t.reason, f"{what}: reason", task_id=t.task_id)
        if t.at.tzinfo is None:
            _time(
                t.at, f"transition {t.status_version} of task {t.task_id!r}: at", task_id=t.task_id
            )
        arrays["t_task_id"].append(t.task_id)
        arrays["t_version"].append(t.status_version)
        arrays["t_from"].append(t.from_status.value)
        arrays["t_to"].append(t.to_status.value)
        arrays["t_trigger"].append(t.trigger)
        arrays["t_actor"].append(t.actor)
        arrays["t_reason"].append(t.reason)
        arrays["t_at"].append(t.at)
    return arrays


def transition_from_row(row: Sequence[Any]) -> Transition | UnreadableRow:
    """A transition from ``(task_id, from, to, trigger, actor, reason, version, at)``, or
    the `UnreadableRow` saying why the row cannot be read."""
    return decode_row(row[0], lambda: _transition(row), part=f"history entry {row[6]}")


def _outcome(value: object) -> object:
    if isinstance(value, Unloadable):
        raise ValueError(f"outcome {shown(value)} is JSON nested too deeply to read")
    return value


def _transition(row: Sequence[Any]) -> Transition:
    task_id, from_status, to_status, trigger, actor, reason, version, at = row
    return Transition(
        task_id=task_id,
        from_status=read_choice(from_status, TaskStatus, "from_status", "a status"),
        to_status=read_choice(to_status, TaskStatus, "to_status", "a status"),
        trigger=trigger,
        actor=actor,
        reason=reason,
        status_version=version,
        at=_required_moment(at, "at"),
    )


def _required_moment(value: object, what: str) -> datetime:
    moment = _moment(value, what)
    if moment is None:
        raise ValueError(f"{what} is missing")
    return moment


def command_params(c: Command) -> dict[str, Any]:
    """The named parameters of a command insert (checked for NUL)."""
    what = f"command {c.command_id!r}"
    check_text(c.command_id, "command id", task_id=c.task_id)
    for field_name in ("task_id", "action", "issued_by", "reason", "claimed_by", "result"):
        check_text(getattr(c, field_name), f"{what} {field_name}", task_id=c.task_id)
    return {
        "command_id": c.command_id,
        "task_id": c.task_id,
        "action": c.action,
        "issued_by": c.issued_by,
        "issued_at": _time(c.issued_at, f"{what} issued_at", task_id=c.task_id),
        "reason": c.reason,
        "bucket": c.bucket,
        "claimed_by": c.claimed_by,
        "lease_until": _time(c.lease_until, f"{what} lease_until", task_id=c.task_id),
        "completed_at": _time(c.completed_at, f"{what} completed_at", task_id=c.task_id),
        "result": c.result,
    }


def command_from_row(row: Sequence[Any]) -> Command:
    """The command of a row selected with `COMMAND_COLUMNS` through `command_cursor`,
    whatever it holds (see `read_command_row`)."""
    return read_command_row(row)


class _LenientTimestamptz(TimestamptzLoader):
    """Loads a ``timestamptz`` no `datetime` can hold (``infinity``, a year past 9999) as
    `Undecodable` instead of failing the whole query."""

    def load(self, data: Buffer) -> datetime | Undecodable:  # type: ignore[override]
        try:
            return super().load(data)
        except psycopg.DataError:
            return Undecodable("a time", repr(bytes(data).decode("utf-8", "replace")))


def command_cursor(conn: psycopg.Connection[Any]) -> psycopg.Cursor[Any]:
    """A cursor of `conn` that reads command rows one by one (D64): anyone can write a
    time into the table that psycopg cannot load, and one such row must not fail the
    claim, or the listing, of all the others."""
    cursor = conn.cursor()
    cursor.adapters.register_loader("timestamptz", _LenientTimestamptz)
    return cursor


def touch_arrays(
    merged: dict[str, dict[str, Any]], held: dict[str, int] | None = None
) -> dict[str, list[Any]]:
    """Column arrays for the `TOUCH` statement (``set_*`` flags say which fields change;
    `held` gives the version a task's update is fenced to)."""
    arrays: dict[str, list[Any]] = {
        key: []
        for key in (
            "task_id",
            "set_progress",
            "progress",
            "set_heartbeat",
            "heartbeat_at",
            "set_lease_owner",
            "lease_owner",
            "set_lease_until",
            "lease_until",
            "set_pid",
            "pid",
            "held_version",
        )
    }
    for task_id in sorted(merged):  # a fixed order: concurrent touches lock rows alike
        fields = merged[task_id]
        progress = fields.get("progress")
        owner = fields.get("lease_owner")
        check_text(owner, f"task {task_id!r} lease_owner", task_id=task_id)
        for when in ("heartbeat_at", "lease_until"):
            moment = fields.get(when)
            if moment is not None and moment.tzinfo is None:
                raise StoreError(
                    f"task {task_id!r} {when} is a naive datetime; chongming stores "
                    "timezone-aware times only",
                    task_id=task_id,
                )
        arrays["task_id"].append(task_id)
        arrays["set_progress"].append("progress" in fields)
        arrays["progress"].append(
            progress_json(progress, task_id) if isinstance(progress, Progress) else None
        )
        arrays["set_heartbeat"].append("heartbeat_at" in fields)
        arrays["heartbeat_at"].append(fields.get("heartbeat_at"))
        arrays["set_lease_owner"].append("lease_owner" in fields)
        arrays["lease_owner"].append(owner)
        arrays["set_lease_until"].append("lease_until" in fields)
        arrays["lease_until"].append(fields.get("lease_until"))
        arrays["set_pid"].append("pid" in fields)
        arrays["pid"].append(fields.get("pid"))
        arrays["held_version"].append(None if held is None else held.get(task_id))
    return arrays
