"""What a `TaskRun` tells its observers (a `Controller`, a store writer, a dashboard).

Listeners are called **after** the change and **outside** the run's lock, in the
order the changes happened, by one thread at a time. A listener may therefore
call back into the run (``stop()``, ``snapshot``) without any risk of deadlock;
a slow listener only delays the next notification. ``wait()`` returns only after
every listener has seen the terminal transition ("durable before told").
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from chongming_core import TaskSnapshot, Transition

if TYPE_CHECKING:
    from chongming_runtime.run._task_run import TaskRun

__all__ = ["RunEvent", "RunListener"]


@runtime_checkable
class RunListener(Protocol):
    """Observes one or more runs."""

    def on_transition(self, run: TaskRun, transition: Transition, snapshot: TaskSnapshot) -> None:
        """A status change (`snapshot` is the task right after it, side fields included)."""
        ...

    def on_side_update(self, run: TaskRun, snapshot: TaskSnapshot) -> None:
        """A side-path change (progress) that did not bump ``status_version``.

        Heartbeats are not pushed (they happen at every checkpoint): read
        ``run.snapshot.last_heartbeat_at`` when flushing, e.g. every ``touch_interval``.
        """
        ...


@dataclass(frozen=True, slots=True)
class RunEvent:
    """One queued notification: a transition, or a side update when `transition` is None."""

    snapshot: TaskSnapshot
    transition: Transition | None = None
