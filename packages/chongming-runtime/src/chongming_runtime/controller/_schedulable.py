"""`SchedulableRun`: what the scheduler asks of a run, and nothing more.

A `TaskRun` is one. These are the only run methods the `Scheduler` calls, listed in
one place, so that a change on the run side shows here first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from chongming_core import TaskSnapshot, TaskStatus

__all__ = ["SchedulableRun"]


class SchedulableRun(Protocol):
    """A run as the `Scheduler` sees it: queued by its admission, started once admitted."""

    @property
    def task_id(self) -> str:
        """The task's id (the key of its place in the queue and of the slot it holds)."""
        ...

    def stop(self, reason: str | None = None, *, actor: str | None = None) -> bool:
        """Request a stop (a run admitted after the scheduler closed ends so: R4)."""
        ...

    def scheduling_snapshot(self) -> TaskSnapshot:
        """A snapshot for the fields fixed at creation (priority, tags, bucket), read
        without the run's lock."""
        ...

    def admit_now(self) -> bool:
        """Record the admission if the run is still queued; False otherwise (D38)."""
        ...

    def kick(self) -> None:
        """Start the admitted attempt (outside the scheduler's lock)."""
        ...

    def needs_slot(self) -> tuple[TaskStatus, bool]:
        """The status now, and whether the run needs its execution slot now."""
        ...

    def when_body_returns(self, callback: Callable[[], None]) -> bool:
        """Call `callback` once a body abandoned after its graceful window returns; False,
        and no call, when no abandoned body is executing (D54)."""
        ...

    def hold_finish(self) -> Callable[[], None]:
        """Hold ``wait()`` and ``done`` until the returned callable is called."""
        ...
