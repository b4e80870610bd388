"""Immutable records: `Progress`, `Transition`, `AttemptRecord` and `TaskSnapshot` (guide §1.2).

Attempt, progress, heartbeat, lease and failure are fields of the snapshot,
never statuses. Every record converts to and from a JSON-ready dict so that all
stores serialise the same way.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from chongming_core._decoding import Fields
from chongming_core._failure import Failure, read_failure
from chongming_core._status import TaskStatus

__all__ = [
    "AttemptRecord",
    "Progress",
    "SnapshotWrite",
    "TaskSnapshot",
    "Transition",
    "format_time",
    "parse_time",
]


def format_time(value: datetime | None) -> str | None:
    """ISO-8601 text of a timezone-aware datetime (None stays None)."""
    if value is None:
        return None
    # a task's times are the same objects from one write of it to the next (created_at,
    # started_at, its attempts): each is formatted once. By identity, never by equality:
    # two equal instants in different zones are different texts
    cached = _FORMATTED.get(id(value))
    if cached is not None and cached[0] is value:
        return cached[1]
    if value.tzinfo is None:
        raise ValueError(f"naive datetime {value!r}: chongming stores timezone-aware times only")
    text = value.isoformat()
    if len(_FORMATTED) >= _FORMATTED_KEPT:
        _FORMATTED.clear()
    _FORMATTED[id(value)] = (value, text)  # holds `value`: its id is not reused meanwhile
    return text


#: The texts `format_time` made lately, by the identity of their datetime (bounded: the
#: whole cache is dropped when full, which costs one formatting per time again).
_FORMATTED: dict[int, tuple[datetime, str]] = {}
_FORMATTED_KEPT = 8192


def parse_time(value: str | None) -> datetime | None:
    """The inverse of `format_time`."""
    if value is None:
        return None
    return datetime.fromisoformat(value)


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a task has got: ``done`` of ``total`` ``unit``, plus a free-text message."""

    done: float
    total: float | None = None
    unit: str | None = None
    message: str | None = None

    @property
    def fraction(self) -> float | None:
        """``done / total`` clamped to [0, 1], or None without a positive total."""
        if self.total is None or self.total <= 0:
            return None
        return max(0.0, min(1.0, self.done / self.total))

    def render(self) -> str:
        """Short text such as ``120/500 rows`` or ``7 batch``."""
        done = _number(self.done)
        text = done if self.total is None else f"{done}/{_number(self.total)}"
        return f"{text} {self.unit}" if self.unit else text

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        return {"done": self.done, "total": self.total, "unit": self.unit, "message": self.message}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Progress:
        """The inverse of `to_dict`.

        Raises:
            ValueError: `data` is not a progress record (the message names the field).
        """
        return _read_progress(data, "progress")


def _read_progress(data: object, what: str) -> Progress:
    fields = Fields(data, what)
    return Progress(
        done=fields.number("done"),
        total=fields.optional_number("total"),
        unit=fields.optional_text("unit"),
        message=fields.optional_text("message"),
    )


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


@dataclass(frozen=True, slots=True)
class Transition:
    """One entry of a task's append-only trajectory.

    ``status_version`` is the snapshot's version *after* this change; a task's
    history is the contiguous chain 1, 2, 3, ... starting from ``pending``.
    """

    task_id: str
    from_status: TaskStatus
    to_status: TaskStatus
    trigger: str
    actor: str
    reason: str | None
    status_version: int
    at: datetime

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        return {
            "task_id": self.task_id,
            "from_status": self.from_status.value,
            "to_status": self.to_status.value,
            "trigger": self.trigger,
            "actor": self.actor,
            "reason": self.reason,
            "status_version": self.status_version,
            "at": format_time(self.at),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Transition:
        """The inverse of `to_dict`.

        Raises:
            ValueError: `data` is not a transition (the message names the field).
        """
        fields = Fields(data, "")
        return cls(
            task_id=fields.text("task_id"),
            from_status=fields.choice("from_status", TaskStatus, "a status"),
            to_status=fields.choice("to_status", TaskStatus, "a status"),
            trigger=fields.text("trigger"),
            actor=fields.text("actor"),
            reason=fields.optional_text("reason"),
            status_version=fields.integer("status_version"),
            at=fields.required_time("at"),
        )


@dataclass(frozen=True, slots=True)
class AttemptRecord:
    """What became of one attempt: when it ran and why it ended (None = succeeded).

    ``paused_seconds`` is how long the attempt was suspended in place at a checkpoint
    (between ``started_at`` and ``ended_at``, it did not run then).
    """

    number: int
    started_at: datetime | None
    ended_at: datetime | None
    status: TaskStatus
    failure: Failure | None = None
    paused_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping."""
        return {
            "number": self.number,
            "started_at": format_time(self.started_at),
            "ended_at": format_time(self.ended_at),
            "status": self.status.value,
            "failure": None if self.failure is None else self.failure.to_dict(),
            "paused_seconds": self.paused_seconds,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AttemptRecord:
        """The inverse of `to_dict`.

        Raises:
            ValueError: `data` is not an attempt record (the message names the field).
        """
        return _read_attempt(data, "attempt")


def _read_attempt(data: object, what: str) -> AttemptRecord:
    fields = Fields(data, what)
    failure = fields.optional_object("failure")
    return AttemptRecord(
        number=fields.integer("number"),
        started_at=fields.time("started_at"),
        ended_at=fields.time("ended_at"),
        status=fields.choice("status", TaskStatus, "a status"),
        failure=None if failure is None else read_failure(failure, fields.path("failure")),
        paused_seconds=float(fields.optional_number("paused_seconds") or 0.0),
    )


_WAITING_TO_START = frozenset({TaskStatus.PENDING, TaskStatus.BLOCKED, TaskStatus.QUEUED})


@dataclass(frozen=True, slots=True)
class TaskSnapshot:
    """The state of one task at one `status_version`. Immutable; change it with `evolve`.

    Only `StateMachine` produces snapshots with a new status or version; the
    side-path fields (progress, heartbeat, lease, pid) are refreshed by `touch`
    without a new version. ``paused_seconds`` is how long the current attempt was
    suspended in place in pauses it has resumed from; a pause under way began at
    `paused_since`.

    A ``durable`` task may be claimed by any worker that serves its name and owns its
    bucket (`TaskStore.claim_tasks`); its ``arguments`` are the JSON object
    ``{"args": [...], "kwargs": {...}}`` (`durable_arguments`), and it is not claimable
    before ``run_at``.
    """

    task_id: str
    name: str
    status: TaskStatus = TaskStatus.PENDING
    status_version: int = 0
    attempt: int = 0
    max_attempts: int = 1
    label: str | None = None
    description: str | None = None
    tags: frozenset[str] = field(default_factory=frozenset)
    priority: int = 0
    bucket: int | None = None
    bucket_key: str | None = None
    pipeline_id: str | None = None
    node_id: str | None = None
    progress: Progress | None = None
    last_heartbeat_at: datetime | None = None
    failure: Failure | None = None
    outcome: Any = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    retry_at: datetime | None = None
    lease_owner: str | None = None
    lease_until: datetime | None = None
    executor: str | None = None
    pid: int | None = None
    paused_in_place: bool = False
    attempts: tuple[AttemptRecord, ...] = ()
    paused_seconds: float = 0.0
    durable: bool = False
    arguments: Mapping[str, Any] | None = None
    run_at: datetime | None = None

    @property
    def is_terminal(self) -> bool:
        """True once the task reached one of the six terminal statuses."""
        return self.status.is_terminal

    @property
    def display_name(self) -> str:
        """The label when there is one, else the registered name."""
        return self.label or self.name

    @property
    def paused_since(self) -> datetime | None:
        """When the pause under way began, for a task paused in place (None otherwise): the
        time of its ``paused`` transition."""
        if self.status is TaskStatus.PAUSED and self.paused_in_place:
            return self.updated_at
        return None

    def elapsed(self, now: datetime) -> float | None:
        """Seconds the current (or last) attempt has run; None when no attempt is under way.

        Running time: the time it spent paused in place is not counted (see `paused_for`).
        A task waiting to start (pending, blocked, queued, paused before start) has no
        running attempt, so it has no elapsed time, even after an earlier attempt; a task
        waiting to retry, or finished, shows how long its last attempt ran — not the time
        it then spent waiting before it ended (stopped while waiting to retry, say). An
        unfinished task whose lease expired counts up to its lease's end only: nobody
        vouches for it after that (its process may be gone), so it is not shown running on.
        """
        span = self._attempt_span(now)
        return None if span is None else max(0.0, span[0] - span[1])

    def paused_for(self, now: datetime) -> float | None:
        """Seconds the current (or last) attempt has spent paused in place, the pause under
        way included (up to its lease's end, as `elapsed`); None when `elapsed` is None."""
        span = self._attempt_span(now)
        return None if span is None else span[1]

    def _attempt_span(self, now: datetime) -> tuple[float, float] | None:
        """``(seconds from start to end, seconds paused in place)`` of the current or last
        attempt, as `elapsed` and `paused_for` define them."""
        if self.started_at is None:
            return None
        if self.status in _WAITING_TO_START or (
            self.status is TaskStatus.PAUSED and not self.paused_in_place
        ):
            return None
        waiting = self.status is TaskStatus.RETRY_WAIT
        if waiting or self.status.is_terminal:
            last = self.attempts[-1] if self.attempts else None
            if (
                last is not None
                and (waiting or last.number == self.attempt)  # finished: the current one
                and last.started_at is not None
                and last.ended_at is not None
            ):
                return (last.ended_at - last.started_at).total_seconds(), last.paused_seconds
            if waiting:
                return None
        end = self.finished_at or now
        lease = self.lease_until
        if self.finished_at is None and lease is not None and self.started_at <= lease < end:
            end = lease
        return (end - self.started_at).total_seconds(), paused_through(self, end)

    def evolve(self, **changes: Any) -> TaskSnapshot:
        """A copy with `changes` applied (what `dataclasses.replace` returns, made faster:
        every transition and every composed snapshot goes through here)."""
        if type(self) is not TaskSnapshot or not changes.keys() <= _SNAPSHOT_INDEX.keys():
            return dataclasses.replace(self, **changes)  # subclasses; unknown names raise
        values = list(_snapshot_values(self))
        for name, value in changes.items():
            values[_SNAPSHOT_INDEX[name]] = value
        new = _new_object(_Unfrozen)
        _fill(new, values)
        new.__class__ = TaskSnapshot  # type: ignore[assignment]
        return new  # type: ignore[return-value]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready mapping; `outcome` is stored as given (it must be JSON)."""
        return {
            "task_id": self.task_id,
            "name": self.name,
            "status": self.status.value,
            "status_version": self.status_version,
            "attempt": self.attempt,
            "max_attempts": self.max_attempts,
            "label": self.label,
            "description": self.description,
            "tags": sorted(self.tags),
            "priority": self.priority,
            "bucket": self.bucket,
            "bucket_key": self.bucket_key,
            "pipeline_id": self.pipeline_id,
            "node_id": self.node_id,
            "progress": None if self.progress is None else self.progress.to_dict(),
            "last_heartbeat_at": format_time(self.last_heartbeat_at),
            "failure": None if self.failure is None else self.failure.to_dict(),
            "outcome": self.outcome,
            "created_at": format_time(self.created_at),
            "updated_at": format_time(self.updated_at),
            "started_at": format_time(self.started_at),
            "finished_at": format_time(self.finished_at),
            "retry_at": format_time(self.retry_at),
            "lease_owner": self.lease_owner,
            "lease_until": format_time(self.lease_until),
            "executor": self.executor,
            "pid": self.pid,
            "paused_in_place": self.paused_in_place,
            "attempts": [a.to_dict() for a in self.attempts],
            "paused_seconds": self.paused_seconds,
            "durable": self.durable,
            "arguments": self.arguments,
            "run_at": format_time(self.run_at),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TaskSnapshot:
        """The inverse of `to_dict`.

        Every field is checked (a store's row is data anyone may have written): a key
        that is absent takes its default, a value of the wrong type is refused.

        Raises:
            ValueError: `data` is not a snapshot; the message names the field and the
                value, e.g. ``status 'zombie' is not a status``.
        """
        f = Fields(data, "")
        progress = f.optional_object("progress")
        failure = f.optional_object("failure")
        return cls(
            task_id=f.text("task_id"),
            name=f.text("name"),
            status=f.choice("status", TaskStatus, "a status"),
            status_version=f.integer("status_version"),
            attempt=f.integer("attempt", 0),
            max_attempts=f.integer("max_attempts", 1),
            label=f.optional_text("label"),
            description=f.optional_text("description"),
            tags=f.text_set("tags"),
            priority=f.integer("priority", 0),
            bucket=f.optional_integer("bucket"),
            bucket_key=f.optional_text("bucket_key"),
            pipeline_id=f.optional_text("pipeline_id"),
            node_id=f.optional_text("node_id"),
            progress=None if progress is None else _read_progress(progress, "progress"),
            last_heartbeat_at=f.time("last_heartbeat_at"),
            failure=None if failure is None else read_failure(failure, "failure"),
            outcome=f.raw("outcome"),
            created_at=f.time("created_at"),
            updated_at=f.time("updated_at"),
            started_at=f.time("started_at"),
            finished_at=f.time("finished_at"),
            retry_at=f.time("retry_at"),
            lease_owner=f.optional_text("lease_owner"),
            lease_until=f.time("lease_until"),
            executor=f.optional_text("executor"),
            pid=f.optional_integer("pid"),
            paused_in_place=f.boolean("paused_in_place", False),
            attempts=read_attempts(f.items("attempts"), "attempts"),
            paused_seconds=float(f.optional_number("paused_seconds") or 0.0),
            durable=f.boolean("durable", False),
            arguments=f.optional_object("arguments"),
            run_at=f.time("run_at"),
        )


def read_attempts(items: Iterable[object], what: str) -> tuple[AttemptRecord, ...]:
    """The attempt records of a stored list (each checked; see `AttemptRecord.from_dict`).

    Raises:
        ValueError: an item is not an attempt record (named ``attempts[i]....``).
    """
    return tuple(_read_attempt(item, f"{what}[{i}]") for i, item in enumerate(items))


def read_progress(data: object) -> Progress:
    """A progress record read from a stored value (see `Progress.from_dict`)."""
    return _read_progress(data, "progress")


# `TaskSnapshot.evolve` without the per-call introspection of `dataclasses.replace`: read
# every field at once, write them with plain attribute stores into an object of the same
# layout that is not frozen (`_Unfrozen`), then give it the `TaskSnapshot` class, which
# CPython allows between two classes with the same slots. A frozen dataclass refuses
# ``setattr``; writing through its slot descriptors instead costs twice as much.
_new_object = object.__new__
_SNAPSHOT_NAMES = tuple(f.name for f in dataclasses.fields(TaskSnapshot))
_SNAPSHOT_INDEX = {name: index for index, name in enumerate(_SNAPSHOT_NAMES)}
_snapshot_values = operator.attrgetter(*_SNAPSHOT_NAMES)


class _Unfrozen:
    """The slot layout of `TaskSnapshot` without its frozen ``__setattr__`` (see above).
    Only `TaskSnapshot.evolve` makes one, and turns it into a snapshot at once."""

    __slots__ = _SNAPSHOT_NAMES


def _fill(new: Any, v: list[Any]) -> None:
    """Write `v` (the fields in `_SNAPSHOT_NAMES` order) into `new`."""
    new.task_id = v[0]
    new.name = v[1]
    new.status = v[2]
    new.status_version = v[3]
    new.attempt = v[4]
    new.max_attempts = v[5]
    new.label = v[6]
    new.description = v[7]
    new.tags = v[8]
    new.priority = v[9]
    new.bucket = v[10]
    new.bucket_key = v[11]
    new.pipeline_id = v[12]
    new.node_id = v[13]
    new.progress = v[14]
    new.last_heartbeat_at = v[15]
    new.failure = v[16]
    new.outcome = v[17]
    new.created_at = v[18]
    new.updated_at = v[19]
    new.started_at = v[20]
    new.finished_at = v[21]
    new.retry_at = v[22]
    new.lease_owner = v[23]
    new.lease_until = v[24]
    new.executor = v[25]
    new.pid = v[26]
    new.paused_in_place = v[27]
    new.attempts = v[28]
    new.paused_seconds = v[29]
    new.durable = v[30]
    new.arguments = v[31]
    new.run_at = v[32]


class _UnfrozenTransition:
    """The slot layout of `Transition` without its frozen ``__setattr__`` (as `_Unfrozen`)."""

    __slots__ = tuple(f.name for f in dataclasses.fields(Transition))


def new_transition(
    task_id: str,
    from_status: TaskStatus,
    to_status: TaskStatus,
    trigger: str,
    actor: str,
    reason: str | None,
    status_version: int,
    at: datetime,
) -> Transition:
    """``Transition(...)`` for the state machine: the same object, made with plain
    attribute stores instead of the frozen dataclass's ``object.__setattr__`` per field."""
    t: Any = _new_object(_UnfrozenTransition)
    t.task_id = task_id
    t.from_status = from_status
    t.to_status = to_status
    t.trigger = trigger
    t.actor = actor
    t.reason = reason
    t.status_version = status_version
    t.at = at
    t.__class__ = Transition
    return t  # type: ignore[no-any-return]


def paused_through(snapshot: TaskSnapshot, end: datetime) -> float:
    """Seconds the current attempt of `snapshot` was paused in place up to `end`: the pauses
    it resumed from, plus the one under way (nothing is capped: the state machine counts
    with it when a pause ends)."""
    since = snapshot.paused_since
    if since is None:
        return snapshot.paused_seconds
    return snapshot.paused_seconds + max(0.0, (end - since).total_seconds())


def snapshots_by_id(snapshots: Iterable[TaskSnapshot]) -> dict[str, TaskSnapshot]:
    """Index snapshots by task id."""
    return {s.task_id: s for s in snapshots}


@dataclass(frozen=True, slots=True)
class SnapshotWrite:
    """One item of `TaskStore.save_many`: a create (``expect_version=None``) or a save."""

    snapshot: TaskSnapshot
    expect_version: int | None
    transitions: tuple[Transition, ...] = ()
