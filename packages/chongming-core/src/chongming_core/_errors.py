"""The error hierarchy (guide §10).

::

    TaskError
    ├─ InvalidTransition      an illegal status change (including failed guards)
    ├─ DependencyFailed       an upstream node did not succeed
    ├─ CircularDependency     the dependencies form a cycle
    ├─ TaskTimeout            a timeout expired
    ├─ TaskExecutionError     wraps an exception raised by user code (keeps __cause__)
    ├─ AttemptsExhausted      the attempt budget is spent
    ├─ ConcurrencyConflict    an optimistic write lost the race
    ├─ StoreError             the persistence layer failed
    │  └─ StoreNotFound       no store (at this schema) where one was to be opened only
    └─ ConfigurationError     the caller configured something that cannot work

    TaskCancelled             separate: a BaseException, like asyncio.CancelledError

Every error names the offending value and the way out, and carries the facts as
attributes (`task_id`, `status`, ...) so callers never parse messages.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chongming_core._status import TaskStatus

__all__ = [
    "AttemptsExhausted",
    "CircularDependency",
    "ConcurrencyConflict",
    "ConfigurationError",
    "DependencyFailed",
    "InvalidTransition",
    "StoreError",
    "StoreNotFound",
    "TaskCancelled",
    "TaskError",
    "TaskExecutionError",
    "TaskTimeout",
]


class TaskError(Exception):
    """The root of every error chongming raises (except `TaskCancelled`)."""

    def __init__(self, message: str, *, task_id: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.task_id = task_id

    def __str__(self) -> str:
        return self.message


class InvalidTransition(TaskError):
    """An action asked for a status change the table or a guard forbids.

    Attributes:
        current: the status the task is in.
        target: the status that was asked for (None when the action has no single target).
        action: the trigger of the refused action, e.g. ``executor:launched``.
        allowed: the statuses the task may move to now.
    """

    def __init__(
        self,
        *,
        task_id: str,
        current: TaskStatus,
        target: TaskStatus | None,
        action: str,
        allowed: Iterable[TaskStatus],
        detail: str | None = None,
    ) -> None:
        self.current = current
        self.target = target
        self.action = action
        self.allowed = frozenset(allowed)
        if self.allowed:
            allowed_text = ", ".join(sorted(s.value for s in self.allowed))
        else:
            allowed_text = "none (terminal)" if current.is_terminal else "none"
        target_text = target.value if target is not None else "?"
        message = (
            f"illegal transition of task {task_id!r}: {current.value} -> {target_text}; "
            f"action {action!r}; allowed now: {allowed_text}"
        )
        if detail:
            message = f"{message} ({detail})"
        super().__init__(message, task_id=task_id)


class DependencyFailed(TaskError):
    """An upstream node did not succeed, so this node cannot run."""

    def __init__(
        self, message: str, *, task_id: str | None = None, upstream: str | None = None
    ) -> None:
        super().__init__(message, task_id=task_id)
        self.upstream = upstream


class CircularDependency(TaskError):
    """The nodes of a pipeline depend on each other in a cycle."""

    def __init__(self, cycle: Iterable[str]) -> None:
        self.cycle = tuple(cycle)
        path = " -> ".join(self.cycle)
        super().__init__(
            f"circular dependency: {path}; a pipeline must be acyclic, remove one of these edges"
        )


class TaskTimeout(TaskError):
    """A timeout expired (`kind` is one of the three timeout failure kinds)."""

    def __init__(self, message: str, *, task_id: str | None = None, kind: str = "") -> None:
        super().__init__(message, task_id=task_id)
        self.kind = kind


class TaskExecutionError(TaskError):
    """Wraps an exception raised by user code; the original is ``__cause__``."""


class AttemptsExhausted(TaskError):
    """Another attempt was asked for, but the attempt budget is spent."""

    def __init__(self, *, task_id: str, attempt: int, max_attempts: int) -> None:
        self.attempt = attempt
        self.max_attempts = max_attempts
        super().__init__(
            f"task {task_id!r} has used {attempt} of {max_attempts} attempts; "
            "no attempt is left (raise max_attempts, or retry() it explicitly)",
            task_id=task_id,
        )


class ConcurrencyConflict(TaskError):
    """An optimistic write found another version than it expected.

    Attributes:
        expected: the version the writer based its change on (None for a create).
        actual: the version found in the store (None when the task does not exist).
    """

    def __init__(
        self,
        message: str,
        *,
        task_id: str | None = None,
        expected: int | None = None,
        actual: int | None = None,
    ) -> None:
        super().__init__(message, task_id=task_id)
        self.expected = expected
        self.actual = actual


class StoreError(TaskError):
    """The persistence layer failed; the message says which store and what to do.

    Attributes:
        locked: True when the call gave up waiting for the store's write lock, which
            another connection or process held (SQLite's busy timeout): nothing was
            written, the same call can succeed once the lock is released, and every
            other write would have waited for the same lock — a caller retrying writes
            need not try them one by one. (A lock on one row, PostgreSQL's
            ``lock_timeout``, is not the store's: other rows can still be written.)
    """

    def __init__(self, message: str, *, task_id: str | None = None, locked: bool = False) -> None:
        super().__init__(message, task_id=task_id)
        self.locked = locked


class StoreNotFound(StoreError):
    """A store opened with ``create=False`` found no chongming store where it looked (no
    file, an empty one, a database or schema without the tables), or one at an older
    schema that only opening it with ``create=True`` (the default) would migrate.
    Nothing was created or changed.

    Attributes:
        found: what is there instead, e.g. ``"the file does not exist"``.
        schema_version: the older schema version found (None: no chongming store at all).
    """

    def __init__(self, message: str, *, found: str, schema_version: int | None = None) -> None:
        super().__init__(message)
        self.found = found
        self.schema_version = schema_version


class ConfigurationError(TaskError):
    """The caller configured something that cannot work; the message says what to do instead."""


class TaskCancelled(BaseException):
    """Raised inside a task body by `checkpoint()` once a stop was requested.

    It derives from `BaseException`, like `asyncio.CancelledError`, so that the
    common ``except Exception:`` around a work loop cannot swallow a stop.
    """

    def __init__(self, reason: str | None = None, *, task_id: str | None = None) -> None:
        super().__init__(reason or "stop requested")
        self.reason = reason
        self.task_id = task_id
