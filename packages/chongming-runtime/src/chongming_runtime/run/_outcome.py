"""`TaskOutcome`: what a finished task amounts to (guide §3.3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from chongming_core import AttemptRecord, Failure, TaskSnapshot, TaskStatus

__all__ = ["TaskOutcome"]


@dataclass(frozen=True, slots=True)
class TaskOutcome:
    """The end of a task: status, value or failure, the final snapshot, the attempt history.

    Example::

        outcome = run_task(extract, "s3://bucket/x")
        if outcome.ok:
            print(outcome.value)
        else:
            print(outcome.status.value, outcome.failure.kind.value)
    """

    status: TaskStatus
    value: Any
    failure: Failure | None
    snapshot: TaskSnapshot
    attempts: tuple[AttemptRecord, ...]

    @property
    def ok(self) -> bool:
        """True when the task succeeded."""
        return self.status is TaskStatus.SUCCEEDED

    @property
    def task_id(self) -> str:
        """The task's id."""
        return self.snapshot.task_id

    @classmethod
    def from_snapshot(cls, snapshot: TaskSnapshot) -> TaskOutcome:
        """The outcome a snapshot describes (value only when it succeeded)."""
        succeeded = snapshot.status is TaskStatus.SUCCEEDED
        return cls(
            status=snapshot.status,
            value=snapshot.outcome if succeeded else None,
            failure=None if succeeded else snapshot.failure,
            snapshot=snapshot,
            attempts=snapshot.attempts,
        )
