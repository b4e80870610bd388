"""Helpers shared by the TaskRun tests (the tests folder is put on sys.path by conftest.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from chongming_core import FailureKind, TaskStatus
from chongming_runtime import TaskRun

__all__ = ["path", "st", "stop_flag", "timeout_kind", "wait_for"]


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


def wait_for(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """Poll `predicate` every 2 ms until it holds; fail after `timeout` seconds."""
    tick = threading.Event()
    for _ in range(int(timeout / 0.002)):
        if predicate():
            return
        tick.wait(0.002)
    raise AssertionError("condition not reached in time")


def checkpoint_until(ctx: Any, event: threading.Event) -> None:
    """A task body's wait: reach a checkpoint every 5 ms until `event` is set."""
    while not event.is_set():
        ctx.checkpoint()
        event.wait(0.005)
