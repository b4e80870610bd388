"""`Enqueuer`: durable tasks written for any worker to claim (`Controller.enqueue`).

A durable task is its registered name, its arguments as JSON and its options, written
``queued`` with no holder; nothing of it runs here. The process that enqueues needs no
task code: a name it did not register is written as given, and the worker that claims
it applies its own registration (retry policy, timeouts, default tags). A name it did
register lends the task that registration's description, tags and attempt budget at
once, so what the store shows (and the fleet limits count) is right from the start.

The write is durable before `enqueue` returns: one ``save_many`` (one transaction) for
a call, however many tasks it writes. Arguments that are not JSON are refused at the
call, naming the argument, and nothing is written.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from chongming_core import (
    BucketPolicy,
    Clock,
    ConfigurationError,
    SnapshotWrite,
    StateMachine,
    TaskSnapshot,
    TaskStore,
    durable_arguments,
    validate_tags,
)
from chongming_runtime.controller._registry import TaskRegistry
from chongming_runtime.support._ids import random_hex12
from chongming_runtime.support._text import refuse_control_characters, refuse_unstorable

__all__ = ["Enqueuer", "Job"]


@dataclass(frozen=True, slots=True, init=False)
class Job:
    """One task of `Controller.enqueue_many`: its arguments and, optionally, its own id,
    label, bucket key and priority.

    Example::

        controller.enqueue_many("sync", [Job("tenant-A", bucket_key="A"), ("tenant-B",)])
    """

    args: tuple[Any, ...]
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    task_id: str | None = None
    label: str | None = None
    bucket_key: str | None = None
    priority: int | None = None

    def __init__(
        self,
        *args: Any,
        task_id: str | None = None,
        label: str | None = None,
        bucket_key: str | None = None,
        priority: int | None = None,
        **kwargs: Any,
    ) -> None:
        object.__setattr__(self, "args", args)
        object.__setattr__(self, "kwargs", kwargs)
        object.__setattr__(self, "task_id", task_id)
        object.__setattr__(self, "label", label)
        object.__setattr__(self, "bucket_key", bucket_key)
        object.__setattr__(self, "priority", priority)


class IdsTaken(ConfigurationError):
    """`enqueue_many` was given ids that already exist: those tasks were not written, the
    others of the call were (each store writes a batch's other rows), and will run."""

    def __init__(self, message: str, *, taken: Sequence[str], written: Sequence[str]) -> None:
        super().__init__(message)
        #: the ids that already existed (not written by this call)
        self.taken: tuple[str, ...] = tuple(taken)
        #: the ids this call wrote, in the order of its items
        self.written: tuple[str, ...] = tuple(written)


def as_job(item: object, index: int) -> Job:
    """An item of `enqueue_many` as a `Job`: a `Job`, a tuple or list of positional
    arguments, or a mapping of keyword arguments."""
    if isinstance(item, Job):
        return item
    if isinstance(item, (tuple, list)):
        return Job(*item)
    if isinstance(item, Mapping):
        if not all(isinstance(key, str) for key in item):
            raise ConfigurationError(
                f"item {index} of enqueue_many() has a keyword that is not a str: "
                "keyword names are text"
            )
        return Job(**item)
    raise ConfigurationError(
        f"item {index} of enqueue_many() is {type(item).__name__}: pass a tuple of "
        "positional arguments, a dict of keyword arguments, or a Job(...)"
    )


def when_due(clock: Clock, delay: object, run_at: object) -> datetime | None:
    """The ``run_at`` of a task enqueued with `delay` (seconds or a timedelta) or `run_at`
    (a timezone-aware datetime); None for "now"."""
    if delay is not None and run_at is not None:
        raise ConfigurationError("pass delay or run_at, not both")
    if run_at is not None:
        if not isinstance(run_at, datetime) or run_at.utcoffset() is None:
            raise ConfigurationError(
                f"run_at must be a timezone-aware datetime, got {run_at!r}; e.g. "
                "datetime.now(UTC) + timedelta(minutes=5)"
            )
        try:
            run_at.astimezone(UTC)  # every store keeps times as UTC, years 1 to 9999
        except (OverflowError, ValueError):  # ("year 0 is out of range")
            raise ConfigurationError(
                f"run_at {run_at.isoformat()} is outside the years 1 to 9999 in UTC, the "
                "times a store keeps; pass a time within them"
            ) from None
        return run_at
    if delay is None:
        return None
    if isinstance(delay, timedelta):
        seconds = delay.total_seconds()
    elif isinstance(delay, (int, float)) and not isinstance(delay, bool):
        seconds = float(delay)
    else:
        raise ConfigurationError(f"delay must be seconds or a timedelta, got {delay!r}")
    if not math.isfinite(seconds) or seconds < 0:
        raise ConfigurationError(f"delay must be a finite number of seconds >= 0, got {delay!r}")
    if not seconds:
        return None
    try:
        due = clock.now() + timedelta(seconds=seconds)
        due.astimezone(UTC)  # (a clock in another zone could be within the year, UTC not)
        return due
    except OverflowError:  # beyond the year 9999
        raise ConfigurationError(
            f"delay {delay!r} puts the task past the year 9999, the last time a store "
            "keeps; pass a shorter delay (or run_at)"
        ) from None


@dataclass(frozen=True, slots=True)
class _Described:
    """What the registration of a name says of its enqueued tasks."""

    description: str | None
    max_attempts: int


class Enqueuer:
    """Writes durable tasks for a controller (one per controller).

    Args:
        store: where they are written (it must support durable work).
        registry: the controller's registrations (a name need not be one of them).
        bucket_policy: how a bucket key becomes a bucket.
        clock: stamps the tasks.
        owner: the actor of their ``queued`` transition.
        default_priority: the priority of a task enqueued without one.
    """

    def __init__(
        self,
        *,
        store: TaskStore,
        registry: TaskRegistry,
        bucket_policy: BucketPolicy,
        clock: Clock,
        owner: str,
        default_priority: int,
    ) -> None:
        self._store = store
        self._registry = registry
        self._policy = bucket_policy
        self._clock = clock
        self._owner = owner
        self._priority = default_priority

    def enqueue(
        self,
        name: str,
        jobs: Sequence[Job],
        *,
        label: str | None,
        tags: Iterable[str] | None,
        priority: int | None,
        bucket_key: str | None,
        delay: object,
        run_at: object,
        many: bool = False,
    ) -> list[str]:
        """Write one durable task per job, all in one transaction; returns their ids. With
        `many` (`enqueue_many`), a job refused is named by its index."""
        if not getattr(self._store, "supports_durable_work", False):
            raise ConfigurationError(
                f"{type(self._store).__name__} does not keep durable tasks: enqueue() needs "
                "a store that workers share (SqliteTaskStore, PostgresTaskStore or "
                "InMemoryTaskStore)"
            )
        if not isinstance(name, str) or not name:
            raise ConfigurationError(f"name must be a non-empty string, got {name!r}")
        refuse_unstorable("name", name)
        refuse_control_characters("name", name)
        due = when_due(self._clock, delay, run_at)
        registered = self._registry.find(name)
        if tags is not None:
            for tag in [tags] if isinstance(tags, str) else tags:
                refuse_unstorable("tag", tag)
        tag_set = validate_tags(tags) if tags is not None else None
        if tag_set is None:
            tag_set = registered.tags if registered is not None else frozenset()
        retry = registered.retry if registered is not None else None
        # what the store shows before any worker sees the task: the registration here, if any
        described = _Described(
            description=registered.description if registered is not None else None,
            max_attempts=retry.max_attempts if retry is not None else 1,
        )
        writes: list[SnapshotWrite] = []
        ids: list[str] = []
        for index, job in enumerate(jobs):
            try:
                machine = self._machine(
                    name, job, label, tag_set, priority, bucket_key, due, described
                )
            except ConfigurationError as exc:
                if not many:
                    raise
                raise ConfigurationError(f"item {index} of enqueue_many(): {exc}") from None
            # created and queued in one act: one moment (D170)
            created = machine.snapshot.created_at
            transition = machine.mark_queued(actor=self._owner, reason="enqueued", at=created)
            writes.append(SnapshotWrite(machine.snapshot, None, (transition,)))
            ids.append(machine.task_id)
        if len(set(ids)) != len(ids):
            raise ConfigurationError("enqueue_many() was given the same task_id twice")
        conflicts = self._store.save_many(writes) if writes else []
        if conflicts:
            refused = {c.task_id for c in conflicts}
            taken = ", ".join(repr(c.task_id) for c in conflicts[:5])
            if len(writes) == 1:
                raise ConfigurationError(
                    f"task id {taken} already exists; ids are never reused — enqueue under "
                    "a new id (the tasks of this call were not written)"
                )
            written = [task_id for task_id in ids if task_id not in refused]
            raise IdsTaken(
                f"task ids already exist: {taken}; ids are never reused — the other "
                f"{len(written)} tasks of this call were written and will run (their ids "
                "are the exception's `written`)",
                taken=[str(c.task_id) for c in conflicts],
                written=written,
            )
        return ids

    def _machine(
        self,
        name: str,
        job: Job,
        label: str | None,
        tags: frozenset[str],
        priority: int | None,
        bucket_key: str | None,
        due: datetime | None,
        described: _Described,
    ) -> StateMachine:
        """The machine of one job's task, every field checked (and the arguments made JSON
        as every store hands them back) before it is built."""
        task_id = job.task_id if job.task_id is not None else f"{name}-{random_hex12()}"
        if not isinstance(task_id, str) or not task_id.strip():
            raise ConfigurationError(f"task_id must be a non-empty string, got {task_id!r}")
        refuse_unstorable("task_id", task_id)
        chosen_label = job.label if job.label is not None else label
        if chosen_label is not None and not isinstance(chosen_label, str):
            raise ConfigurationError(f"label must be a string, got {chosen_label!r}")
        refuse_unstorable("label", chosen_label)
        key = job.bucket_key if job.bucket_key is not None else bucket_key
        if key is not None and not isinstance(key, str):
            raise ConfigurationError(f"bucket_key must be a string, got {key!r}")
        refuse_unstorable("bucket_key", key)
        chosen = job.priority if job.priority is not None else priority
        if chosen is None:
            chosen = self._priority
        if isinstance(chosen, bool) or not isinstance(chosen, int):
            raise ConfigurationError(f"priority must be an integer, got {chosen!r}")
        if not -(2**63) <= chosen < 2**63:
            raise ConfigurationError(
                f"priority {chosen} is out of range: stores keep it as a 64-bit integer"
            )
        arguments = durable_arguments(job.args, job.kwargs)
        now = self._clock.now()
        # every field was checked above (StateMachine.create would check the arguments
        # again, and make their JSON round trip a second time)
        snapshot = TaskSnapshot(
            task_id=task_id,
            name=name,
            max_attempts=described.max_attempts,
            label=chosen_label,
            description=described.description,
            tags=tags,
            priority=chosen,
            bucket=None if key is None else self._policy.bucket_for(key),
            bucket_key=key,
            created_at=now,
            updated_at=now,
            durable=True,
            arguments=arguments,
            run_at=due,
        )
        return StateMachine(snapshot, clock=self._clock)
