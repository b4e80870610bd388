"""Helpers shared by the TaskRun tests (the tests folder is put on sys.path by conftest.py)."""

from __future__ import annotations

from chongming_core import FailureKind, TaskStatus
from chongming_runtime import TaskRun

__all__ = ["path", "pause_asked", "st", "stop_flag", "timeout_kind"]


def path(run: TaskRun) -> list[tuple[TaskStatus, TaskStatus]]:
    """The run's trajectory as (from, to) pairs."""
    return [(t.from_status, t.to_status) for t in run.transitions]


def st(run: TaskRun) -> TaskStatus:
    """The run's status, read afresh (keeps the type checker from narrowing it)."""
    return run.status


def timeout_kind(run: TaskRun) -> FailureKind | None:
    """The timeout that expired in the current attempt, if any."""
    attempt = run._attempt
    assert attempt is not None
    return attempt.timeout_kind


def stop_flag(run: TaskRun) -> bool:
    """Whether the current attempt's stop flag is set."""
    attempt = run._attempt
    assert attempt is not None
    return attempt.control.stop_requested


def pause_asked(run: TaskRun) -> bool:
    """Whether a pause of the run's body is pending (asked, applied or not yet)."""
    pauses = run._pauses
    return pauses is not None and pauses.ticket is not None
